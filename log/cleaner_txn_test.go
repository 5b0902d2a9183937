package log

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-log/strata/index"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// txnKeyed is a batch of records with keys keys (values key@offset is not
// known yet: the value is the key and n), of producer pid at seq, marked
// transactional if txn.
func txnKeyed(pid int64, seq int32, txn bool, keys ...string) []byte {
	var bd batch.Builder
	ts := time.Now().UnixMilli()
	bd.Reset(ts)
	if pid >= 0 {
		bd.SetProducer(pid, 0, seq)
	}
	for _, k := range keys {
		var v []byte
		if !strings.HasPrefix(k, "-") { // "-k": a tombstone of k
			v = []byte(fmt.Sprint(k, "/p", pid))
		}
		bd.Append(ts, []byte(strings.TrimPrefix(k, "-")), v, nil)
	}
	b := bytes.Clone(bd.Bytes())
	if txn {
		b[22] |= 0x10
		batch.SetCRC(b)
	}
	return b
}

// layout describes every batch of p in order: "offset:key" per record of
// a data batch ("offset:-key" for a tombstone), "C@offset" or "A@offset"
// for a marker ("C@offset+h" when it has a delete horizon), "E@offset" for
// an empty batch.
func layout(t *testing.T, p *Partition) []string {
	t.Helper()
	raw := allBatches(t, p)
	var out []string
	for len(raw) > 0 {
		h, b, err := nextBatch(raw)
		require.NoError(t, err)
		raw = raw[len(b):]
		switch {
		case h.Control():
			m, _, err := batch.ParseMarker(b)
			require.NoError(t, err)
			s := fmt.Sprintf("%s@%d", map[bool]string{true: "C", false: "A"}[m.Commit], h.BaseOffset)
			if _, ok := h.DeleteHorizon(); ok {
				s += "+h"
			}
			out = append(out, s)
		case h.NumRecords == 0:
			out = append(out, fmt.Sprintf("E@%d", h.BaseOffset))
		default:
			require.NoError(t, batch.Records(b, h, func(r *batch.Record) error {
				k := string(r.Key)
				if r.Value == nil {
					k = "-" + k
				}
				out = append(out, fmt.Sprintf("%d:%s", r.Offset, k))
				return nil
			}))
		}
	}
	return out
}

// committedView is what a READ_COMMITTED reader of p finds: the latest
// value of each key.
func committedView(t *testing.T, p *Partition) map[string]string {
	t.Helper()
	out := map[string]string{}
	for r, err := range p.RecordsIsolated(p.StartOffset(), ReadCommitted) {
		require.NoError(t, err)
		if r.Value == nil {
			delete(out, string(r.Key))
		} else {
			out[string(r.Key)] = string(r.Value)
		}
	}
	return out
}

// txnOp is one step of a cleaner table test: an append (plain, txn), a
// marker, a roll, or a cleaner run at a time.
type txnOp struct {
	plain  []string // non-transactional records of these keys
	pid    int64    // with txn: the producer
	txn    []string // a transactional batch of these keys
	commit int64    // a COMMIT marker of this producer
	abort  int64    // an ABORT marker of this producer
	roll   bool
	clean  time.Duration // run the cleaner at t0 + clean (clean > 0)
	// what the log holds after a clean
	want []string
	// the .txnindex entries after a clean, by (first, last) offsets
	index [][2]int64
}

