package log

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
)

// consBroker opens a broker on a fresh in-memory file system with topic
// "t" of n partitions, closed at the end of the test.
func consBroker(t *testing.T, n int) *Broker {
	t.Helper()
	b, err := Open("/d", consBrokerConfig(vfs.NewMem()))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	_, err = b.CreateTopic("t", TopicConfig{Partitions: n})
	require.NoError(t, err)
	return b
}

// consBrokerConfig keeps the indexes small: a partition on the in-memory
// file system opens and closes in microseconds.
func consBrokerConfig(fs vfs.FS) Config {
	return Config{FS: fs, DefaultTopic: TopicConfig{MaxIndexBytes: 64 << 10}}
}

// consAppend appends n one-record batches to partition p of topic "t",
// with values "p<p>-<offset>".
func consAppend(t *testing.T, b *Broker, p, n int) {
	t.Helper()
	part, err := b.Partition("t", p)
	require.NoError(t, err)
	for range n {
		off := part.EndOffset()
		_, err := part.Append(Record{Key: []byte("k"), Value: fmt.Appendf(nil, "p%d-%d", p, off)})
		require.NoError(t, err)
	}
}

func newConsumerT(t *testing.T, c Client, cfg ConsumerConfig) *Consumer {
	t.Helper()
	cons, err := NewConsumer(c, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cons.Close()) })
	return cons
}

// pollN polls until it has n records (failing after 100 Polls).
func pollN(t *testing.T, c *Consumer, n int) []Record {
	t.Helper()
	var out []Record
	for range 100 {
		recs, err := c.Poll(context.Background())
		require.NoError(t, err)
		out = append(out, recs...)
		if len(out) >= n {
			require.Len(t, out, n)
			return out
		}
	}
	t.Fatalf("polled %d records, want %d", len(out), n)
	return nil
}

// byPartition checks that recs hold, per partition, consecutive offsets
// from their first, with the values consAppend wrote, and returns the
// offsets by partition.
func byPartition(t *testing.T, recs []Record) map[int][]int64 {
	t.Helper()
	out := map[int][]int64{}
	for _, r := range recs {
		require.Equal(t, "t", r.Topic)
		require.Equal(t, fmt.Sprintf("p%d-%d", r.Partition, r.Offset), string(r.Value))
		if offs := out[r.Partition]; len(offs) > 0 {
			require.Equal(t, offs[len(offs)-1]+1, r.Offset, "partition %d", r.Partition)
		}
		out[r.Partition] = append(out[r.Partition], r.Offset)
	}
	return out
}

func TestConsumerConfig(t *testing.T) {
	leaktest.Check(t)
	b := consBroker(t, 2)
	for _, cfg := range []ConsumerConfig{
		{},
		{Topics: []string{""}},
		{Topics: []string{"t"}, Reset: 7},
		{Topics: []string{"t"}, MinBytes: -1},
		{Topics: []string{"t"}, MaxWait: -time.Second},
		{Topics: []string{"t"}, PartitionMaxBytes: -1},
		{Topics: []string{"t"}, Group: "g", HeartbeatInterval: 10 * time.Second, SessionTimeout: 10 * time.Second},
		{Topics: []string{"t"}, Group: string(make([]byte, group.MaxNameLen+1))},
	} {
		_, err := NewConsumer(b, cfg)
		require.ErrorIs(t, err, ErrInvalidConfig, "%+v", cfg)
	}
	_, err := NewConsumer(b, ConsumerConfig{Topics: []string{"t", "nope"}})
	require.ErrorIs(t, err, ErrUnknownTopic)

	topics := []string{"t", "t"}
	c := newConsumerT(t, b, ConsumerConfig{Topics: topics})
	require.Equal(t, []string{"t", "t"}, topics, "the caller's slice is not touched")
	require.Equal(t, []TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}}, c.Assignment())
	require.ErrorIs(t, c.Commit(context.Background()), ErrNoGroup)
	require.Equal(t, "earliest", ResetEarliest.String())
	require.Equal(t, "latest", ResetLatest.String())
}

