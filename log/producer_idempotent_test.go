package log

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/segment/batch"
)

// dedupeClient is the broker of the idempotent-producer tests: partitions
// held in memory, each deduplicated by a ProducerState (the broker-side
// core, as the partition's append path drives it), and a fault hook that
// can delay a batch, refuse it, deliver it twice, lose its answer, or make
// the broker forget its producer state first. The embedded Broker only
// answers Partitions and the group methods.
type dedupeClient struct {
	*Broker

	mu      sync.Mutex
	parts   map[int]*dedupePart
	nextPID int64
	epoch   int16 // the epoch InitProducerID gives
	inits   int   // InitProducerID calls
	calls   int   // ProduceBatch calls
	active  int   // ProduceBatch calls under way
	most    int   // the most under way at once
	fault   func(n int, h batch.Header) fault
}

// fault says what happens to one ProduceBatch call.
type fault struct {
	delay  time.Duration   // on the way to the broker
	hold   <-chan struct{} // on the way to the broker, until closed
	refuse error           // answered without appending
	forget bool            // the broker loses its producer state for the partition first
	twice  bool            // the batch reaches the broker twice
	lose   error           // the batch reaches the broker, then this error instead of the answer
}

type dedupePart struct {
	state   *ProducerState
	log     []dedupeRec
	appends int // batches appended (not duplicates)
}

type dedupeRec struct {
	value string
	pid   int64
	epoch int16
	seq   int32
}

func newDedupeClient(t *testing.T, partitions int) *dedupeClient {
	b, _ := prodBroker(t, TopicConfig{Partitions: partitions})
	return &dedupeClient{Broker: b, parts: map[int]*dedupePart{}, nextPID: 1000}
}

func (c *dedupeClient) InitProducerID(ctx context.Context) (ProducerID, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inits++
	c.nextPID++
	return ProducerID{ID: c.nextPID, Epoch: c.epoch}, nil
}

func (c *dedupeClient) ProduceBatch(ctx context.Context, tp TopicPartition, raw []byte, acks Acks) (ProduceResult, error) {
	raw = append([]byte(nil), raw...) // what reaches the broker: a copy
	h, err := batch.Validate(raw)
	if err != nil {
		return ProduceResult{}, err
	}
	c.mu.Lock()
	c.calls++
	c.active++
	c.most = max(c.most, c.active)
	var f fault
	if c.fault != nil {
		f = c.fault(c.calls, h)
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.active--
		c.mu.Unlock()
	}()
	if f.hold != nil {
		<-f.hold
	}
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-ctx.Done():
			return ProduceResult{}, ctx.Err()
		}
	}
	if f.refuse != nil {
		return ProduceResult{}, f.refuse
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	part := c.parts[tp.Partition]
	if part == nil {
		part = &dedupePart{state: NewProducerState(0)}
		c.parts[tp.Partition] = part
	}
	if f.forget {
		part.state = NewProducerState(int64(len(part.log)))
	}
	res, err := part.append(raw, h)
	if f.twice {
		again, err2 := part.append(raw, h)
		if err == nil && (err2 != nil || again != res) {
			panic(fmt.Sprintf("a batch delivered twice was not deduplicated: %+v then %+v, %v", res, again, err2))
		}
	}
	if f.lose != nil {
		return ProduceResult{}, f.lose
	}
	return res, err
}

// append is the broker's append path: Check, append, Update.
func (part *dedupePart) append(raw []byte, h batch.Header) (ProduceResult, error) {
	pb := ProducerBatchOf(h)
	chk, err := part.state.Check(pb)
	if err != nil {
		return ProduceResult{}, err
	}
	if chk.Duplicate {
		return ProduceResult{BaseOffset: chk.FirstOffset, LogAppendTime: -1}, nil
	}
	base := int64(len(part.log))
	if _, err := batch.Decode(raw, func(r *batch.Record) error {
		part.log = append(part.log, dedupeRec{string(r.Value), h.ProducerID, h.ProducerEpoch, h.BaseSequence})
		return nil
	}); err != nil {
		return ProduceResult{}, err
	}
	part.state.Update(pb, base)
	part.appends++
	return ProduceResult{BaseOffset: base, LogAppendTime: -1}, nil
}

