package log

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// txnRun is a log of transactional and plain batches appended through the
// partition API, and what readers must see of it.
type txnRun struct {
	values map[int64]string // every data record by offset
	status map[int64]byte   // 'c' committed or plain, 'a' aborted, 'o' open
	open   map[int64][]int64
	seq    map[int64]int32
	plain  int
}

func newTxnRun() *txnRun {
	return &txnRun{values: map[int64]string{}, status: map[int64]byte{}, open: map[int64][]int64{}, seq: map[int64]int32{}}
}

// step appends one random thing to p: a plain batch, a transactional batch
// of one of four producers (opening its transaction), or the marker that
// ends an open one.
func (r *txnRun) step(t *testing.T, p *Partition, rng *rand.Rand) {
	t.Helper()
	switch k := rng.IntN(10); {
	case k < 2:
		n := 1 + rng.IntN(3)
		recs := make([]Record, n)
		for i := range recs {
			recs[i].Value = fmt.Appendf(nil, "plain-%d", r.plain)
			r.plain++
		}
		base, err := p.Append(recs...)
		require.NoError(t, err)
		for i := range recs {
			r.values[base+int64(i)], r.status[base+int64(i)] = string(recs[i].Value), 'c'
		}
	case k < 7:
		pid := int64(1 + rng.IntN(4))
		n := 1 + rng.IntN(4)
		base, _, err := p.AppendBatch(txnProduce(pid, 0, r.seq[pid], n))
		require.NoError(t, err)
		for i := range n {
			off := base + int64(i)
			r.values[off], r.status[off] = fmt.Sprintf("p%d-e0-s%d", pid, int(r.seq[pid])+i), 'o'
			r.open[pid] = append(r.open[pid], off)
		}
		r.seq[pid] += int32(n)
	default:
		for pid, offs := range r.open {
			commit := rng.IntN(2) == 0
			_, err := p.AppendMarker(markerOf(pid, 0, 0, commit))
			require.NoError(t, err)
			for _, off := range offs {
				r.status[off] = map[bool]byte{true: 'c', false: 'a'}[commit]
			}
			delete(r.open, pid)
			break
		}
	}
}

// lso is the model's last stable offset of p.
func (r *txnRun) lso(p *Partition) int64 {
	lso := p.HighWatermark()
	for _, offs := range r.open {
		lso = min(lso, offs[0])
	}
	return lso
}

// committed returns the values a READ_COMMITTED reader reads from from:
// committed or plain, below the LSO.
func (r *txnRun) committed(p *Partition, from int64) []string {
	var out []string
	for off := from; off < r.lso(p); off++ {
		if r.status[off] == 'c' {
			out = append(out, r.values[off])
		}
	}
	return out
}

// all returns the values of every data record from from below the high
// watermark: what a READ_UNCOMMITTED reader reads.
func (r *txnRun) all(p *Partition, from int64) []string {
	var out []string
	for off := from; off < p.HighWatermark(); off++ {
		if v, ok := r.values[off]; ok {
			out = append(out, v)
		}
	}
	return out
}

func txnValues(recs []Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, string(r.Value))
	}
	return out
}

func collectIsolated(t *testing.T, p *Partition, from int64, level IsolationLevel) []string {
	t.Helper()
	var out []string
	for rec, err := range p.RecordsIsolated(from, level) {
		require.NoError(t, err)
		out = append(out, string(rec.Value))
	}
	return out
}