// TestConsumerNoGroup reads every partition, from the earliest or from the
// latest offset.
func TestConsumerNoGroup(t *testing.T) {
	leaktest.Check(t)
	b := consBroker(t, 3)
	for p := range 3 {
		consAppend(t, b, p, 5+p)
	}
	ctx := context.Background()
	early := newConsumerT(t, b, ConsumerConfig{Topics: []string{"t"}, MaxWait: time.Millisecond})
	late := newConsumerT(t, b, ConsumerConfig{Topics: []string{"t"}, Reset: ResetLatest, MaxWait: time.Millisecond})

	got := byPartition(t, pollN(t, early, 5+6+7))
	for p := range 3 {
		require.Len(t, got[p], 5+p)
		require.EqualValues(t, 0, got[p][0])
		pos, err := early.Position("t", p)
		require.NoError(t, err)
		require.EqualValues(t, 5+p, pos)
	}
	recs, err := early.Poll(ctx)
	require.NoError(t, err)
	require.Empty(t, recs, "nothing more")

	recs, err = late.Poll(ctx)
	require.NoError(t, err)
	require.Empty(t, recs, "latest: nothing of what was there")
	consAppend(t, b, 1, 2)
	consAppend(t, b, 2, 1)
	got = byPartition(t, pollN(t, late, 3))
	require.Equal(t, map[int][]int64{1: {6, 7}, 2: {7}}, got)
	got = byPartition(t, pollN(t, early, 3))
	require.Equal(t, map[int][]int64{1: {6, 7}, 2: {7}}, got)

	_, err = early.Position("t", 9)
	require.ErrorIs(t, err, ErrNotAssigned)
	require.NoError(t, early.Close())
	require.NoError(t, early.Close(), "idempotent")
	_, err = early.Poll(ctx)
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, early.Seek("t", 0, 0), ErrClosed)
	require.ErrorIs(t, early.Commit(ctx), ErrClosed)
}

// TestConsumerDecodes: headers, timestamps and records below the position
// in a batch (skipped).
func TestConsumerDecodes(t *testing.T) {
	b := consBroker(t, 1)
	p, err := b.Partition("t", 0)
	require.NoError(t, err)
	ts := time.UnixMilli(1_700_000_000_000)
	var batch []Record
	for i := range 10 {
		r := Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i), Timestamp: ts.Add(time.Duration(i) * time.Millisecond)}
		if i%2 == 0 {
			r.Headers = []Header{{Key: "i", Value: fmt.Appendf(nil, "%d", i)}, {Key: "null"}}
		}
		batch = append(batch, r)
	}
	_, err = p.Append(batch...) // one batch of 10
	require.NoError(t, err)

	c := newConsumerT(t, b, ConsumerConfig{Topics: []string{"t"}})
	require.NoError(t, c.Seek("t", 0, 3))
	recs, err := c.Poll(context.Background())
	require.NoError(t, err)
	require.Len(t, recs, 7)
	for j, r := range recs {
		i := 3 + j
		require.EqualValues(t, i, r.Offset)
		require.Equal(t, fmt.Sprintf("k%d", i), string(r.Key))
		require.Equal(t, fmt.Sprintf("v%d", i), string(r.Value))
		require.True(t, ts.Add(time.Duration(i)*time.Millisecond).Equal(r.Timestamp))
		if i%2 == 0 {
			require.Equal(t, []Header{{Key: "i", Value: fmt.Appendf(nil, "%d", i)}, {Key: "null"}}, r.Headers)
		} else {
			require.Nil(t, r.Headers)
		}
	}
	// Headers are the record's own: appending to one does not touch the next.
	recs[1].Headers = append(recs[1].Headers, Header{Key: "x"})
	require.Equal(t, "i", recs[3].Headers[0].Key)
}

// TestConsumerLongPoll: a parked Poll is completed by an append at once,
// not by its MaxWait.
func TestConsumerLongPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := consBroker(t, 2)
		c := newConsumerT(t, b, ConsumerConfig{Topics: []string{"t"}, Reset: ResetLatest, MaxWait: time.Hour})
		got := make(chan []Record)
		go func() {
			recs, err := c.Poll(context.Background())
			if err != nil {
				t.Error(err)
			}
			got <- recs
		}()
		synctest.Wait()
		require.Equal(t, 1, b.fetches.Pending(), "parked")
		start := time.Now()
		consAppend(t, b, 1, 1)
		recs := <-got
		require.Zero(t, time.Since(start), "woken by the append, not by a timer")
		require.Len(t, recs, 1)
		require.Equal(t, 1, recs[0].Partition)
	})
}