func (c *dedupeClient) log(part int) []dedupeRec {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.parts[part]; p != nil {
		return append([]dedupeRec(nil), p.log...)
	}
	return nil
}

// sendMany sends n records with SendAsync, round robin over partitions
// (manual partitioner), and returns the values sent to each partition in
// order, and their callbacks.
func sendMany(p *Producer, partitions, n int) (map[int][]string, *collector) {
	want := map[int][]string{}
	col := &collector{}
	for i := 0; i < n; i++ {
		part := i % partitions
		v := fmt.Sprintf("p%d-%04d", part, i)
		want[part] = append(want[part], v)
		p.SendAsync(Record{Topic: "t", Partition: part, Value: []byte(v)}, col.done)
	}
	return want, col
}

// requireExactlyOnce checks that each partition holds exactly the records
// of want, in order, each once, and that every callback succeeded with
// the offset its record has.
func requireExactlyOnce(t *testing.T, c *dedupeClient, want map[int][]string, col *collector) {
	t.Helper()
	for part, values := range want {
		log := c.log(part)
		got := make([]string, len(log))
		for i, r := range log {
			got[i] = r.value
		}
		require.Equal(t, values, got, "partition %d: every record once, in send order", part)
	}
	recs, errs := col.get()
	n := 0
	for _, values := range want {
		n += len(values)
	}
	require.Len(t, recs, n, "every record answered")
	for i, r := range recs {
		require.NoError(t, errs[i], "%s", r.Value)
		log := c.log(r.Partition)
		require.Less(t, r.Offset, int64(len(log)), "%s", r.Value)
		require.Equal(t, string(r.Value), log[r.Offset].value, "the offset answered is the record's")
	}
}

var errFakeTimeout = fmt.Errorf("fake client: request timed out: %w", context.DeadlineExceeded)

func TestIdempotentProducerExactlyOnce(t *testing.T) {
	for _, c := range []struct {
		name    string
		retries bool // the faults make the producer send batches again
		fault   func(rng *rand.Rand, n int) fault
	}{
		{"clean", false, func(*rand.Rand, int) fault { return fault{} }},
		{"every batch twice", false, func(*rand.Rand, int) fault { return fault{twice: true} }},
		{"answers reordered", false, func(rng *rand.Rand, _ int) fault {
			return fault{delay: time.Duration(rng.IntN(3000)) * time.Microsecond}
		}},
		{"answers lost", true, func(rng *rand.Rand, _ int) fault {
			if rng.IntN(3) == 0 {
				return fault{lose: errFakeTimeout}
			}
			return fault{}
		}},
		{"not leader", true, func(rng *rand.Rand, _ int) fault {
			if rng.IntN(3) == 0 {
				return fault{refuse: fmt.Errorf("fake: %w", ErrNotLeader)}
			}
			return fault{}
		}},
		{"broker restarts keeping its state", true, func(rng *rand.Rand, n int) fault {
			// Every 7th call the connection breaks, before or after the
			// batch reached the broker.
			if n%7 == 0 {
				if rng.IntN(2) == 0 {
					return fault{refuse: io.ErrUnexpectedEOF}
				}
				return fault{lose: io.ErrUnexpectedEOF}
			}
			return fault{}
		}},
		{"everything", true, func(rng *rand.Rand, _ int) fault {
			f := fault{delay: time.Duration(rng.IntN(2000)) * time.Microsecond, twice: rng.IntN(4) == 0}
			switch rng.IntN(6) {
			case 0:
				f.lose = errFakeTimeout
			case 1:
				f.refuse = fmt.Errorf("fake: %w", ErrNotEnoughReplicas)
			case 2:
				f.lose = io.EOF
			}
			return f
		}},
	} {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", c.name, seed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					rng := rand.New(rand.NewPCG(seed, 0))
					cl := newDedupeClient(t, 3)
					cl.fault = func(n int, _ batch.Header) fault { return c.fault(rng, n) }
					p := newProd(t, cl, ProducerConfig{Idempotent: true, Partitioner: PartitionerManual,
						BatchBytes: 150, Linger: time.Millisecond, RetryBackoff: 10 * time.Millisecond})
					want, col := sendMany(p, 3, 600)
					require.NoError(t, p.Flush(t.Context()))
					requireExactlyOnce(t, cl, want, col)
					cl.mu.Lock()
					defer cl.mu.Unlock()
					require.Equal(t, 1, cl.inits, "one producer id")
					appends := 0
					for _, part := range cl.parts {
						appends += part.appends
					}
					// Even without faults a few batches go twice: concurrent
					// calls reach the broker in any order, and one that
					// overtook its predecessor is refused and sent again.
					t.Logf("%d calls for %d batches", cl.calls, appends)
					if c.retries {
						require.Greater(t, cl.calls, appends+10, "batches were sent again")
					}
					require.LessOrEqual(t, cl.most, 3*5, "at most MaxInFlight per partition")
					for _, part := range cl.parts {
						for i, r := range part.log {
							require.EqualValues(t, 0, r.epoch, "no epoch bump without a lost state")
							if i > 0 {
								require.GreaterOrEqual(t, r.seq, part.log[i-1].seq, "sequences in log order")
							}
						}
					}
				})
			})
		}
	}
}