// fetchAll reads p from from with Broker.Fetch at isolation iso, in small
// fetches, decoding as the Consumer does, up to the bound of iso.
func fetchAll(t *testing.T, b *Broker, p *Partition, from int64, iso FetchIsolation) []string {
	t.Helper()
	var out []string
	var ab abortFilter
	for off := from; ; {
		resp, err := b.Fetch(context.Background(), FetchRequest{
			Partitions: []FetchPartition{{TopicPartition: TopicPartition{Topic: p.topic, Partition: p.id}, Offset: off, MaxBytes: 200}},
			MaxWait:    time.Nanosecond, Isolation: iso,
		})
		require.NoError(t, err)
		fp := resp.Partitions[0]
		require.NoError(t, fp.Err)
		require.Equal(t, p.LastStableOffset(), fp.LastStableOffset)
		raw, err := fp.Records.Bytes()
		require.NoError(t, err)
		resp.Release()
		if len(raw) == 0 {
			return out
		}
		if iso != FetchTxnCommitted {
			require.Nil(t, fp.AbortedTransactions)
		}
		var hdrs []Header
		var f *abortFilter
		if iso == FetchTxnCommitted {
			f = &ab
			f.reset(fp.AbortedTransactions)
		}
		recs, next, err := decodeBuiltFrom(nil, &hdrs, raw, nil, f, fp.TopicPartition, off)
		require.NoError(t, err)
		require.Greater(t, next, off)
		out = append(out, txnValues(recs)...)
		off = next
	}
}

// TestReadCommitted: over a log of interleaved transactions of four
// producers, committed, aborted and open, with plain records between and
// segments of 2 KiB, a READ_COMMITTED reader (Records, Broker.Fetch with
// the aborted transactions, the Consumer) sees exactly the committed and
// plain records below the LSO, from every start offset; a READ_UNCOMMITTED
// one every data record; neither a marker. After a restart (the .txnindex
// read back from the files) the same.
func TestReadCommitted(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 27))
			fs := vfs.NewMem()
			b, err := Open("/d", Config{FS: fs})
			require.NoError(t, err)
			p := createT(t, b, "t", small)
			r := newTxnRun()
			for range 150 {
				r.step(t, p, rng)
			}
			require.Equal(t, r.lso(p), p.LastStableOffset())
			require.Greater(t, len(*p.segs.Load()), 3, "several segments")
			check := func(b *Broker, p *Partition) {
				for from := p.StartOffset(); from < p.HighWatermark(); from += 1 + int64(rng.IntN(20)) {
					require.Equal(t, r.committed(p, from), collectIsolated(t, p, from, ReadCommitted), "Records read_committed from %d", from)
					require.Equal(t, r.all(p, from), collectIsolated(t, p, from, ReadUncommitted), "Records read_uncommitted from %d", from)
					require.Equal(t, r.committed(p, from), fetchAll(t, b, p, from, FetchTxnCommitted), "fetch read_committed from %d", from)
					require.Equal(t, r.all(p, from), fetchAll(t, b, p, from, FetchHighWatermark), "fetch read_uncommitted from %d", from)
				}
				for _, level := range []IsolationLevel{ReadCommitted, ReadUncommitted} {
					c, err := NewConsumer(b, ConsumerConfig{Topics: []string{"t"}, Isolation: level, PartitionMaxBytes: 300, MaxWait: time.Millisecond})
					require.NoError(t, err)
					want, end := r.committed(p, 0), p.LastStableOffset()
					if level == ReadUncommitted {
						want, end = r.all(p, 0), p.HighWatermark()
					}
					var got []string
					for {
						pos, err := c.Position("t", 0)
						require.NoError(t, err)
						if pos >= end {
							break
						}
						recs, err := c.Poll(context.Background())
						require.NoError(t, err)
						got = append(got, txnValues(recs)...)
					}
					require.Equal(t, want, got, "consumer %v", level)
					require.NoError(t, c.Close())
				}
			}
			check(b, p)
			require.NoError(t, b.Close())
			b, err = Open("/d", Config{FS: fs})
			require.NoError(t, err)
			defer b.Close()
			p, err = b.Partition("t", 0)
			require.NoError(t, err)
			require.Equal(t, r.lso(p), p.LastStableOffset())
			check(b, p)
		})
	}
}