// TestConsumerMaxWait: below MinBytes, Poll returns what there is at
// MaxWait.
func TestConsumerMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := consBroker(t, 1)
		c := newConsumerT(t, b, ConsumerConfig{Topics: []string{"t"}, MinBytes: 1 << 20, MaxWait: 2 * time.Second})
		start := time.Now()
		got := make(chan []Record)
		go func() {
			recs, err := c.Poll(context.Background())
			if err != nil {
				t.Error(err)
			}
			got <- recs
		}()
		synctest.Wait()
		consAppend(t, b, 0, 1)
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("returned below MinBytes before MaxWait")
		default:
		}
		recs := <-got
		require.Equal(t, 2*time.Second, time.Since(start).Round(time.Millisecond*10))
		require.Len(t, recs, 1)

		// Nothing at all: empty at MaxWait.
		start = time.Now()
		recs, err := c.Poll(context.Background())
		require.NoError(t, err)
		require.Empty(t, recs)
		require.GreaterOrEqual(t, time.Since(start), 2*time.Second)
	})
}

// TestConsumerCancel: cancelling ctx, or Close, ends a parked Poll at once.
func TestConsumerCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := consBroker(t, 1)
		c := newConsumerT(t, b, ConsumerConfig{Topics: []string{"t"}, MaxWait: time.Hour})
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error)
		go func() {
			_, err := c.Poll(ctx)
			errc <- err
		}()
		synctest.Wait()
		require.Equal(t, 1, b.fetches.Pending())
		start := time.Now()
		cancel()
		require.ErrorIs(t, <-errc, context.Canceled)
		require.Zero(t, time.Since(start))
		require.Zero(t, b.fetches.Pending())

		_, err := c.Poll(ctx)
		require.ErrorIs(t, err, context.Canceled, "a done ctx")

		go func() {
			_, err := c.Poll(context.Background())
			errc <- err
		}()
		synctest.Wait()
		require.NoError(t, c.Close())
		require.ErrorIs(t, <-errc, ErrClosed)
		require.Zero(t, time.Since(start))
		require.Zero(t, b.fetches.Pending())
	})
}

// TestConsumerFairness: one partition with far more data than a Poll takes
// does not starve the others; each partition comes first in turn.
func TestConsumerFairness(t *testing.T) {
	b := consBroker(t, 3)
	consAppend(t, b, 0, 500)
	consAppend(t, b, 1, 3)
	consAppend(t, b, 2, 3)
	// MaxBytes 1: each Poll returns the first batch of the first partition
	// with data, and nothing else.
	c := newConsumerT(t, b, ConsumerConfig{Topics: []string{"t"}, MaxBytes: 1})
	seen := map[int]int{}
	for range 6 {
		recs, err := c.Poll(context.Background())
		require.NoError(t, err)
		require.Len(t, recs, 1)
		seen[recs[0].Partition]++
	}
	require.Equal(t, map[int]int{0: 2, 1: 2, 2: 2}, seen)

	// PartitionMaxBytes bounds each partition (one batch of about 80
	// bytes each here); all three share a Poll.
	c2 := newConsumerT(t, b, ConsumerConfig{Topics: []string{"t"}, PartitionMaxBytes: 100})
	recs, err := c2.Poll(context.Background())
	require.NoError(t, err)
	got := byPartition(t, recs)
	require.Len(t, got, 3, "%v", got)
	require.Len(t, got[0], 1)
}