// TestCleanerTransactions runs Kafka's LogCleanerTest transaction cases:
// the batches left after each pass, the .txnindex, and a READ_COMMITTED
// reader's view, which no pass changes.
func TestCleanerTransactions(t *testing.T) {
	const ret = time.Minute // DeleteRetention
	c := func(d time.Duration, want []string, idx ...[2]int64) txnOp {
		return txnOp{clean: d, want: want, index: idx}
	}
	for _, tc := range []struct {
		name string
		ops  []txnOp
	}{
		{"commit marker removed once its data is gone, a delete retention later (testCommitMarkerRemoval)", []txnOp{
			{pid: 1, txn: []string{"k1"}}, {pid: 1, txn: []string{"k2"}}, {pid: 1, txn: []string{"k2"}}, {commit: 1}, // 0 1 2 C3
			{plain: []string{"k2"}}, {plain: []string{"k3"}}, {roll: true}, // 4 5
			// The producer's last data batch stays, emptied (its sequence).
			c(time.Second, []string{"0:k1", "E@2", "C@3", "4:k2", "5:k3"}),
			{pid: 1, txn: []string{"k1"}}, {commit: 1}, {roll: true}, // 6 C7
			// The marker's transaction still had batches: kept, no horizon.
			c(2*time.Second, []string{"C@3", "4:k2", "5:k3", "6:k1", "C@7"}),
			// Its data is gone now: the marker gets a delete horizon...
			c(3*time.Second, []string{"C@3+h", "4:k2", "5:k3", "6:k1", "C@7"}),
			// ...and goes after it.
			c(3*time.Second+ret, []string{"4:k2", "5:k3", "6:k1", "C@7"}),
		}},
		{"abort: the data goes at once, the marker after a delete retention (testAbortMarkerRemoval)", []txnOp{
			{pid: 1, txn: []string{"k1"}}, {pid: 1, txn: []string{"k2"}}, {abort: 1}, // 0 1 A2
			{plain: []string{"k3"}}, {roll: true}, // 3
			// The marker stays while the pass removes its data, with its
			// .txnindex entry.
			c(time.Second, []string{"E@1", "A@2", "3:k3"}, [2]int64{0, 2}),
			{pid: 1, txn: []string{"k4"}}, {commit: 1}, {roll: true}, // 4 C5
			c(2*time.Second, []string{"A@2", "3:k3", "4:k4", "C@5"}, [2]int64{0, 2}),
			c(3*time.Second, []string{"A@2+h", "3:k3", "4:k4", "C@5"}),
			c(3*time.Second+ret, []string{"3:k3", "4:k4", "C@5"}),
		}},
		{"aborted records never supersede committed ones", []txnOp{
			{plain: []string{"k1", "k2"}},              // 0 1
			{pid: 1, txn: []string{"k1", "k2"}},        // 2 3
			{abort: 1},                                 // A4
			{pid: 2, txn: []string{"k2"}}, {commit: 2}, // 5 C6
			{plain: []string{"k9"}}, {roll: true}, // 7
			c(time.Second, []string{"0:k1", "E@2", "A@4", "5:k2", "C@6", "7:k9"}, [2]int64{2, 4}),
		}},
		{"an open transaction is never cleaned (testUndecidedTransactionalDataNotCleaned)", []txnOp{
			{plain: []string{"k1"}}, {roll: true}, // 0
			{pid: 1, txn: []string{"k1"}}, {roll: true}, // 1: open
			{plain: []string{"k1"}}, {roll: true}, // 2
			// The LSO is 1: only the first segment is cleanable.
			c(time.Second, []string{"0:k1", "1:k1", "2:k1"}),
			{abort: 1}, {roll: true}, // A3
			c(2*time.Second, []string{"E@1", "2:k1", "A@3"}, [2]int64{1, 3}),
		}},
		{"an aborted transaction spanning segments (testAbortedTransactionSpanningSegments)", []txnOp{
			{pid: 1, txn: []string{"k1"}}, {roll: true}, // 0
			{plain: []string{"k2"}}, {roll: true}, // 1
			{pid: 1, txn: []string{"k3"}}, {abort: 1}, {roll: true}, // 2 A3
			{plain: []string{"k4"}}, {roll: true}, // 4
			c(time.Second, []string{"1:k2", "E@2", "A@3", "4:k4"}, [2]int64{0, 3}),
		}},
		{"a committed transaction spanning segments keeps its marker (testCommittedTransactionSpanningSegments)", []txnOp{
			{pid: 1, txn: []string{"k1"}}, {roll: true}, // 0
			{plain: []string{"k2"}}, {roll: true}, // 1
			{commit: 1}, {roll: true}, // C2
			{plain: []string{"k3"}}, {roll: true}, // 3
			c(time.Second, []string{"0:k1", "1:k2", "C@2", "3:k3"}),
			c(time.Second+2*ret, []string{"0:k1", "1:k2", "C@2", "3:k3"}),
		}},
		{"a producer's last data batch stays, emptied, and so does the marker after it", []txnOp{
			{pid: 1, txn: []string{"k1"}}, {commit: 1}, // 0 C1
			{plain: []string{"k1"}}, {roll: true}, // 2
			c(time.Second, []string{"E@0", "C@1", "2:k1"}),
			c(2*time.Second+2*ret, []string{"E@0", "C@1", "2:k1"}),
		}},
		{"a control key is not a record key", []txnOp{
			{pid: 1, txn: []string{"a"}}, {commit: 1}, // 0 C1
			{pid: 2, txn: []string{"b"}}, {commit: 2}, // 2 C3
			{plain: []string{"\x00\x00\x00\x01", "\x00\x00\x00\x00"}}, {roll: true}, // 4 5: the control keys of COMMIT and ABORT
			c(time.Second, []string{"0:a", "C@1", "2:b", "C@3", "4:\x00\x00\x00\x01", "5:\x00\x00\x00\x00"}),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			cfg := TopicConfig{SegmentBytes: 1 << 20, DeleteRetention: ret, MinCleanableDirtyRatio: 0.0001}
			b, p := compacted(t, fs, cfg, Config{})
			defer func() { b.Close() }()
			seq := map[int64]int32{}
			var view map[string]string
			for i, op := range tc.ops {
				switch {
				case op.plain != nil:
					_, _, err := p.AppendBatch(txnKeyed(-1, -1, false, op.plain...))
					require.NoError(t, err)
				case op.txn != nil:
					_, _, err := p.AppendBatch(txnKeyed(op.pid, seq[op.pid], true, op.txn...))
					require.NoError(t, err)
					seq[op.pid] += int32(len(op.txn))
				case op.commit > 0:
					_, err := p.AppendMarker(markerOf(op.commit, 0, 0, true))
					require.NoError(t, err)
				case op.abort > 0:
					_, err := p.AppendMarker(markerOf(op.abort, 0, 0, false))
					require.NoError(t, err)
				case op.roll:
					require.NoError(t, p.Roll())
				case op.clean > 0:
					view = committedView(t, p)
					lso := p.LastStableOffset()
					// A pass over the whole log, as Kafka's tests call
					// doClean from the log start.
					b.cleaner.firstDirty[TopicPartition{Topic: "c"}] = 0
					passes, err := b.cleaner.run(t0.Add(op.clean))
					require.NoError(t, err)
					require.Equal(t, 1, passes, "step %d", i)
					require.Empty(t, b.cleaner.uncleanable)
					require.Equal(t, op.want, layout(t, p), "step %d", i)
					var idx [][2]int64
					for _, e := range abortedTxns(t, p) {
						idx = append(idx, [2]int64{e.FirstOffset, e.LastOffset})
					}
					require.Equal(t, op.index, idx, "step %d: .txnindex", i)
					require.Equal(t, view, committedView(t, p), "step %d: a READ_COMMITTED reader sees the same", i)
					require.Equal(t, lso, p.LastStableOffset(), "step %d", i)
				}
			}
			// A restart (its .txnindex read back, its producer state
			// replayed from the cleaned log) sees the same.
			want, lso := layout(t, p), p.LastStableOffset()
			require.NoError(t, b.Close())
			b, p = compacted(t, fs, cfg, Config{})
			require.Equal(t, want, layout(t, p))
			require.Equal(t, lso, p.LastStableOffset())
			require.Equal(t, view, committedView(t, p))
		})
	}
}