// TestIdempotentProducerInFlight: an epoch's first batch of a partition
// goes alone; once it is answered, up to MaxInFlight batches are sent
// before the next answer; the sequences stay contiguous.
func TestIdempotentProducerInFlight(t *testing.T) {
	for _, c := range []struct {
		cfg  ProducerConfig
		want int // calls before an answer to a batch after the first
	}{
		{ProducerConfig{Idempotent: true}, 1 + 5},
		{ProducerConfig{Idempotent: true, MaxInFlight: 2}, 1 + 2},
		{ProducerConfig{}, 1},
	} {
		t.Run(fmt.Sprint(c.want), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cl := newDedupeClient(t, 1)
				release := make(chan struct{})
				cl.fault = func(_ int, h batch.Header) fault {
					if h.BaseSequence == 0 {
						return fault{} // the epoch's first batch: answered
					}
					return fault{hold: release}
				}
				cfg := c.cfg
				cfg.BatchBytes = 10 // one record a batch
				p := newProd(t, cl, cfg)
				want, col, calls := callsWhileHeld(t, cl, p, release)
				require.Equal(t, c.want, calls, "batches sent before an answer after the first")
				require.NoError(t, p.Flush(t.Context()))
				if cfg.Idempotent {
					requireExactlyOnce(t, cl, want, col)
					for i, r := range cl.log(0) {
						require.EqualValues(t, i, r.seq, "one record a batch: sequence i")
					}
				}
			})
		})
	}
}

// TestIdempotentProducerEpochStartsAlone: until the first batch of an epoch
// is answered, no other batch of its partition is sent, so a member that
// forwards them (replica's order lanes) sees the epoch start at sequence 0.
func TestIdempotentProducerEpochStartsAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newDedupeClient(t, 1)
		release := make(chan struct{})
		cl.fault = func(int, batch.Header) fault { return fault{hold: release} }
		p := newProd(t, cl, ProducerConfig{Idempotent: true, BatchBytes: 10})
		want, col, calls := callsWhileHeld(t, cl, p, release)
		require.Equal(t, 1, calls, "batches in flight before the first answer")
		require.NoError(t, p.Flush(t.Context()))
		requireExactlyOnce(t, cl, want, col)
	})
}

// callsWhileHeld sends 20 records to partition 0 of p, waits until the
// bubble is blocked (the answers cl's fault holds on release are pending),
// counts cl's produce calls, then closes release. It returns what sendMany
// returns and that count.
func callsWhileHeld(t *testing.T, cl *dedupeClient, p *Producer, release chan struct{}) (map[int][]string, *collector, int) {
	t.Helper()
	want, col := sendMany(p, 1, 20)
	synctest.Wait()
	cl.mu.Lock()
	calls := cl.calls
	cl.mu.Unlock()
	close(release)
	return want, col, calls
}