// TestConsumerSeek: in range, out of range, unassigned.
func TestConsumerSeek(t *testing.T) {
	leaktest.Check(t)
	b := consBroker(t, 2)
	consAppend(t, b, 0, 10)
	c := newConsumerT(t, b, ConsumerConfig{Topics: []string{"t"}, MaxWait: time.Millisecond})
	for _, off := range []int64{7, 0, 10, 9} {
		require.NoError(t, c.Seek("t", 0, off))
		pos, err := c.Position("t", 0)
		require.NoError(t, err)
		require.Equal(t, off, pos)
		recs, err := c.Poll(context.Background())
		require.NoError(t, err)
		require.Len(t, recs, int(10-off))
		if len(recs) > 0 {
			require.Equal(t, off, recs[0].Offset)
		}
	}
	for _, off := range []int64{-1, 11, 1 << 40} {
		err := c.Seek("t", 0, off)
		require.ErrorIs(t, err, ErrOffsetOutOfRange)
		var oor *OffsetOutOfRangeError
		require.ErrorAs(t, err, &oor)
		require.Equal(t, OffsetOutOfRangeError{Topic: "t", Partition: 0, Requested: off, Start: 0, End: 10}, *oor)
	}
	pos, err := c.Position("t", 0)
	require.NoError(t, err)
	require.EqualValues(t, 10, pos, "a refused Seek moves nothing")
	require.ErrorIs(t, c.Seek("t", 2, 0), ErrNotAssigned)
	require.ErrorIs(t, c.Seek("u", 0, 0), ErrNotAssigned)
	require.ErrorIs(t, c.Seek("t", 1, 1), ErrOffsetOutOfRange)
	require.NoError(t, c.Seek("t", 1, 0))
}

// TestConsumerOutOfRangeReset: a position that retention deleted moves per
// Reset.
func TestConsumerOutOfRangeReset(t *testing.T) {
	for _, reset := range []OffsetReset{ResetEarliest, ResetLatest} {
		t.Run(reset.String(), func(t *testing.T) {
			b, err := Open("/d", consBrokerConfig(vfs.NewMem()))
			require.NoError(t, err)
			defer b.Close()
			_, err = b.CreateTopic("t", TopicConfig{SegmentBytes: 1024, MaxIndexBytes: 1024, RetentionBytes: 2048})
			require.NoError(t, err)
			c := newConsumerT(t, b, ConsumerConfig{Topics: []string{"t"}, MaxBytes: 1, Reset: reset})
			consAppend(t, b, 0, 100)
			recs, err := c.Poll(context.Background())
			require.NoError(t, err)
			require.Len(t, recs, 1)
			b.enforceRetention(time.Now())
			p, err := b.Partition("t", 0)
			require.NoError(t, err)
			start := p.StartOffset()
			require.Greater(t, start, int64(1))

			recs, err = c.Poll(context.Background()) // finds position 1 gone, resets
			require.NoError(t, err)
			require.Empty(t, recs)
			pos, err := c.Position("t", 0)
			require.NoError(t, err)
			if reset == ResetEarliest {
				require.Equal(t, start, pos)
				recs, err = c.Poll(context.Background())
				require.NoError(t, err)
				require.Equal(t, start, recs[0].Offset)
			} else {
				require.EqualValues(t, 100, pos)
			}
		})
	}
}

// TestConsumerCorrupt: a corrupt batch is an error and moves nothing.
func TestConsumerCorrupt(t *testing.T) {
	b := consBroker(t, 1)
	consAppend(t, b, 0, 3)
	bad := &corruptingClient{Broker: b}
	c := newConsumerT(t, bad, ConsumerConfig{Topics: []string{"t"}})
	_, err := c.Poll(context.Background())
	require.ErrorIs(t, err, ErrCorrupt)
	pos, err := c.Position("t", 0)
	require.NoError(t, err)
	require.Zero(t, pos)
}

// corruptingClient flips a byte of every record batch it fetches.
type corruptingClient struct{ *Broker }

func (c *corruptingClient) Fetch(ctx context.Context, req FetchRequest) (FetchResponse, error) {
	resp, err := c.Broker.Fetch(ctx, req)
	for i := range resp.Partitions {
		fp := &resp.Partitions[i]
		r, rerr := fp.Records.Bytes()
		fp.Records.Release()
		if rerr != nil {
			return FetchResponse{}, rerr
		}
		if len(r) > 0 {
			r[len(r)-1] ^= 0xff
		}
		fp.Records = BatchesOf(r)
	}
	return resp, err
}

// groupClient is a Broker whose heartbeats can be cut, as a network would.
type groupClient struct {
	*Broker
	mu  sync.Mutex
	cut bool
}

var errLinkDown = errors.New("test: link down")