// TestCleanerTransactionsRandom: random transactional and plain appends of
// a few keys by four producers, markers, rolls and cleaner passes at
// growing times; after every pass a READ_COMMITTED reader's latest value of
// each key is the model's, no aborted record is left, and every marker of
// a transaction with records left is still there. A restart and a crash
// image agree.
func TestCleanerTransactionsRandom(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 98))
			fs := vfs.NewMem()
			cfg := TopicConfig{SegmentBytes: 700, DeleteRetention: time.Minute, MinCleanableDirtyRatio: 0.0001}
			b, p := compacted(t, fs, cfg, Config{})
			defer func() { b.Close() }()
			seq := map[int64]int32{}
			type rec struct {
				off      int64
				key, val string
			}
			open := map[int64][]rec{}
			latest := map[string]rec{} // committed: key → its latest record
			set := func(r rec) {
				if l, ok := latest[r.key]; !ok || l.off < r.off {
					latest[r.key] = r
				}
			}
			model := func() map[string]string {
				out := map[string]string{}
				for k, r := range latest {
					out[k] = r.val
				}
				return out
			}
			now := time.Duration(0)
			for step := range 400 {
				k := func() string { return fmt.Sprint("k", rng.IntN(6)) }
				switch r := rng.IntN(20); {
				case r < 5:
					key := k()
					base, _, err := p.AppendBatch(txnKeyed(-1, -1, false, key))
					require.NoError(t, err)
					set(rec{base, key, key + "/p-1"})
				case r < 12:
					pid := int64(1 + rng.IntN(4))
					keys := []string{k(), k()}
					base, _, err := p.AppendBatch(txnKeyed(pid, seq[pid], true, keys...))
					require.NoError(t, err)
					seq[pid] += 2
					for i, key := range keys {
						open[pid] = append(open[pid], rec{base + int64(i), key, fmt.Sprint(key, "/p", pid)})
					}
				case r < 16:
					for pid, keys := range open {
						commit := rng.IntN(2) == 0
						_, err := p.AppendMarker(markerOf(pid, 0, 0, commit))
						require.NoError(t, err)
						if commit {
							for _, r := range keys {
								set(r)
							}
						}
						delete(open, pid)
						break
					}
				case r < 18:
					require.NoError(t, p.Roll())
				default:
					now += time.Duration(rng.IntN(40)) * time.Second
					_, err := b.cleaner.run(t0.Add(now))
					require.NoError(t, err)
					require.Empty(t, b.cleaner.uncleanable)
					if len(open) == 0 {
						require.Equal(t, model(), committedView(t, p), "step %d", step)
					}
					checkTxnLayout(t, p)
				}
			}
			for pid := range open {
				_, err := p.AppendMarker(markerOf(pid, 0, 0, false))
				require.NoError(t, err)
			}
			require.NoError(t, p.Roll())
			_, err := b.cleaner.run(t0.Add(now + time.Hour))
			require.NoError(t, err)
			require.Equal(t, model(), committedView(t, p))
			checkTxnLayout(t, p)
			require.NoError(t, p.Flush())
			for _, crash := range []bool{false, true} {
				target := vfs.FS(fs)
				if crash {
					target = fs.CrashClone()
				} else {
					require.NoError(t, b.Close())
				}
				b, p = compacted(t, target, cfg, Config{})
				require.Equal(t, model(), committedView(t, p), "crash %v", crash)
				checkTxnLayout(t, p)
				if !crash {
					require.NoError(t, b.Close())
				}
			}
		})
	}
}

