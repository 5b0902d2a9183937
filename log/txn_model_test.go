package log

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/strata-log/strata/index"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// The model test of the transactional state of a partition: producer
// state (open transactions), last stable offset and .txnindex, against a
// trivial model, with a crash before every filesystem change of a random
// run of transactional appends, markers, plain appends, flushes, rolls and
// restarts.

// txnModelOp is one step of a run.
type txnModelOp struct {
	kind   byte // 't' transactional batch, 'p' plain, 'm' marker, 'f' flush, 'r' roll, 's' restart
	pid    int64
	n      int
	commit bool
}

// txnModelOps draws a run: markers end a transaction open in the model or
// are stray (a producer without one: they end nothing).
func txnModelOps(rng *rand.Rand, n int) []txnModelOp {
	var ops []txnModelOp
	for range n {
		switch r := rng.IntN(20); {
		case r < 8:
			ops = append(ops, txnModelOp{kind: 't', pid: int64(1 + rng.IntN(4)), n: 1 + rng.IntN(3)})
		case r < 11:
			ops = append(ops, txnModelOp{kind: 'p', n: 1 + rng.IntN(2)})
		case r < 16:
			ops = append(ops, txnModelOp{kind: 'm', pid: int64(1 + rng.IntN(4)), commit: rng.IntN(2) == 0})
		case r < 17:
			ops = append(ops, txnModelOp{kind: 'f'})
		case r < 19:
			ops = append(ops, txnModelOp{kind: 'r'})
		default:
			ops = append(ops, txnModelOp{kind: 's'})
		}
	}
	return ops
}

// txnEvent is what an op appended: records [base, base+n) (data, of
// producer pid if pid >= 0, transactional then) or a marker at base.
type txnEvent struct {
	base   int64
	n      int
	pid    int64
	txn    bool
	marker bool
	commit bool
	values []string
}

// txnModel is the state the log's events up to an offset imply.
type txnModelState struct {
	open    map[int64]int64 // producer → its transaction's first offset
	aborted []index.AbortedTxn
	values  map[int64]string // every data record
	status  map[int64]byte   // 'c' committed or plain, 'a' aborted, 'o' open
	txnOffs map[int64][]int64
	end     int64
}

func modelOf(events []txnEvent, end int64) txnModelState {
	m := txnModelState{open: map[int64]int64{}, values: map[int64]string{}, status: map[int64]byte{}, txnOffs: map[int64][]int64{}}
	for _, e := range events {
		if e.base >= end {
			break
		}
		m.end = e.base + int64(max(e.n, 1))
		switch {
		case e.marker:
			first, ok := m.open[e.pid]
			if !ok {
				continue // stray: ends nothing
			}
			delete(m.open, e.pid)
			st := byte('c')
			if !e.commit {
				st = 'a'
				lso := e.base + 1
				for _, f := range m.open {
					lso = min(lso, f)
				}
				m.aborted = append(m.aborted, index.AbortedTxn{ProducerID: e.pid, FirstOffset: first, LastOffset: e.base, LastStableOffset: lso})
			}
			for _, off := range m.txnOffs[e.pid] {
				m.status[off] = st
			}
			delete(m.txnOffs, e.pid)
		default:
			for i, v := range e.values {
				off := e.base + int64(i)
				m.values[off] = v
				m.status[off] = 'c'
				if e.txn {
					m.status[off] = 'o'
					m.txnOffs[e.pid] = append(m.txnOffs[e.pid], off)
				}
			}
			if _, ok := m.open[e.pid]; e.txn && !ok {
				m.open[e.pid] = e.base
			}
		}
	}
	return m
}

func (m txnModelState) lso() int64 {
	lso := m.end
	for _, f := range m.open {
		lso = min(lso, f)
	}
	return lso
}