func (c *groupClient) Heartbeat(ctx context.Context, groupID, memberID string, generation int32) error {
	c.mu.Lock()
	cut := c.cut
	c.mu.Unlock()
	if cut {
		return errLinkDown
	}
	return c.Broker.Heartbeat(ctx, groupID, memberID, generation)
}

func (c *groupClient) setCut(cut bool) {
	c.mu.Lock()
	c.cut = cut
	c.mu.Unlock()
}

// pollLoop polls a consumer in a goroutine, committing after each Poll
// that returned records, until stopped.
type pollLoop struct {
	c      *Consumer
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	recs   []Record
}

func startPolling(t *testing.T, c *Consumer) *pollLoop {
	ctx, cancel := context.WithCancel(context.Background())
	l := &pollLoop{c: c, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for ctx.Err() == nil {
			recs, err := c.Poll(ctx)
			switch {
			case ctx.Err() != nil || errors.Is(err, ErrClosed):
				return
			case err != nil:
				t.Errorf("poll: %v", err)
				return
			}
			l.mu.Lock()
			l.recs = append(l.recs, recs...)
			l.mu.Unlock()
			if len(recs) > 0 {
				// A commit refused by a rebalance is fine: the records
				// come again.
				if err := c.Commit(ctx); err != nil && !errors.Is(err, ErrUnknownMember) &&
					!errors.Is(err, ErrIllegalGeneration) && !errors.Is(err, ErrRebalanceInProgress) && ctx.Err() == nil {
					t.Errorf("commit: %v", err)
				}
			}
		}
	}()
	t.Cleanup(l.stop)
	return l
}

func (l *pollLoop) stop() {
	l.cancel()
	<-l.done
}

func (l *pollLoop) records() []Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.recs)
}

// membership returns the consumer's member id, generation, assignment and
// whether it waits to rejoin.
func membership(c *Consumer) (string, int32, []TopicPartition, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tps := make([]TopicPartition, len(c.parts))
	for i, p := range c.parts {
		tps[i] = p.tp
	}
	return c.memberID, c.generation, tps, c.rejoin
}

// settled reports whether the group is stable, every consumer is a member
// of its generation, and their assignments split the n partitions of "t"
// disjointly and completely.
func settled(b *Broker, groupID string, n int, cs ...*Consumer) bool {
	d, ok := b.groups.Describe(groupID)
	if !ok || d.State != group.StateStable || len(d.Members) != len(cs) {
		return false
	}
	seen := map[TopicPartition]bool{}
	for _, c := range cs {
		member, gen, tps, rejoin := membership(c)
		if member == "" || gen != d.Generation || rejoin {
			return false
		}
		for _, tp := range tps {
			if seen[tp] {
				return false
			}
			seen[tp] = true
		}
	}
	return len(seen) == n
}

// eventually waits, in the bubble's virtual time, until cond holds.
func eventually(t *testing.T, within time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, msg)
		}
		time.Sleep(50 * time.Millisecond) // virtual time
	}
}

func groupCfg(groupID string) ConsumerConfig {
	return ConsumerConfig{Group: groupID, Topics: []string{"t"}, SessionTimeout: 6 * time.Second, HeartbeatInterval: time.Second}
}