// checkTxnLayout checks, replaying p's log, that every transactional batch
// with records is followed by its producer's marker or belongs to a
// transaction still open, and that the .txnindex holds an entry for every
// aborted transaction with records left.
func checkTxnLayout(t *testing.T, p *Partition) {
	t.Helper()
	ps, aborted := txnModel(t, p)
	require.Equal(t, ps.LastStableOffset(p.HighWatermark()), p.LastStableOffset())
	// Each aborted transaction with a record left has an entry covering it.
	raw := allBatches(t, p)
	entries := abortedTxns(t, p)
	for len(raw) > 0 {
		h, b, err := nextBatch(raw)
		require.NoError(t, err)
		raw = raw[len(b):]
		if !h.Transactional() || h.Control() || h.NumRecords == 0 {
			continue
		}
		for _, a := range aborted {
			if a.ProducerID == h.ProducerID && a.FirstOffset <= h.BaseOffset && h.BaseOffset < a.LastOffset {
				require.True(t, slices.ContainsFunc(entries, func(e index.AbortedTxn) bool {
					return e.ProducerID == a.ProducerID && e.LastOffset == a.LastOffset && e.FirstOffset <= h.BaseOffset
				}), "aborted batch at %d of producer %d has no .txnindex entry (%v)", h.BaseOffset, h.ProducerID, entries)
			}
		}
	}
}