// TestAbortedTransactionsOfRange: Kafka's collectAbortedTransactions: the
// aborted transactions whose marker is at or after from and which begin
// below to, across segments.
func TestAbortedTransactionsOfRange(t *testing.T) {
	b, err := Open("/d", Config{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer b.Close()
	p := createT(t, b, "t", small)
	_, _, err = p.AppendBatch(txnProduce(1, 0, 0, 2)) // 0, 1
	require.NoError(t, err)
	_, _, err = p.AppendBatch(txnProduce(2, 0, 0, 2)) // 2, 3
	require.NoError(t, err)
	_, err = p.AppendMarker(markerOf(1, 0, 0, false)) // 4
	require.NoError(t, err)
	appendN(t, p, 80, 2)                              // 5..164: several segments
	_, err = p.AppendMarker(markerOf(2, 0, 0, false)) // 165
	require.NoError(t, err)
	_, _, err = p.AppendBatch(txnProduce(1, 0, 2, 1)) // 166
	require.NoError(t, err)
	_, err = p.AppendMarker(markerOf(1, 0, 0, true)) // 167: a commit, no entry
	require.NoError(t, err)
	require.Greater(t, len(*p.segs.Load()), 2)

	for _, tc := range []struct {
		from, to int64
		want     []AbortedTransaction
	}{
		{0, 1, []AbortedTransaction{{1, 0}}},
		{0, 3, []AbortedTransaction{{1, 0}, {2, 2}}},
		{5, 10, []AbortedTransaction{{2, 2}}},
		{4, 5, []AbortedTransaction{{1, 0}, {2, 2}}},
		{166, 168, nil},
		{100, 101, []AbortedTransaction{{2, 2}}},
	} {
		got, err := p.AbortedTransactions(nil, tc.from, tc.to)
		require.NoError(t, err)
		require.Equal(t, tc.want, got, "[%d, %d)", tc.from, tc.to)
	}
}

// TestReadCommittedLongPoll: a READ_COMMITTED fetch parked behind an open
// transaction wakes when its marker moves the LSO (the high watermark did
// not move), and a READ_UNCOMMITTED one was answered at once.
func TestReadCommittedLongPoll(t *testing.T) {
	b, err := Open("/d", Config{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer b.Close()
	p := createT(t, b, "t", small)
	_, _, err = p.AppendBatch(txnProduce(1, 0, 0, 2)) // 0, 1
	require.NoError(t, err)
	req := FetchRequest{Partitions: []FetchPartition{{TopicPartition: TopicPartition{Topic: "t"}}}, MaxWait: time.Minute, Isolation: FetchTxnCommitted}

	un := req
	un.Isolation = FetchHighWatermark
	resp, err := b.Fetch(context.Background(), un)
	require.NoError(t, err)
	require.Positive(t, resp.Partitions[0].Records.Len())
	require.EqualValues(t, 0, resp.Partitions[0].LastStableOffset)
	resp.Release()

	done := make(chan FetchResponse, 1)
	go func() {
		resp, err := b.Fetch(context.Background(), req)
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	require.Eventually(t, func() bool { return b.fetches.Pending() > 0 }, time.Minute, time.Millisecond, "the fetch parks")
	select {
	case <-done:
		t.Fatal("answered before the marker")
	default:
	}
	_, err = p.AppendMarker(markerOf(1, 0, 0, true))
	require.NoError(t, err)
	select {
	case resp := <-done:
		defer resp.Release()
		fp := resp.Partitions[0]
		require.EqualValues(t, 3, fp.LastStableOffset)
		raw, err := fp.Records.Bytes()
		require.NoError(t, err)
		var hdrs []Header
		var ab abortFilter
		ab.reset(fp.AbortedTransactions)
		recs, _, err := decodeBuiltFrom(nil, &hdrs, raw, nil, &ab, fp.TopicPartition, 0)
		require.NoError(t, err)
		require.Equal(t, []string{"p1-e0-s0", "p1-e0-s1"}, txnValues(recs))
	case <-time.After(time.Minute):
		t.Fatal("the marker did not wake the fetch")
	}
}

// TestReadCommittedListOffset: latest at read_committed is the LSO, and a
// READ_COMMITTED consumer with ResetLatest starts there: it reads the
// transaction open when it started once it commits.
func TestReadCommittedListOffset(t *testing.T) {
	b, err := Open("/d", Config{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer b.Close()
	p := createT(t, b, "t", small)
	_, err = p.Append(Record{Value: []byte("before")})
	require.NoError(t, err)
	_, _, err = p.AppendBatch(txnProduce(1, 0, 0, 1)) // 1
	require.NoError(t, err)
	_, err = p.Append(Record{Value: []byte("plain")}) // 2
	require.NoError(t, err)
	tp := TopicPartition{Topic: "t"}
	off, err := b.ListOffset(context.Background(), tp, LatestStableOffset)
	require.NoError(t, err)
	require.EqualValues(t, 1, off)
	off, err = b.ListOffset(context.Background(), tp, LatestOffset)
	require.NoError(t, err)
	require.EqualValues(t, 3, off)

	c, err := NewConsumer(b, ConsumerConfig{Topics: []string{"t"}, Reset: ResetLatest, Isolation: ReadCommitted, MaxWait: time.Millisecond})
	require.NoError(t, err)
	defer c.Close()
	pos, err := c.Position("t", 0)
	require.NoError(t, err)
	require.EqualValues(t, 1, pos)
	_, err = p.AppendMarker(markerOf(1, 0, 0, true))
	require.NoError(t, err)
	var got []string
	for len(got) < 2 {
		recs, err := c.Poll(context.Background())
		require.NoError(t, err)
		got = append(got, txnValues(recs)...)
	}
	require.Equal(t, []string{"p1-e0-s0", "plain"}, got)

	_, err = NewConsumer(b, ConsumerConfig{Topics: []string{"t"}, Isolation: 7})
	require.ErrorIs(t, err, ErrInvalidConfig)
	for _, err := range p.RecordsIsolated(0, 7) {
		require.ErrorIs(t, err, ErrInvalidConfig)
	}
}

// BenchmarkFetchReadCommitted: a Consumer-style fetch and decode of 64 KiB
// at read_committed over a log where every fourth transaction of four
// producers is aborted, against the same at read_uncommitted.
func BenchmarkFetchReadCommitted(b *testing.B) {
	br, err := Open(b.TempDir(), Config{FS: vfs.NewMem()})
	require.NoError(b, err)
	defer br.Close()
	p, err := br.CreateTopic("t", TopicConfig{SegmentBytes: 1 << 20})
	require.NoError(b, err)
	part, err := p.Partition(0)
	require.NoError(b, err)
	seq := map[int64]int32{}
	for i := range 2000 {
		pid := int64(1 + i%4)
		_, _, err := part.AppendBatch(txnProduce(pid, 0, seq[pid], 10))
		require.NoError(b, err)
		seq[pid] += 10
		_, err = part.AppendMarker(markerOf(pid, 0, 0, i%4 != 0))
		require.NoError(b, err)
	}
	for _, iso := range []FetchIsolation{FetchHighWatermark, FetchTxnCommitted} {
		b.Run(iso.String(), func(b *testing.B) {
			req := FetchRequest{Partitions: []FetchPartition{{TopicPartition: TopicPartition{Topic: "t"}, MaxBytes: 64 << 10}}, MaxWait: time.Nanosecond, Isolation: iso}
			var ab abortFilter
			var recs []Record
			var hdrs []Header
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				req.Partitions[0].Offset = int64(i*997) % (part.EndOffset() - 100)
				resp, err := br.Fetch(context.Background(), req)
				if err != nil {
					b.Fatal(err)
				}
				fp := &resp.Partitions[0]
				raw, err := fp.Records.Bytes()
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(raw)))
				var f *abortFilter
				if iso == FetchTxnCommitted {
					f = &ab
					f.reset(fp.AbortedTransactions)
				}
				recs, _, err = decodeBuiltFrom(recs[:0], &hdrs, raw, nil, f, fp.TopicPartition, req.Partitions[0].Offset)
				if err != nil {
					b.Fatal(err)
				}
				resp.Release()
				hdrs = hdrs[:0]
			}
		})
	}
}