// TestConsumerGroupRebalance: three consumers split the partitions; as
// each joins or leaves, the others rebalance and still cover every
// partition, and every record is read.
func TestConsumerGroupRebalance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 7
		b := consBroker(t, n)
		for p := range n {
			consAppend(t, b, p, 20)
		}
		var cs []*Consumer
		var loops []*pollLoop
		for i := range 3 {
			cfg := groupCfg("g")
			cfg.ClientID = fmt.Sprintf("c%d", i)
			c := newConsumerT(t, b, cfg)
			cs, loops = append(cs, c), append(loops, startPolling(t, c))
			eventually(t, 30*time.Second, func() bool { return settled(b, "g", n, cs...) }, fmt.Sprintf("%d consumers settle", i+1))
		}
		for _, c := range cs {
			_, _, tps, _ := membership(c)
			require.GreaterOrEqual(t, len(tps), n/3, "range assignment: %v", tps)
		}
		// Records appended now are read by whoever owns the partition.
		for p := range n {
			consAppend(t, b, p, 5)
		}
		read := func(ls ...*pollLoop) map[TopicPartition]map[int64]bool {
			out := map[TopicPartition]map[int64]bool{}
			for _, l := range ls {
				for _, r := range l.records() {
					tp := TopicPartition{Topic: r.Topic, Partition: r.Partition}
					if out[tp] == nil {
						out[tp] = map[int64]bool{}
					}
					out[tp][r.Offset] = true
				}
			}
			return out
		}
		all := func(ls ...*pollLoop) bool {
			got := read(ls...)
			for p := range n {
				if len(got[TopicPartition{Topic: "t", Partition: p}]) != 25 {
					return false
				}
			}
			return true
		}
		eventually(t, 10*time.Second, func() bool { return all(loops...) }, "every record read")

		// One closes: the other two take its partitions, at once (it
		// left; no session timeout to wait for).
		loops[2].stop()
		start := time.Now()
		require.NoError(t, cs[2].Close())
		eventually(t, 5*time.Second, func() bool { return settled(b, "g", n, cs[:2]...) }, "two consumers settle")
		require.Less(t, time.Since(start), 6*time.Second, "before any session timeout")
		for p := range n {
			consAppend(t, b, p, 1)
		}
		eventually(t, 10*time.Second, func() bool {
			got := read(loops[:2]...)
			for p := range n {
				if !got[TopicPartition{Topic: "t", Partition: p}][25] {
					return false
				}
			}
			return true
		}, "the last records read by the two")
	})
}

// TestConsumerGroupSessionTimeout: a member whose heartbeats stop is
// removed after its session timeout and its partitions move; when it comes
// back it rejoins as a new member.
func TestConsumerGroupSessionTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 4
		b := consBroker(t, n)
		c1 := newConsumerT(t, b, groupCfg("g"))
		gc := &groupClient{Broker: b}
		c2 := newConsumerT(t, gc, groupCfg("g"))
		startPolling(t, c1)
		l2 := startPolling(t, c2)
		eventually(t, 30*time.Second, func() bool { return settled(b, "g", n, c1, c2) }, "settle")
		old, _, _, _ := membership(c2)

		// c2 stops: no Poll, and its heartbeats do not arrive.
		l2.stop()
		gc.setCut(true)
		start := time.Now()
		eventually(t, 30*time.Second, func() bool { return settled(b, "g", n, c1) }, "c1 alone")
		require.GreaterOrEqual(t, time.Since(start), 5*time.Second, "not before the session timeout")
		require.Less(t, time.Since(start), 8*time.Second)

		// Its commits are refused now, with a clear error.
		c2.mu.Lock()
		c2.parts[0].committed = 99 // make sure there is something to commit
		c2.mu.Unlock()
		err := c2.Commit(context.Background())
		require.ErrorIs(t, err, ErrUnknownMember)
		require.ErrorContains(t, err, "delivered again")

		// Back: it rejoins as a new member and the two split again.
		gc.setCut(false)
		startPolling(t, c2)
		eventually(t, 30*time.Second, func() bool { return settled(b, "g", n, c1, c2) }, "settle again")
		now, _, _, _ := membership(c2)
		require.NotEqual(t, old, now)
	})
}

// TestConsumerGroupPollTimeout: a member that heartbeats but does not Poll
// for RebalanceTimeout leaves, and its partitions move.
func TestConsumerGroupPollTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 4
		b := consBroker(t, n)
		cfg := groupCfg("g")
		cfg.RebalanceTimeout = 20 * time.Second
		c1 := newConsumerT(t, b, cfg)
		c2 := newConsumerT(t, b, cfg)
		startPolling(t, c1)
		l2 := startPolling(t, c2)
		eventually(t, 30*time.Second, func() bool { return settled(b, "g", n, c1, c2) }, "settle")
		l2.stop()
		start := time.Now()
		eventually(t, time.Minute, func() bool { return settled(b, "g", n, c1) }, "c1 alone")
		require.GreaterOrEqual(t, time.Since(start), 20*time.Second)
		member, _, _, rejoin := membership(c2)
		require.Empty(t, member)
		require.True(t, rejoin)
	})
}