func (m txnModelState) ongoing() []OngoingTxn {
	var out []OngoingTxn
	for pid, f := range m.open {
		out = append(out, OngoingTxn{ProducerID: pid, FirstOffset: f})
	}
	slices.SortFunc(out, func(a, b OngoingTxn) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	return out
}

// txnModelRun runs ops against a broker on fs and returns the events; after
// each op it publishes the offset below which everything is acknowledged
// durable (the recovery point, as the flush policy moves it).
func txnModelRun(t *testing.T, fs vfs.FS, cfg TopicConfig, ops []txnModelOp, durable *atomic.Int64) []txnEvent {
	t.Helper()
	b, err := Open("/d", Config{FS: fs})
	require.NoError(t, err)
	p := createT(t, b, "t", cfg)
	seq := map[int64]int32{}
	open := map[int64]bool{}
	var events []txnEvent
	plain := 0
	for _, op := range ops {
		switch op.kind {
		case 't':
			raw := txnProduce(op.pid, 0, seq[op.pid], op.n)
			base, _, err := p.AppendBatch(raw)
			require.NoError(t, err)
			e := txnEvent{base: base, n: op.n, pid: op.pid, txn: true}
			for i := range op.n {
				e.values = append(e.values, fmt.Sprintf("p%d-e0-s%d", op.pid, int(seq[op.pid])+i))
			}
			events = append(events, e)
			seq[op.pid] += int32(op.n)
			open[op.pid] = true
		case 'p':
			recs := make([]Record, op.n)
			e := txnEvent{n: op.n, pid: -1}
			for i := range recs {
				recs[i].Value = fmt.Appendf(nil, "plain-%d", plain)
				e.values = append(e.values, string(recs[i].Value))
				plain++
			}
			e.base, err = p.Append(recs...)
			require.NoError(t, err)
			events = append(events, e)
		case 'm':
			off, err := p.AppendMarker(markerOf(op.pid, 0, 0, op.commit))
			require.NoError(t, err)
			events = append(events, txnEvent{base: off, pid: op.pid, marker: true, commit: op.commit})
			delete(open, op.pid)
		case 'f':
			require.NoError(t, p.Flush())
		case 'r':
			require.NoError(t, p.Roll())
		case 's':
			require.NoError(t, b.Close())
			b, err = Open("/d", Config{FS: fs})
			require.NoError(t, err)
			p, err = b.Partition("t", 0)
			require.NoError(t, err)
		}
		durable.Store(max(durable.Load(), p.RecoveryPoint()))
	}
	require.NoError(t, b.Close())
	durable.Store(max(durable.Load(), p.EndOffset())) // a clean close flushes everything
	return events
}

// checkTxnRecovered checks a partition reopened after a crash against the
// model of the events that survived: nothing acknowledged lost, the
// records the events wrote, the open transactions, the LSO, the .txnindex
// entries, and READ_COMMITTED reads; then that the open transactions can
// be ended.
func checkTxnRecovered(t *testing.T, p *Partition, events []txnEvent, durable int64, msg string) {
	t.Helper()
	end := p.EndOffset()
	require.GreaterOrEqual(t, end, durable, "%s: acknowledged records lost", msg)
	m := modelOf(events, end)
	require.Equal(t, m.end, end, "%s: the log ends at an event's end", msg)
	var all []string
	for off := int64(0); off < end; off++ {
		if v, ok := m.values[off]; ok {
			all = append(all, v)
		}
	}
	require.Equal(t, all, collectIsolated(t, p, 0, ReadUncommitted), msg)
	var committed []string
	for off := int64(0); off < m.lso(); off++ {
		if m.status[off] == 'c' {
			committed = append(committed, m.values[off])
		}
	}
	require.Equal(t, committed, collectIsolated(t, p, 0, ReadCommitted), msg)
	require.Equal(t, m.lso(), p.LastStableOffset(), "%s: LSO", msg)
	require.Equal(t, m.ongoing(), p.producers().OngoingTxns(), "%s: open transactions", msg)
	require.Equal(t, m.aborted, abortedTxns(t, p), "%s: .txnindex", msg)

	// The recovered state goes on: abort every open transaction.
	for _, o := range m.ongoing() {
		_, err := p.AppendMarker(markerOf(o.ProducerID, 0, 0, false))
		require.NoError(t, err)
	}
	require.Equal(t, p.HighWatermark(), p.LastStableOffset(), msg)
	require.Len(t, abortedTxns(t, p), len(m.aborted)+len(m.open), msg)
}

// TestTxnModelCrashAtEveryOp: for runs of random transactional appends,
// markers, plain appends, flushes, rolls and restarts under three flush
// policies, a crash before each filesystem change in turn (only synced
// bytes survive; every other crash also keeps torn unsynced tails), then
// Open: the producer state's open transactions, the LSO and the .txnindex
// entries equal the model's of the surviving log, which holds everything
// acknowledged under the flush policy. Replay with STRATA_SEED.
func TestTxnModelCrashAtEveryOp(t *testing.T) {
	s := seed(t)
	for run, fm := range []int64{1, 3, 0} {
		rng := rand.New(rand.NewPCG(s, uint64(run)))
		ops := txnModelOps(rng, 40)
		cfg := TopicConfig{SegmentBytes: 600, IndexIntervalBytes: 128, MaxIndexBytes: 1024, FlushMessages: fm}
		// Without a crash: the events, and the number of changes.
		counter := &crashAt{mem: vfs.NewMem()}
		var durable atomic.Int64
		events := txnModelRun(t, vfs.WithErrors(counter.mem, counter.inject), cfg, ops, &durable)
		total := counter.n
		b, err := Open("/d", Config{FS: counter.mem})
		require.NoError(t, err)
		p, err := b.Partition("t", 0)
		require.NoError(t, err)
		checkTxnRecovered(t, p, events, durable.Load(), fmt.Sprintf("run %d, no crash", run))
		require.NoError(t, b.Close())
		t.Logf("run %d (FlushMessages %d): %d ops, %d filesystem changes", run, fm, len(ops), total)

		for at := 1; at <= total; at++ {
			msg := fmt.Sprintf("run %d, crash before change %d of %d", run, at, total)
			var durable atomic.Int64
			ca := &crashAtDurable{crashAt: crashAt{mem: vfs.NewMem(), at: at}, durable: &durable, torn: at%2 == 0, rng: rand.New(rand.NewPCG(s, uint64(at)))}
			events := txnModelRun(t, vfs.WithErrors(ca.mem, ca.inject), cfg, ops, &durable)
			if ca.image == nil {
				// This run made fewer changes (background work, such as a
				// close's, need not take the same steps each time).
				require.Less(t, ca.n, at, msg)
				continue
			}
			b, err := Open("/d", Config{FS: ca.image})
			require.NoError(t, err, msg)
			p, err := b.Partition("t", 0)
			if err != nil {
				// The crash came before the topic was durably created.
				require.Zero(t, ca.durableAt, msg)
				require.NoError(t, b.Close())
				continue
			}
			checkTxnRecovered(t, p, events, ca.durableAt, msg)
			require.NoError(t, b.Close())
		}
	}
}

// crashAtDurable is crashAt that also notes what was acknowledged durable
// when it took the image, and may keep torn unsynced tails.
type crashAtDurable struct {
	crashAt
	durable   *atomic.Int64
	durableAt int64
	torn      bool
	rng       *rand.Rand
	once      sync.Once
}

func (c *crashAtDurable) inject(op vfs.Op, path string) error {
	switch op {
	case vfs.OpCreate, vfs.OpWrite, vfs.OpSync, vfs.OpSyncDir, vfs.OpRemove, vfs.OpRename, vfs.OpTruncate:
	default:
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	if c.n == c.at {
		c.once.Do(func() {
			c.durableAt = c.durable.Load()
			if c.torn {
				c.image = c.mem.CrashCloneWithTornWrites(c.rng)
			} else {
				c.image = c.mem.CrashClone()
			}
		})
	}
	return nil
}