// TestIdempotentProducerLostState: a broker that loses the producer's
// state (a restart without it, or expiry) answers ErrUnknownProducerID; the
// producer bumps its epoch and starts the partition's sequences at 0
// (KIP-360), without losing, duplicating or reordering records.
func TestIdempotentProducerLostState(t *testing.T) {
	// Compressed, the batches are finished by encoders ahead of their turn
	// and renumbered while they encode.
	for _, codec := range []Compression{CompressionNone, CompressionLz4} {
		t.Run(codec.String(), func(t *testing.T) { testIdempotentProducerLostState(t, codec) })
	}
}

func testIdempotentProducerLostState(t *testing.T, codec Compression) {
	synctest.Test(t, func(t *testing.T) {
		cl := newDedupeClient(t, 2)
		cl.fault = func(n int, h batch.Header) fault {
			return fault{forget: n == 10 || n == 25, delay: time.Duration(n%3) * time.Millisecond}
		}
		p := newProd(t, cl, ProducerConfig{Idempotent: true, Partitioner: PartitionerManual, BatchBytes: 150, Linger: time.Millisecond, Compression: codec})
		want, col := sendMany(p, 2, 300)
		require.NoError(t, p.Flush(t.Context()))
		requireExactlyOnce(t, cl, want, col)
		epochs := map[int16]bool{}
		for part := range 2 {
			last := int16(0)
			for _, r := range cl.log(part) {
				require.GreaterOrEqual(t, r.epoch, last, "epochs only go up")
				last = r.epoch
				epochs[r.epoch] = true
			}
		}
		require.Greater(t, len(epochs), 1, "the epoch was bumped")
		require.Equal(t, 1, cl.inits, "a bump needs no new producer id")
	})
}

// TestIdempotentProducerEpochExhausted: past epoch math.MaxInt16 the
// producer asks for a new producer id.
func TestIdempotentProducerEpochExhausted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newDedupeClient(t, 1)
		cl.epoch = math.MaxInt16
		cl.fault = func(n int, h batch.Header) fault { return fault{forget: n == 5} }
		p := newProd(t, cl, ProducerConfig{Idempotent: true, BatchBytes: 150, Linger: time.Millisecond})
		want, col := sendMany(p, 1, 100)
		require.NoError(t, p.Flush(t.Context()))
		requireExactlyOnce(t, cl, want, col)
		require.Equal(t, 2, cl.inits, "a new producer id once the epoch is exhausted")
		log := cl.log(0)
		require.NotEqual(t, log[0].pid, log[len(log)-1].pid)
	})
}

// TestIdempotentProducerFailedBatch: a batch that fails for good leaves a
// gap in the sequences; the batches after it are refused as out of order
// until the producer moves the partition to a new epoch, then written.
func TestIdempotentProducerFailedBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newDedupeClient(t, 1)
		boom := errors.New("boom")
		var failedSeq int32 = -1
		cl.fault = func(n int, h batch.Header) fault {
			if n == 3 {
				failedSeq = h.BaseSequence
				return fault{refuse: boom}
			}
			return fault{}
		}
		p := newProd(t, cl, ProducerConfig{Idempotent: true, BatchBytes: sizeOf(2), Linger: time.Millisecond})
		var col collector
		for i := range 20 {
			p.SendAsync(recordN(i), col.done)
		}
		require.NoError(t, p.Flush(t.Context()))
		recs, errs := col.get()
		require.Len(t, recs, 20)
		var failed []int
		var written []string
		for i, r := range recs {
			require.Equal(t, recordN(i).Value, r.Value, "callbacks in send order")
			if errs[i] != nil {
				require.ErrorIs(t, errs[i], boom)
				failed = append(failed, i)
				continue
			}
			written = append(written, string(r.Value))
			require.Equal(t, string(r.Value), cl.log(0)[r.Offset].value)
		}
		require.Len(t, failed, 2, "the records of one batch fail")
		require.EqualValues(t, failed[0], failedSeq)
		var got []string
		for _, r := range cl.log(0) {
			got = append(got, r.value)
		}
		require.Equal(t, written, got, "the others once each, in order")
	})
}