// TestConsumerCommitResume: a consumer commits and closes; the next one in
// the group starts after the commit, and so does one after the broker is
// reopened.
func TestConsumerCommitResume(t *testing.T) {
	leaktest.Check(t)
	fs := vfs.NewMem()
	b, err := Open("/d", consBrokerConfig(fs))
	require.NoError(t, err)
	_, err = b.CreateTopic("t", TopicConfig{Partitions: 2})
	require.NoError(t, err)
	consAppend(t, b, 0, 10)
	consAppend(t, b, 1, 10)
	ctx := context.Background()
	cfg := ConsumerConfig{Group: "g", Topics: []string{"t"}, MaxBytes: 1, MaxWait: time.Millisecond}

	c, err := NewConsumer(b, cfg)
	require.NoError(t, err)
	require.NoError(t, c.Commit(ctx), "nothing to commit before the first Poll")
	require.Empty(t, c.Assignment(), "no assignment before the first Poll")
	var got []Record
	for range 4 { // one batch (one record) per Poll, partitions in turn
		recs, err := c.Poll(ctx)
		require.NoError(t, err)
		got = append(got, recs...)
	}
	require.Len(t, got, 4)
	require.Len(t, c.Assignment(), 2)
	require.NoError(t, c.Commit(ctx))
	_, err = c.Poll(ctx) // read, not committed: read again by the next consumer
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.ErrorIs(t, c.Commit(ctx), ErrClosed)
	committed, err := b.FetchOffsets(ctx, "g", nil)
	require.NoError(t, err)
	require.Equal(t, map[TopicPartition]int64{{Topic: "t", Partition: 0}: 2, {Topic: "t", Partition: 1}: 2}, committed)

	c, err = NewConsumer(b, cfg)
	require.NoError(t, err)
	recs, err := c.Poll(ctx)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.EqualValues(t, 2, recs[0].Offset)
	require.NoError(t, c.Seek("t", 1, 7))
	require.NoError(t, c.Commit(ctx))
	require.NoError(t, c.Close())

	// Durable: a new broker on the same files, a new consumer.
	require.NoError(t, b.Close())
	b, err = Open("/d", consBrokerConfig(fs))
	require.NoError(t, err)
	defer b.Close()
	c, err = NewConsumer(b, cfg)
	require.NoError(t, err)
	defer c.Close()
	got = pollN(t, c, 7+3)
	first := map[int]int64{}
	for _, r := range got {
		if _, ok := first[r.Partition]; !ok {
			first[r.Partition] = r.Offset
		}
	}
	require.Equal(t, map[int]int64{0: 3, 1: 7}, first)
}

// TestConsumerStaleGeneration: a commit for a generation the group has left
// behind is refused, and the consumer rejoins on its next Poll.
func TestConsumerStaleGeneration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := consBroker(t, 2)
		consAppend(t, b, 0, 3)
		cfg := groupCfg("g")
		cfg.MaxWait = 10 * time.Second // the heartbeat ends the parked Poll: it rejoins
		c := newConsumerT(t, b, cfg)
		recs, err := c.Poll(context.Background())
		require.NoError(t, err)
		require.NotEmpty(t, recs)
		member, gen, _, _ := membership(c)

		// Another member joins and the group moves on; c rejoins (its
		// Poll does), so the group is at generation gen+1 and c is in it.
		other := make(chan group.JoinResponse)
		go func() {
			resp, err := b.JoinGroup(context.Background(), group.JoinRequest{Group: "g", Topics: []string{"t"}, SessionTimeout: time.Minute})
			if err != nil {
				t.Error(err)
			}
			other <- resp
		}()
		synctest.Wait()
		_, err = c.Poll(context.Background()) // rejoins
		require.NoError(t, err)
		resp := <-other
		_, now, _, _ := membership(c)
		require.Equal(t, gen+1, now)
		require.Equal(t, now, resp.Generation)

		// A commit still carrying the old generation is refused.
		c.mu.Lock()
		c.generation = gen
		c.parts[0].committed = -1
		c.mu.Unlock()
		err = c.Commit(context.Background())
		require.ErrorIs(t, err, ErrIllegalGeneration)
		require.ErrorContains(t, err, "delivered again")
		_, _, _, rejoin := membership(c)
		require.True(t, rejoin, "rejoins on the next Poll")
		committed, err := b.FetchOffsets(context.Background(), "g", nil)
		require.NoError(t, err)
		require.Empty(t, committed)

		require.NoError(t, b.LeaveGroup(context.Background(), "g", resp.MemberID))
		_, err = c.Poll(context.Background())
		require.NoError(t, err)
		m2, g2, tps, _ := membership(c)
		require.Equal(t, member, m2)
		require.Greater(t, g2, now)
		require.Len(t, tps, 2)
		require.NoError(t, c.Commit(context.Background()))
	})
}