// TestReadCommittedDuringCleaning: READ_COMMITTED readers (Records and
// Broker.Fetch, which read the segments and then their .txnindex) scan a
// log of committed and aborted transactions again and again while the
// cleaner rewrites it pass after pass, its markers given delete horizons
// and removed: a scan never errors, never returns an aborted record, and
// finds every key's committed latest value.
func TestReadCommittedDuringCleaning(t *testing.T) {
	fs := vfs.NewMem()
	cfg := TopicConfig{SegmentBytes: 500, DeleteRetention: time.Second, MinCleanableDirtyRatio: 0.0001}
	b, p := compacted(t, fs, cfg, Config{})
	defer func() { require.NoError(t, b.Close()) }()
	rng := rand.New(rand.NewPCG(3, 27))
	seq := map[int64]int32{}
	latest := map[string]string{}
	for i := range 300 {
		pid := int64(1 + rng.IntN(3))
		key := fmt.Sprint("k", rng.IntN(8))
		_, _, err := p.AppendBatch(txnKeyed(pid, seq[pid], true, key))
		require.NoError(t, err)
		seq[pid]++
		commit := i%3 != 0
		_, err = p.AppendMarker(markerOf(pid, 0, 0, commit))
		require.NoError(t, err)
		if commit {
			latest[key] = fmt.Sprint(key, "/p", pid)
		}
	}
	require.NoError(t, p.Roll())
	var wg sync.WaitGroup
	var stop atomic.Bool
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				got := map[string]string{}
				var err error
				if r == 0 {
					for rec, rerr := range p.RecordsIsolated(0, ReadCommitted) {
						if rerr != nil {
							err = rerr
							break
						}
						got[string(rec.Key)] = string(rec.Value)
					}
				} else {
					var vals []string
					vals, err = fetchAllE(b, p, FetchTxnCommitted)
					for _, v := range vals {
						k, _, _ := strings.Cut(v, "/")
						got[k] = v
					}
				}
				if err != nil {
					t.Errorf("reader %d: %v", r, err)
					return
				}
				if !maps.Equal(got, latest) {
					t.Errorf("reader %d: read %v, want %v", r, got, latest)
					return
				}
			}
		}()
	}
	for pass := range 20 {
		b.cleaner.firstDirty[TopicPartition{Topic: "c"}] = 0
		_, err := b.cleaner.run(t0.Add(time.Duration(pass) * time.Second))
		require.NoError(t, err)
	}
	stop.Store(true)
	wg.Wait()
	require.Empty(t, b.cleaner.uncleanable)
	require.Equal(t, latest, committedView(t, p))
}

// fetchAllE is fetchAll without a testing.T, for a goroutine: the values
// read from the log start by Broker.Fetch at isolation iso.
func fetchAllE(b *Broker, p *Partition, iso FetchIsolation) ([]string, error) {
	var out []string
	var ab abortFilter
	for off := p.StartOffset(); ; {
		resp, err := b.Fetch(context.Background(), FetchRequest{
			Partitions: []FetchPartition{{TopicPartition: TopicPartition{Topic: p.topic, Partition: p.id}, Offset: off, MaxBytes: 300}},
			MaxWait:    time.Nanosecond, Isolation: iso,
		})
		if err != nil {
			return nil, err
		}
		fp := resp.Partitions[0]
		raw, err := fp.Records.Bytes()
		resp.Release()
		if err == nil {
			err = fp.Err
		}
		if err != nil {
			return nil, err
		}
		if len(raw) == 0 {
			return out, nil
		}
		ab.reset(fp.AbortedTransactions)
		var hdrs []Header
		recs, next, err := decodeBuiltFrom(nil, &hdrs, raw, nil, &ab, fp.TopicPartition, off)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			out = append(out, string(r.Value))
		}
		off = next
	}
}