// TestIdempotentProducerFenced: ErrProducerFenced is fatal: the records
// not yet acknowledged fail with it, and so does every later send.
func TestIdempotentProducerFenced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newDedupeClient(t, 1)
		// Fenced from the batch that starts at sequence 4 on. Where batches
		// split is the accumulator's business (BatchBytes bounds them, the
		// sender may take one early), so the test finds the split point.
		cl.fault = func(n int, h batch.Header) fault {
			if h.BaseSequence >= 4 {
				return fault{refuse: fmt.Errorf("fake: %w", ErrProducerFenced)}
			}
			return fault{}
		}
		// One batch in flight at a time: with several, the fenced answer
		// of a later batch may come before an earlier batch's
		// acknowledgement, and the earlier one fails with it too (fatal,
		// as Kafka's producer): 1 run in 100-400 under -race.
		p := newProd(t, cl, ProducerConfig{Idempotent: true, BatchBytes: sizeOf(2), Linger: time.Millisecond, MaxInFlight: 1})
		var col collector
		for i := range 10 {
			p.SendAsync(recordN(i), col.done)
		}
		require.NoError(t, p.Flush(t.Context()))
		recs, errs := col.get()
		require.Len(t, recs, 10)
		k := 0
		for k < len(errs) && errs[k] == nil {
			k++
		}
		require.GreaterOrEqual(t, k, 4, "every batch starting below sequence 4 is acknowledged")
		require.Less(t, k, 10, "the fenced batch fails")
		for i := k; i < len(errs); i++ {
			require.ErrorIs(t, errs[i], ErrProducerFenced, "record %d: every record after the fenced one fails", i)
		}
		_, err := p.Send(t.Context(), recordN(10))
		require.ErrorIs(t, err, ErrProducerFenced, "fatal: later sends fail")
		require.Len(t, cl.log(0), k)
	})
}

// TestProducerRetryBackoff: retriable errors are retried every
// RetryBackoff until Timeout; a producer that is not idempotent retries
// only what cannot duplicate.
func TestProducerRetryBackoff(t *testing.T) {
	for _, c := range []struct {
		name      string
		cfg       ProducerConfig
		err       error
		retried   bool
		succeedAt int // the call that succeeds
	}{
		{"idempotent not leader", ProducerConfig{Idempotent: true}, ErrNotLeader, true, 3},
		{"idempotent lost answer", ProducerConfig{Idempotent: true}, errFakeTimeout, true, 3},
		{"not enough replicas", ProducerConfig{}, ErrNotEnoughReplicas, true, 3},
		{"not leader, not idempotent", ProducerConfig{}, ErrNotLeader, false, 3},
		{"timeout, not idempotent", ProducerConfig{}, errFakeTimeout, false, 3},
		{"idempotent, until Timeout", ProducerConfig{Idempotent: true, Timeout: time.Second}, ErrNotLeader, true, math.MaxInt},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cl := newDedupeClient(t, 1)
				cl.fault = func(n int, h batch.Header) fault {
					if n < c.succeedAt {
						return fault{refuse: c.err}
					}
					return fault{}
				}
				p := newProd(t, cl, c.cfg)
				start := time.Now()
				r, err := p.Send(t.Context(), recordN(0))
				elapsed := time.Since(start)
				switch {
				case !c.retried:
					require.ErrorIs(t, err, c.err)
					require.Zero(t, elapsed)
					require.Equal(t, 1, cl.calls)
				case c.succeedAt == math.MaxInt:
					require.ErrorIs(t, err, ErrTimeout)
					require.ErrorIs(t, err, context.DeadlineExceeded)
					require.ErrorIs(t, err, c.err, "the last error is kept")
					require.Equal(t, time.Second, elapsed, "retries stop at Timeout")
					require.Equal(t, 10, cl.calls, "one call per RetryBackoff")
				default:
					require.NoError(t, err)
					require.EqualValues(t, 0, r.Offset)
					require.Equal(t, 2*defaultBackoff, elapsed, "two retries, 100 ms apart")
					require.Len(t, cl.log(0), 1)
				}
			})
		})
	}
}