// FuzzConsumerDecode feeds decodeFrom (the consumer's decoder of fetched
// bytes) arbitrary bytes, as given and with every batch's CRC corrected so
// that the fuzzer reaches the records. It must not panic, must fail only
// with the batch errors, and when the bytes are valid must return what a
// full validation (batch.Batches) and decode return, from any offset.
func FuzzConsumerDecode(f *testing.F) {
	var seed []byte
	for i, n := range []int{1, 3, 10} {
		recs := make([]Record, n)
		for j := range recs {
			recs[j] = Record{Key: fmt.Appendf(nil, "k%d", j), Value: fmt.Appendf(nil, "v%d-%d", i, j)}
			if j%2 == 1 {
				recs[j].Headers = []Header{{Key: "h", Value: []byte("x")}, {Key: "n"}}
			}
		}
		b := encodeConsumerSeed(recs)
		batch.SetBaseOffset(b, int64(len(seed)))
		seed = append(seed, b...)
	}
	f.Add(seed, int64(0))
	f.Add(seed, int64(2))
	f.Add(seed[:len(seed)-1], int64(5))
	f.Add(seed[:70], int64(0))
	f.Add([]byte{}, int64(0))
	f.Fuzz(func(t *testing.T, raw []byte, from int64) {
		from = max(from, 0)
		checkConsumerDecode(t, raw, from)
		checkConsumerDecode(t, fixCRCs(slices.Clone(raw)), from)
	})
}

func encodeConsumerSeed(recs []Record) []byte {
	var bd batch.Builder
	bd.Reset(1_700_000_000_000)
	for i, r := range recs {
		bd.Append(1_700_000_000_000+int64(i), r.Key, r.Value, r.Headers)
	}
	return slices.Clone(bd.Bytes())
}

// fixCRCs rewrites the CRC of every whole batch in raw.
func fixCRCs(raw []byte) []byte {
	for pos := 0; pos < len(raw); {
		size, err := batch.PeekSize(raw[pos:])
		if err != nil || size > len(raw)-pos || size < batch.HeaderSize {
			break
		}
		b := raw[pos : pos+size]
		batch.SetCRC(b)
		pos += size
	}
	return raw
}

func checkConsumerDecode(t *testing.T, raw []byte, from int64) {
	tp := TopicPartition{Topic: "t", Partition: 3}
	var hdrs []Header
	n := countRecords(raw)
	got, next, err := decodeFrom(make([]Record, 0, n), &hdrs, raw, tp, from)
	if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, batch.ErrShort) {
		t.Fatalf("unexpected error %v", err)
	}
	require.LessOrEqual(t, len(got), n, "pre-sized")

	// The reference: full validation of batches in offset order, then
	// every record at or after from of every batch but control batches.
	var want []Record
	wantNext, prevEnd := from, int64(-1)
	refErr := batch.Batches(raw, func(b []byte, h batch.Header) error {
		if h.BaseOffset < prevEnd {
			return ErrCorrupt
		}
		prevEnd = h.NextOffset()
		if h.NextOffset() > from {
			wantNext = max(wantNext, h.NextOffset())
		}
		if h.Control() {
			return nil
		}
		return batch.Records(b, h, func(r *batch.Record) error {
			if r.Offset >= from {
				want = append(want, Record{Topic: "t", Partition: 3, Offset: r.Offset, Timestamp: time.UnixMilli(r.Timestamp),
					Key: r.Key, Value: r.Value, Headers: slices.Clone(r.Headers)})
			}
			return nil
		})
	})
	if refErr != nil {
		return // decodeFrom may fail too, or pass a framing flaw that only the full validation sees: it trusts the CRC
	}
	require.NoError(t, err, "valid bytes")
	if len(want) == 0 {
		want = nil
	}
	if len(got) == 0 {
		got = nil
	}
	require.Equal(t, want, got)
	require.Equal(t, wantNext, next)
}
