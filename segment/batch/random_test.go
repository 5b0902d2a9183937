package batch

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// TestRandomRoundTrip builds batches of random records, checks that they decode to the
// same records, that a random flip under the CRC is ErrCorrupt and that a random cut is
// ErrShort. Replay a failure with STRATA_BATCH_SEED=<seed>; STRATA_SOAK=1 runs 100x more.
func TestRandomRoundTrip(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("STRATA_BATCH_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("STRATA_BATCH_SEED: %v", err)
		}
	}
	t.Logf("seed %d (replay with STRATA_BATCH_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	iterations := 300
	if os.Getenv("STRATA_SOAK") != "" {
		iterations = 30000
	}
	var bd Builder
	for it := range iterations {
		recs := randomRecords(rng)
		if len(recs) > 0 {
			bd.Reset(recs[0].Timestamp)
		} else {
			bd.Reset(rng.Int64())
		}
		for _, r := range recs {
			bd.Append(r.Timestamp, r.Key, r.Value, r.Headers)
		}
		b := bd.Bytes()
		base := rng.Int64N(1 << 50)
		SetBaseOffset(b, base)
		for i := range recs {
			recs[i].Offset = base + int64(i)
		}
		_, got, err := decodeAll(b)
		if err != nil {
			t.Fatalf("iteration %d: %v", it, err)
		}
		if err := equalRecs(got, recs); err != nil {
			t.Fatalf("iteration %d: %v", it, err)
		}

		i := offCRC + rng.IntN(len(b)-offCRC)
		bit := byte(1) << rng.IntN(8)
		b[i] ^= bit
		if _, err := Validate(b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("iteration %d: byte %d ^ %#x: %v, want ErrCorrupt", it, i, bit, err)
		}
		b[i] ^= bit
		if _, err := Validate(b[:rng.IntN(len(b))]); !errors.Is(err, ErrShort) {
			t.Fatalf("iteration %d: cut batch: %v, want ErrShort", it, err)
		}
	}
}

func randomRecords(rng *rand.Rand) []rec {
	n := rng.IntN(50)
	if rng.IntN(10) == 0 {
		n = rng.IntN(2000)
	}
	base := rng.Int64N(1<<42) - 1<<40
	recs := make([]rec, n)
	for i := range recs {
		ts := base + rng.Int64N(200000) - 100000
		switch rng.IntN(20) {
		case 0:
			ts = math.MaxInt64 - rng.Int64N(10)
		case 1:
			ts = math.MinInt64 + rng.Int64N(10)
		}
		recs[i] = rec{Timestamp: ts, Key: randomBytes(rng, 40), Value: randomBytes(rng, 3000)}
		for range rng.IntN(4) {
			recs[i].Headers = append(recs[i].Headers, RecordHeader{
				Key:   string(randomBytes(rng, 20)),
				Value: randomBytes(rng, 50),
			})
		}
	}
	return recs
}

// randomBytes returns nil, empty or up to max random bytes.
func randomBytes(rng *rand.Rand, max int) []byte {
	switch rng.IntN(8) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	b := make([]byte, rng.IntN(max+1))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}