// TestProducerSendDoesNotLinger: a batch whose every record is a blocked
// Send goes at once, without waiting out the linger (no virtual time
// passes, so the linger timer never fired); one holding a SendAsync record
// waits for it; concurrent Sends share a batch while one is in flight.
func TestProducerSendDoesNotLinger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, c := prodBroker(t, TopicConfig{})
		p := newProd(t, c, ProducerConfig{})
		start := time.Now()
		for i := range 100 {
			r, err := p.Send(t.Context(), Record{Topic: "t", Value: val(i)})
			require.NoError(t, err)
			require.EqualValues(t, i, r.Offset)
		}
		require.Zero(t, time.Since(start), "100 Sends in a row never wait for the linger")
		require.Len(t, c.batchSizes(), 100)

		// A SendAsync record in the batch: the batch lingers for more.
		var col collector
		p.SendAsync(Record{Topic: "t", Value: val(100)}, col.done)
		start = time.Now()
		_, err := p.Send(t.Context(), Record{Topic: "t", Value: val(101)})
		require.NoError(t, err)
		require.Equal(t, defaultLinger, time.Since(start))
		require.Equal(t, 2, c.batchSizes()[100])

		// 64 concurrent Sends while a batch is in flight: they gather in
		// the next batch (group commit).
		hold := make(chan struct{})
		c.setHold(hold)
		var wg sync.WaitGroup
		wg.Go(func() {
			_, err := p.Send(context.Background(), Record{Topic: "t", Value: val(0)})
			require.NoError(t, err)
		})
		synctest.Wait() // in flight, held
		for i := range 63 {
			wg.Go(func() {
				_, err := p.Send(context.Background(), Record{Topic: "t", Value: val(i)})
				require.NoError(t, err)
			})
		}
		synctest.Wait()
		close(hold)
		wg.Wait()
		require.Equal(t, []int{1, 63}, c.batchSizes()[101:])
	})
}

// TestIdempotentProducerRealBroker: against the real Broker, an
// idempotent producer's batches carry its producer id, epoch 0 and
// contiguous per-partition sequences, as read back from the log.
func TestIdempotentProducerRealBroker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, c := prodBroker(t, TopicConfig{Partitions: 2})
		// One batch in flight: this broker does not dedupe or check
		// sequences yet, so concurrent batches could land out of order.
		p := newProd(t, c, ProducerConfig{Idempotent: true, MaxInFlight: 1, Partitioner: PartitionerManual, BatchBytes: 200})
		for i := range 10 {
			_, err := p.Send(t.Context(), Record{Topic: "t", Partition: i % 2, Value: val(i)})
			require.NoError(t, err)
		}
		for i := range 200 {
			p.SendAsync(Record{Topic: "t", Partition: i % 2, Value: val(i)}, nil)
		}
		require.NoError(t, p.Flush(t.Context()))
		var pid int64 = -1
		for part := range 2 {
			pp, err := b.Partition("t", part)
			require.NoError(t, err)
			data, err := pp.ReadBatches(0, 1<<30, pp.EndOffset())
			require.NoError(t, err)
			seq, batches := int32(0), 0
			for len(data) > 0 {
				h, err := batch.ParseHeader(data)
				require.NoError(t, err)
				if pid < 0 {
					pid = h.ProducerID
				}
				require.GreaterOrEqual(t, h.ProducerID, int64(0))
				require.Equal(t, pid, h.ProducerID, "one producer id")
				require.EqualValues(t, 0, h.ProducerEpoch)
				require.Equal(t, seq, h.BaseSequence, "partition %d batch %d", part, batches)
				seq += h.NumRecords
				batches++
				data = data[h.Size():]
			}
			require.EqualValues(t, 105, seq, "every record of the partition")
			require.Greater(t, batches, 5)
		}
	})
}
