package log

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
)

// prodClient is the Client of the producer tests: a real Broker (on an
// in-memory file system) whose Produce calls it records, and can hold or
// fail.
type prodClient struct {
	*Broker

	mu             sync.Mutex
	entered        int               // Produce calls begun
	calls          []prodCall        // Produce calls that reached the broker
	partitionCalls int               // Partitions calls
	hold           chan struct{}     // when set, Produce takes a token (or a close) from it first
	stuck          bool              // hold ignores the context
	fail           func(n int) error // when set, called with the call number (from 1); an error fails the call
}

type prodCall struct {
	tp      TopicPartition
	records int
	err     error
}

func (c *prodClient) Partitions(ctx context.Context, topic string) (int, error) {
	c.mu.Lock()
	c.partitionCalls++
	c.mu.Unlock()
	return c.Broker.Partitions(ctx, topic)
}

func (c *prodClient) ProduceBatch(ctx context.Context, tp TopicPartition, b []byte, acks Acks) (ProduceResult, error) {
	h, err := batch.ParseHeader(b)
	if err != nil {
		return ProduceResult{}, err
	}
	c.mu.Lock()
	c.entered++
	n, hold, fail, stuck := c.entered, c.hold, c.fail, c.stuck
	c.mu.Unlock()
	if hold != nil && stuck {
		<-hold
	} else if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ProduceResult{}, ctx.Err()
		}
	}
	var res ProduceResult
	if fail != nil {
		err = fail(n)
	}
	if err == nil {
		res, err = c.Broker.ProduceBatch(ctx, tp, b, acks)
	}
	c.mu.Lock()
	c.calls = append(c.calls, prodCall{tp: tp, records: int(h.NumRecords), err: err})
	c.mu.Unlock()
	return res, err
}

func (c *prodClient) setHold(ch chan struct{}) {
	c.mu.Lock()
	c.hold = ch
	c.mu.Unlock()
}

// batchSizes returns the record count of each Produce call that reached the
// broker.
func (c *prodClient) batchSizes() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := []int{}
	for _, call := range c.calls {
		out = append(out, call.records)
	}
	return out
}

func (c *prodClient) counts() (entered, partitionCalls int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entered, c.partitionCalls
}

// prodBroker opens a broker on an in-memory file system with topic "t".
func prodBroker(t *testing.T, cfg TopicConfig) (*Broker, *prodClient) {
	t.Helper()
	if cfg.MaxIndexBytes == 0 {
		cfg.MaxIndexBytes = 64 << 10 // small index files are quick to create
	}
	b, err := Open("/data", Config{FS: vfs.NewMem()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	_, err = b.CreateTopic("t", cfg)
	require.NoError(t, err)
	return b, &prodClient{Broker: b}
}

func newProd(t *testing.T, c Client, cfg ProducerConfig) *Producer {
	t.Helper()
	p, err := NewProducer(c, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p
}

// readAll returns the records of topic t's partition i.
func readAll(t *testing.T, b *Broker, i int) []Record {
	t.Helper()
	p, err := b.Partition("t", i)
	require.NoError(t, err)
	var out []Record
	for off := p.StartOffset(); off < p.EndOffset(); {
		recs, err := p.Read(off, 1<<20)
		require.NoError(t, err)
		out = append(out, recs...)
		off = recs[len(recs)-1].Offset + 1
	}
	return out
}

// collector gathers done callbacks.
type collector struct {
	mu   sync.Mutex
	recs []Record
	errs []error
}

func (c *collector) done(r Record, err error) {
	c.mu.Lock()
	c.recs = append(c.recs, r)
	c.errs = append(c.errs, err)
	c.mu.Unlock()
}

func (c *collector) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.recs)
}

func (c *collector) get() ([]Record, []error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Record(nil), c.recs...), append([]error(nil), c.errs...)
}

func val(i int) []byte { return fmt.Appendf(nil, "value-%05d", i) }

func TestProducerSendReturnsTheWrittenRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, c := prodBroker(t, TopicConfig{Partitions: 10})
		p := newProd(t, c, ProducerConfig{})
		start := time.Now()
		for i, kv := range kafkaMurmur2 {
			sent := time.Now()
			r, err := p.Send(t.Context(), Record{Topic: "t", Key: []byte(kv.key), Value: val(i), Headers: []Header{{Key: "h", Value: []byte("v")}}})
			require.NoError(t, err)
			// The partition Kafka's Java client picks for the key among 10.
			want := map[string]int{"21": 0, "foobar": 6, "a-little-bit-long-string": 2, "a-little-bit-longer-string": 9,
				"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": 7, "abc": 7}[kv.key]
			require.Equal(t, want, r.Partition, kv.key)
			require.Equal(t, "t", r.Topic)
			require.Equal(t, sent.UnixMilli(), r.Timestamp.UnixMilli(), "a zero timestamp becomes the time of the send")
			got := readAll(t, b, r.Partition)
			last := got[len(got)-1]
			require.Equal(t, last.Offset, r.Offset)
			require.Equal(t, r.Key, last.Key)
			require.Equal(t, r.Value, last.Value)
			require.Equal(t, r.Headers, last.Headers)
			require.True(t, r.Timestamp.Equal(last.Timestamp))
		}
		// "abc" went to partition 7 after the long key: offsets 0 and 1.
		require.Len(t, readAll(t, b, 7), 2)
		require.Zero(t, time.Since(start), "a lone Send does not wait out the linger")

		// A given timestamp is kept, to the millisecond.
		ts := time.Date(2024, 5, 1, 12, 0, 0, 123456789, time.UTC)
		r, err := p.Send(t.Context(), Record{Topic: "t", Key: []byte("x"), Timestamp: ts})
		require.NoError(t, err)
		require.Equal(t, ts.UnixMilli(), r.Timestamp.UnixMilli())
		got := readAll(t, b, r.Partition)
		require.Equal(t, ts.UnixMilli(), got[len(got)-1].Timestamp.UnixMilli())
	})
}

func TestProducerLinger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, c := prodBroker(t, TopicConfig{Partitions: 2})
		p := newProd(t, c, ProducerConfig{Partitioner: PartitionerManual, Acks: AcksLeader})
		var col collector
		for i := 0; i < 3; i++ {
			p.SendAsync(Record{Topic: "t", Partition: 1, Value: val(i)}, col.done)
		}
		synctest.Wait()
		require.Empty(t, c.batchSizes(), "nothing is sent before the linger")
		time.Sleep(defaultLinger - 1)
		synctest.Wait()
		require.Empty(t, c.batchSizes())
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		require.Equal(t, []int{3}, c.batchSizes(), "the batch goes when its linger expires")
		recs, errs := col.get()
		require.Len(t, recs, 3)
		for i, r := range recs {
			require.NoError(t, errs[i])
			require.Equal(t, 1, r.Partition)
			require.EqualValues(t, i, r.Offset)
			require.Equal(t, val(i), r.Value)
		}

		// A record arriving later starts a new batch and a new linger.
		time.Sleep(time.Millisecond)
		p.SendAsync(Record{Topic: "t", Partition: 1, Value: val(3)}, col.done)
		time.Sleep(defaultLinger - 1)
		synctest.Wait()
		require.Equal(t, []int{3}, c.batchSizes())
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		require.Equal(t, []int{3, 1}, c.batchSizes())
	})
}

func TestProducerNoLinger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, c := prodBroker(t, TopicConfig{})
		p := newProd(t, c, ProducerConfig{Linger: -1})
		start := time.Now()
		r, err := p.Send(t.Context(), Record{Topic: "t", Value: val(0)})
		require.NoError(t, err)
		require.Zero(t, time.Since(start), "a negative Linger sends at once")
		require.EqualValues(t, 0, r.Offset)

		// While a batch is in flight, records gather in the next one.
		hold := make(chan struct{})
		c.setHold(hold)
		var col collector
		p.SendAsync(Record{Topic: "t", Value: val(1)}, col.done)
		synctest.Wait() // in flight, held
		for i := 2; i <= 5; i++ {
			p.SendAsync(Record{Topic: "t", Value: val(i)}, col.done)
		}
		close(hold)
		require.NoError(t, p.Flush(t.Context()))
		require.Equal(t, []int{1, 1, 4}, c.batchSizes())
		require.Zero(t, time.Since(start))
	})
}

// sizeOf is the encoded size of a batch of k records as recordN makes them.
func sizeOf(k int) int {
	var bd batch.Builder
	for i := 0; i < k; i++ {
		r := recordN(i)
		bd.Append(r.Timestamp.UnixMilli(), r.Key, r.Value, r.Headers)
	}
	return bd.Size()
}

var fixedTime = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func recordN(i int) Record {
	return Record{Topic: "t", Timestamp: fixedTime, Value: bytes.Repeat([]byte{byte('a' + i%26)}, 100)}
}

func TestProducerBatchBytes(t *testing.T) {
	for _, c := range []struct {
		name       string
		batchBytes int
		before     []int // sent without waiting for the linger
		after      []int // after Flush
	}{
		{"exactly four", sizeOf(4), []int{4, 4}, []int{4, 4, 1}},
		{"four and a byte", sizeOf(4) + 1, []int{4, 4}, []int{4, 4, 1}},
		{"a byte short of four", sizeOf(4) - 1, []int{3, 3}, []int{3, 3, 3}},
		{"smaller than one record", 10, []int{1, 1, 1, 1, 1, 1, 1, 1, 1}, []int{1, 1, 1, 1, 1, 1, 1, 1, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, cl := prodBroker(t, TopicConfig{})
				p := newProd(t, cl, ProducerConfig{BatchBytes: c.batchBytes, Linger: time.Hour, Timeout: 2 * time.Hour})
				for i := 0; i < 9; i++ {
					p.SendAsync(recordN(i), nil)
				}
				synctest.Wait()
				require.Equal(t, c.before, cl.batchSizes())
				start := time.Now()
				require.NoError(t, p.Flush(t.Context()))
				require.Zero(t, time.Since(start), "Flush does not wait for the linger")
				require.Equal(t, c.after, cl.batchSizes())
				recs := readAll(t, b, 0)
				require.Len(t, recs, 9)
				for i, r := range recs {
					require.Equal(t, recordN(i).Value, r.Value)
				}
			})
		})
	}
}

func TestProducerCallbacksInOffsetOrder(t *testing.T) {
	leaktest.Check(t)
	b, err := Open(t.TempDir(), Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	_, err = b.CreateTopic("t", TopicConfig{Partitions: 3})
	require.NoError(t, err)
	// The real Broker as Client; small batches so that many are in flight.
	p := newProd(t, b, ProducerConfig{Partitioner: PartitionerManual, BatchBytes: 1024})

	const senders, perSender = 4, 300
	type ack struct {
		value  string
		offset int64
	}
	var mu sync.Mutex
	acks := map[int][]ack{} // by partition, in callback order
	seen := map[string]int{}
	var wg sync.WaitGroup
	for g := 0; g < senders; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perSender; i++ {
				v := fmt.Sprintf("g%d-%04d", g, i)
				p.SendAsync(Record{Topic: "t", Partition: (g + i) % 3, Value: []byte(v)}, func(r Record, err error) {
					if err != nil {
						t.Errorf("%s: %v", v, err)
					}
					mu.Lock()
					defer mu.Unlock()
					acks[r.Partition] = append(acks[r.Partition], ack{string(r.Value), r.Offset})
					seen[v]++
				})
			}
		}()
	}
	wg.Wait()
	require.NoError(t, p.Flush(t.Context()))

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, senders*perSender)
	for v, n := range seen {
		require.Equal(t, 1, n, "done called once for %s", v)
	}
	for part := 0; part < 3; part++ {
		log := readAll(t, b, part)
		require.Len(t, acks[part], len(log))
		last := map[byte]string{} // per sender: its records stay in send order
		for i, a := range acks[part] {
			require.EqualValues(t, i, a.offset, "partition %d: callbacks in offset order", part)
			require.Equal(t, a.value, string(log[i].Value), "the offset given is where the record is")
			g := a.value[1]
			require.Less(t, last[g], a.value)
			last[g] = a.value
		}
	}
}

func TestProducerFlushWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, c := prodBroker(t, TopicConfig{Partitions: 2})
		p := newProd(t, c, ProducerConfig{Partitioner: PartitionerRoundRobin, Linger: time.Hour, Timeout: 2 * time.Hour})
		hold := make(chan struct{})
		c.setHold(hold)
		var col collector
		for i := 0; i < 10; i++ {
			p.SendAsync(Record{Topic: "t", Value: val(i)}, col.done)
		}
		flushed := make(chan error)
		go func() { flushed <- p.Flush(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-flushed:
			t.Fatalf("Flush returned %v with batches held", err)
		default:
		}
		require.Zero(t, col.len())

		// A Flush whose ctx ends first returns its error.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		require.ErrorIs(t, p.Flush(ctx), context.DeadlineExceeded)

		close(hold)
		require.NoError(t, <-flushed)
		require.Equal(t, 10, col.len(), "every record is done when Flush returns")
		require.ElementsMatch(t, []int{5, 5}, c.batchSizes())
		// Nothing pending: Flush returns at once.
		require.NoError(t, p.Flush(t.Context()))
	})
}

func TestProducerCloseFlushesThenRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, c := prodBroker(t, TopicConfig{Partitions: 3})
		p, err := NewProducer(c, ProducerConfig{Linger: time.Hour, Timeout: 2 * time.Hour})
		require.NoError(t, err)
		var col collector
		for i := 0; i < 6; i++ {
			p.SendAsync(Record{Topic: "t", Key: []byte{byte(i)}, Value: val(i)}, col.done)
		}
		start := time.Now()
		require.NoError(t, p.Close())
		require.Zero(t, time.Since(start), "Close sends lingering batches at once")
		require.Equal(t, 6, col.len(), "Close returns after every callback")
		n := 0
		for i := 0; i < 3; i++ {
			n += len(readAll(t, b, i))
		}
		require.Equal(t, 6, n)

		_, err = p.Send(t.Context(), Record{Topic: "t"})
		require.ErrorIs(t, err, ErrClosed)
		called := false
		p.SendAsync(Record{Topic: "t"}, func(r Record, err error) {
			require.ErrorIs(t, err, ErrClosed)
			require.EqualValues(t, -1, r.Offset)
			called = true
		})
		require.True(t, called, "a refused record's done runs before SendAsync returns")
		p.SendAsync(Record{Topic: "t"}, nil)
		require.ErrorIs(t, p.Flush(t.Context()), ErrClosed)
		require.NoError(t, p.Close())
		entered, _ := c.counts()
		require.Len(t, c.batchSizes(), entered)
	})
}

func TestProducerConcurrentClose(t *testing.T) {
	leaktest.Check(t)
	_, c := prodBroker(t, TopicConfig{Partitions: 2})
	p, err := NewProducer(c, ProducerConfig{})
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ok, closed, other int
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				p.SendAsync(Record{Topic: "t", Value: val(i)}, func(_ Record, err error) {
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						ok++
					case errors.Is(err, ErrClosed):
						closed++
					default:
						other++
					}
				})
			}
		}()
	}
	require.NoError(t, p.Close())
	require.NoError(t, p.Close())
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 600, ok+closed, "every record is done: written before Close, or refused after")
	require.Zero(t, other)
}

func TestProducerTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, c := prodBroker(t, TopicConfig{})
		p := newProd(t, c, ProducerConfig{Timeout: time.Second, BatchBytes: 10})
		c.setHold(make(chan struct{})) // the broker never answers
		start := time.Now()
		var col collector
		p.SendAsync(Record{Topic: "t", Value: val(1)}, col.done)
		p.SendAsync(Record{Topic: "t", Value: val(2)}, col.done)
		_, err := p.Send(t.Context(), Record{Topic: "t", Value: val(3)})
		require.ErrorIs(t, err, ErrTimeout)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, time.Second, time.Since(start), "Timeout bounds the send")
		_, errs := col.get()
		require.Len(t, errs, 2)
		for _, err := range errs {
			require.ErrorIs(t, err, ErrTimeout)
		}
		entered, _ := c.counts()
		require.Equal(t, 1, entered, "batches that expired while queued are not sent")
		c.setHold(nil)
		r, err := p.Send(t.Context(), Record{Topic: "t", Value: val(4)})
		require.NoError(t, err)
		require.EqualValues(t, 0, r.Offset, "the timed-out records were not written")
	})
}

func TestProducerBufferFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, c := prodBroker(t, TopicConfig{})
		p := newProd(t, c, ProducerConfig{BufferBytes: 1000, Timeout: time.Second, Linger: -1})
		// A stuck broker: it answers only when told, whatever the context.
		hold := make(chan struct{})
		c.setHold(hold)
		c.stuck = true
		value := make([]byte, 300) // about 420 bytes of buffer each
		var col collector
		send := func(i int) { p.SendAsync(Record{Topic: "t", Key: []byte{byte(i)}, Value: value}, col.done) }
		send(1)
		synctest.Wait() // 1 is in flight
		send(2)
		returned := make(chan struct{})
		go func() {
			send(3)
			close(returned)
		}()
		synctest.Wait()
		select {
		case <-returned:
			t.Fatal("SendAsync did not block on a full buffer")
		default:
		}
		// Room is made when a batch completes.
		hold <- struct{}{}
		<-returned

		// Now 2 is in flight and 3 waits: full again. A wait for room ends
		// with its context...
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
		defer cancel()
		_, err := p.Send(ctx, Record{Topic: "t", Value: value})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NotErrorIs(t, err, ErrTimeout)
		// ...or at Timeout.
		send(4)
		require.Equal(t, time.Second+time.Millisecond, time.Since(start))
		// A record that could never fit is refused at once.
		_, err = p.Send(t.Context(), Record{Topic: "t", Value: make([]byte, 2000)})
		require.ErrorIs(t, err, ErrRecordTooLarge)

		close(hold)
		require.NoError(t, p.Flush(t.Context()))
		recs, errs := col.get()
		require.Len(t, recs, 4)
		got := map[byte]error{}
		for i, r := range recs {
			got[r.Key[0]] = errs[i]
		}
		require.NoError(t, got[1])
		require.ErrorIs(t, got[2], ErrTimeout, "the broker answered past the deadline")
		require.ErrorIs(t, got[3], ErrTimeout, "its batch expired while queued")
		require.ErrorIs(t, got[4], ErrTimeout, "no room within Timeout")
	})
}

func TestProducerUnknownTopic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, c := prodBroker(t, TopicConfig{})
		p := newProd(t, c, ProducerConfig{})
		start := time.Now()
		_, err := p.Send(t.Context(), Record{Topic: "nope", Value: val(0)})
		require.ErrorIs(t, err, ErrUnknownTopic)
		require.ErrorIs(t, err, ErrTimeout, "it waited for the topic's metadata up to Timeout")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, defaultTimeout, time.Since(start))
		calls := 0
		p.SendAsync(Record{Topic: "nope"}, func(r Record, err error) {
			require.ErrorIs(t, err, ErrUnknownTopic)
			calls++
		})
		require.Equal(t, 1, calls)
		p.SendAsync(Record{Topic: "nope"}, nil)
		_, err = p.Send(t.Context(), Record{Topic: "", Value: val(0)})
		require.Error(t, err)
		require.Equal(t, []string{"t"}, b.Topics(), "no topic is created")
		entered, _ := c.counts()
		require.Zero(t, entered)

		// A topic deleted after the producer cached it: the produce fails,
		// and the next send asks the broker again.
		_, err = p.Send(t.Context(), Record{Topic: "t", Value: val(0)})
		require.NoError(t, err)
		_, before := c.counts()
		require.NoError(t, b.DeleteTopic("t"))
		_, err = p.Send(t.Context(), Record{Topic: "t", Value: val(1)})
		require.ErrorIs(t, err, ErrUnknownTopic)
		_, err = p.Send(t.Context(), Record{Topic: "t", Value: val(2)})
		require.ErrorIs(t, err, ErrUnknownTopic)
		_, after := c.counts()
		require.Greater(t, after, before+1, "it asked again, and again while it waited")
		// Created again, with more partitions: the producer sees them.
		_, err = b.CreateTopic("t", TopicConfig{Partitions: 4, MaxIndexBytes: 64 << 10})
		require.NoError(t, err)
		r, err := p.Send(t.Context(), Record{Topic: "t", Key: []byte("abc"), Value: val(3)})
		require.NoError(t, err)
		require.Equal(t, KeyPartition([]byte("abc"), 4), r.Partition)
		require.EqualValues(t, 0, r.Offset)
	})
}

// A Send to a topic the Client does not know yet waits for its metadata
// (Kafka's max.block.ms, here Timeout), asking again with a backoff: a topic
// created meanwhile (through another member, say) takes the record. A
// Send's ctx ends the wait, with an error that says what it waited for.
func TestProducerWaitsForTopicMetadata(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, c := prodBroker(t, TopicConfig{})
		p := newProd(t, c, ProducerConfig{})
		type result struct {
			r   Record
			err error
		}
		sent := make(chan result, 1)
		go func() {
			r, err := p.Send(t.Context(), Record{Topic: "later", Value: val(0)})
			sent <- result{r, err}
		}()
		synctest.Wait() // Send is waiting for the topic
		select {
		case res := <-sent:
			t.Fatalf("Send returned before the topic existed: %v", res.err)
		default:
		}
		time.Sleep(3 * time.Second) // fake time: the Producer asks again meanwhile
		_, asked := c.counts()
		require.Greater(t, asked, 2)
		_, err := b.CreateTopic("later", TopicConfig{Partitions: 2, MaxIndexBytes: 64 << 10})
		require.NoError(t, err)
		res := <-sent
		require.NoError(t, res.err)
		require.EqualValues(t, 0, res.r.Offset)

		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		_, err = p.Send(ctx, Record{Topic: "never", Value: val(1)})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorIs(t, err, ErrUnknownTopic, "the error says what it waited for: %v", err)
	})
}

// A Send whose ctx ends while its batch is being retried says why: the
// error matches ctx's and the last error of the batch.
func TestProducerSendCtxErrorSaysWhy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, c := prodBroker(t, TopicConfig{})
		withMinInSync(t, b, "t", 2) // a standalone broker has 1
		p := newProd(t, c, ProducerConfig{})
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := p.Send(ctx, Record{Topic: "t", Value: val(0)})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorIs(t, err, ErrNotEnoughReplicas, "%v", err)
	})
}

func TestProducerManualPartitioner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, c := prodBroker(t, TopicConfig{Partitions: 3})
		p := newProd(t, c, ProducerConfig{Partitioner: PartitionerManual})
		for _, part := range []int{0, 2, 0} {
			r, err := p.Send(t.Context(), Record{Topic: "t", Partition: part, Key: []byte("abc")})
			require.NoError(t, err)
			require.Equal(t, part, r.Partition, "the key does not matter")
		}
		require.Len(t, readAll(t, b, 0), 2)
		require.Len(t, readAll(t, b, 1), 0)
		require.Len(t, readAll(t, b, 2), 1)
		for _, part := range []int{3, -1, 1 << 20} {
			_, err := p.Send(t.Context(), Record{Topic: "t", Partition: part})
			require.ErrorIs(t, err, ErrUnknownPartition, "partition %d", part)
		}

		// The default partitioner ignores Record.Partition.
		q := newProd(t, c, ProducerConfig{})
		r, err := q.Send(t.Context(), Record{Topic: "t", Partition: 2, Key: []byte("abc")})
		require.NoError(t, err)
		require.Equal(t, KeyPartition([]byte("abc"), 3), r.Partition)
		require.Equal(t, 0, r.Partition)
	})
}

func TestProducerRoundRobin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, c := prodBroker(t, TopicConfig{Partitions: 3})
		p := newProd(t, c, ProducerConfig{Partitioner: PartitionerRoundRobin, Acks: AcksNone})
		var got []int
		for i := 0; i < 7; i++ {
			r, err := p.Send(t.Context(), Record{Topic: "t", Key: []byte("same")})
			require.NoError(t, err)
			got = append(got, r.Partition)
		}
		require.Equal(t, []int{0, 1, 2, 0, 1, 2, 0}, got)
	})
}

func TestProducerSticky(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, c := prodBroker(t, TopicConfig{Partitions: 4})
		// AcksNone: Send returns the partition as soon as the record is queued.
		p := newProd(t, c, ProducerConfig{Acks: AcksNone, BatchBytes: sizeOf(5), Linger: time.Hour, Timeout: 2 * time.Hour})
		send := func(key []byte) int {
			r := recordN(0)
			r.Key = key
			out, err := p.Send(t.Context(), r)
			require.NoError(t, err)
			require.EqualValues(t, -1, out.Offset)
			return out.Partition
		}
		// Nil keys stay on one partition until its batch is full (5 records),
		// then move to another.
		var runs []int
		used := map[int]bool{}
		for run := 0; run < 40; run++ {
			first := send(nil)
			for i := 1; i < 5; i++ {
				require.Equal(t, first, send(nil), "run %d record %d stays on the sticky partition", run, i)
			}
			if run > 0 {
				require.NotEqual(t, runs[run-1], first, "a new batch, a new partition")
			}
			runs = append(runs, first)
			used[first] = true
		}
		require.Len(t, used, 4, "the sticky partition moves over every partition: %v", runs)

		// Keyed records go by their hash and leave the sticky partition alone.
		sticky := send(nil)
		var other []byte
		for i := 0; other == nil; i++ {
			if k := []byte(fmt.Sprint(i)); KeyPartition(k, 4) != sticky {
				other = k
			}
		}
		for i := 0; i < 20; i++ {
			require.Equal(t, KeyPartition(other, 4), send(other))
		}
		require.Equal(t, sticky, send(nil))

		// A batch sent by its linger moves the sticky partition too.
		q := newProd(t, c, ProducerConfig{Acks: AcksNone})
		r, err := q.Send(t.Context(), Record{Topic: "t"})
		require.NoError(t, err)
		r2, err := q.Send(t.Context(), Record{Topic: "t"})
		require.NoError(t, err)
		require.Equal(t, r.Partition, r2.Partition)
		time.Sleep(defaultLinger)
		synctest.Wait()
		r3, err := q.Send(t.Context(), Record{Topic: "t"})
		require.NoError(t, err)
		require.NotEqual(t, r.Partition, r3.Partition)
	})
}

func TestProducerAcksNone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, c := prodBroker(t, TopicConfig{})
		p := newProd(t, c, ProducerConfig{Acks: AcksNone})
		start := time.Now()
		r, err := p.Send(t.Context(), Record{Topic: "t", Value: val(0)})
		require.NoError(t, err)
		require.Zero(t, time.Since(start), "AcksNone returns once queued")
		require.EqualValues(t, -1, r.Offset)
		require.Equal(t, 0, r.Partition)
		require.Equal(t, start.UnixMilli(), r.Timestamp.UnixMilli())
		require.Empty(t, c.batchSizes())
		var col collector
		p.SendAsync(Record{Topic: "t", Value: val(1)}, col.done)
		require.NoError(t, p.Flush(t.Context()))
		recs, errs := col.get()
		require.NoError(t, errs[0])
		require.EqualValues(t, -1, recs[0].Offset)
		require.Len(t, readAll(t, b, 0), 2)
	})
}

func TestProducerRecordTooLarge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, c := prodBroker(t, TopicConfig{MaxMessageBytes: 1024})
		p := newProd(t, c, ProducerConfig{})
		// One batch of seven: the broker refuses it; the producer splits it
		// until only the big record fails.
		var col collector
		sizes := []int{100, 100, 100, 3000, 100, 100, 100}
		for i, n := range sizes {
			p.SendAsync(Record{Topic: "t", Key: []byte{byte(i)}, Value: make([]byte, n)}, col.done)
		}
		require.NoError(t, p.Flush(t.Context()))
		recs, errs := col.get()
		require.Len(t, recs, 7)
		off := int64(0)
		for i, r := range recs {
			require.Equal(t, []byte{byte(i)}, r.Key, "callbacks in send order")
			if sizes[i] > 1024 {
				require.ErrorIs(t, errs[i], ErrRecordTooLarge)
				require.EqualValues(t, -1, r.Offset)
				continue
			}
			require.NoError(t, errs[i])
			require.Equal(t, off, r.Offset)
			off++
		}
		log := readAll(t, b, 0)
		require.Len(t, log, 6)
		for i, r := range log {
			require.EqualValues(t, i, r.Offset)
		}

		// A record larger than BatchBytes goes alone.
		q := newProd(t, c, ProducerConfig{BatchBytes: 500, Linger: time.Hour, Timeout: 2 * time.Hour})
		before := len(c.batchSizes())
		q.SendAsync(Record{Topic: "t", Value: make([]byte, 100)}, nil)
		q.SendAsync(Record{Topic: "t", Value: make([]byte, 800)}, nil)
		q.SendAsync(Record{Topic: "t", Value: make([]byte, 100)}, nil)
		synctest.Wait()
		require.Equal(t, []int{1, 1}, c.batchSizes()[before:])
		require.NoError(t, q.Flush(t.Context()))
		require.Equal(t, []int{1, 1, 1}, c.batchSizes()[before:])
	})
}

func TestProducerFailedBatchKeepsOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, c := prodBroker(t, TopicConfig{})
		boom := errors.New("boom")
		c.fail = func(n int) error {
			if n == 1 {
				return boom
			}
			return nil
		}
		var logged bytes.Buffer
		p := newProd(t, c, ProducerConfig{BatchBytes: sizeOf(2), Logger: slog.New(slog.NewTextHandler(&logged, nil))})
		var col collector
		for i := 0; i < 6; i++ {
			p.SendAsync(recordN(i), col.done)
		}
		p.SendAsync(recordN(6), nil)
		require.NoError(t, p.Flush(t.Context()))
		recs, errs := col.get()
		require.Len(t, recs, 6)
		for i := range recs {
			require.Equal(t, recordN(i).Value, recs[i].Value, "callbacks in send order")
			if i < 2 {
				require.ErrorIs(t, errs[i], boom)
				require.EqualValues(t, -1, recs[i].Offset)
			} else {
				require.NoError(t, errs[i])
				require.EqualValues(t, i-2, recs[i].Offset)
			}
		}
		require.Len(t, readAll(t, b, 0), 5)
		require.Empty(t, logged.String(), "failures with a callback are not logged")

		// A fire-and-forget record's failure is logged.
		c.fail = func(int) error { return boom }
		p.SendAsync(recordN(7), nil)
		require.NoError(t, p.Flush(t.Context()))
		require.Contains(t, logged.String(), "records lost")
		require.Contains(t, logged.String(), "boom")
	})
}

func TestProducerSendContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, c := prodBroker(t, TopicConfig{})
		p := newProd(t, c, ProducerConfig{})
		hold := make(chan struct{})
		c.setHold(hold)
		ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
		defer cancel()
		r, err := p.Send(ctx, Record{Topic: "t", Value: val(0)})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.EqualValues(t, -1, r.Offset)
		// Cancelling ends the wait, not the send.
		close(hold)
		require.NoError(t, p.Flush(t.Context()))
		require.Len(t, readAll(t, b, 0), 1)
	})
}

func TestProducerDoneMaySend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, c := prodBroker(t, TopicConfig{})
		p := newProd(t, c, ProducerConfig{})
		var col collector
		p.SendAsync(Record{Topic: "t", Value: val(0)}, func(r Record, err error) {
			require.NoError(t, err)
			p.SendAsync(Record{Topic: "t", Value: val(1)}, col.done)
		})
		time.Sleep(defaultLinger)
		synctest.Wait() // the first callback has sent the second record
		require.NoError(t, p.Flush(t.Context()))
		require.Equal(t, 1, col.len())
		require.Len(t, readAll(t, b, 0), 2)
	})
}

func TestProducerAcksAndFlushPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, c := prodBroker(t, TopicConfig{FlushMessages: 1})
		// AcksAll needs two in-sync replicas here; a standalone broker has one.
		withMinInSync(t, b, "t", 2)
		all := newProd(t, c, ProducerConfig{})
		_, err := all.Send(t.Context(), Record{Topic: "t", Value: val(0)})
		require.ErrorIs(t, err, ErrNotEnoughReplicas)
		leader := newProd(t, c, ProducerConfig{Acks: AcksLeader})
		for i := 0; i < 3; i++ {
			r, err := leader.Send(t.Context(), Record{Topic: "t", Value: val(i)})
			require.NoError(t, err)
			part, err := b.Partition("t", 0)
			require.NoError(t, err)
			require.Greater(t, part.RecoveryPoint(), r.Offset, "with FlushMessages 1, Send returns after the fsync")
		}
	})
}

func TestProducerClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, c := prodBroker(t, TopicConfig{})
		p := newProd(t, c, ProducerConfig{})
		for _, d := range []time.Duration{0, time.Microsecond, 999 * time.Microsecond, 37 * time.Millisecond, clockRefresh, 2 * time.Second, 1} {
			time.Sleep(d)
			p.mu.Lock()
			got := p.nowMsLocked()
			p.mu.Unlock()
			require.Equal(t, time.Now().UnixMilli(), got, "after %v", d)
		}
	})
}

func TestProducerConfig(t *testing.T) {
	_, err := NewProducer(nil, ProducerConfig{})
	require.ErrorIs(t, err, ErrInvalidConfig)
	synctest.Test(t, func(t *testing.T) {
		_, c := prodBroker(t, TopicConfig{})
		for _, cfg := range []ProducerConfig{
			{MaxInFlight: 2}, {MaxInFlight: -1},
			{Idempotent: true, MaxInFlight: 6}, {Idempotent: true, MaxInFlight: -1},
			{Idempotent: true, Acks: AcksLeader}, {Idempotent: true, Acks: AcksNone},
			{RetryBackoff: -1},
			{Acks: -1}, {Acks: AcksNone + 1},
			{Partitioner: -1}, {Partitioner: PartitionerRoundRobin + 1},
			{BatchBytes: -1}, {Timeout: -1}, {BufferBytes: -1},
			{Linger: time.Minute}, // not shorter than the 30 s timeout
			{Linger: time.Second, Timeout: time.Second},
		} {
			_, err := NewProducer(c, cfg)
			require.ErrorIs(t, err, ErrInvalidConfig, "%+v", cfg)
		}
		cfg := ProducerConfig{}
		p := newProd(t, c, cfg)
		require.Equal(t, ProducerConfig{}, cfg, "the caller's config is not written")
		require.Equal(t, 5*time.Millisecond, p.cfg.Linger)
		require.Equal(t, 1_000_000, p.cfg.BatchBytes)
		require.Equal(t, 30*time.Second, p.cfg.Timeout)
		require.Equal(t, 32<<20, p.cfg.BufferBytes)
		require.Equal(t, AcksAll, p.cfg.Acks)
		require.Equal(t, 1, p.cfg.MaxInFlight)
		require.Equal(t, 100*time.Millisecond, p.cfg.RetryBackoff)
		q := newProd(t, c, ProducerConfig{Idempotent: true})
		require.Equal(t, 5, q.cfg.MaxInFlight, "Kafka's default with idempotence")
	})
}

func TestProducerGoroutines(t *testing.T) {
	leaktest.Check(t)
	_, c := prodBroker(t, TopicConfig{Partitions: 8})
	before := runtime.NumGoroutine()
	p, err := NewProducer(c, ProducerConfig{Linger: -1})
	require.NoError(t, err)
	for i := 0; i < 1000; i++ {
		p.SendAsync(Record{Topic: "t", Value: val(i)}, nil)
	}
	// One timer goroutine, and at most one sender per partition: never one
	// per record.
	require.LessOrEqual(t, runtime.NumGoroutine()-before, 1+8)
	require.NoError(t, p.Flush(t.Context()))
	require.NoError(t, p.Close())

	// An idempotent producer: at most MaxInFlight senders per partition,
	// all joined by Close.
	before = runtime.NumGoroutine()
	p, err = NewProducer(c, ProducerConfig{Idempotent: true, Linger: -1, BatchBytes: 100})
	require.NoError(t, err)
	for i := 0; i < 1000; i++ {
		p.SendAsync(Record{Topic: "t", Value: val(i)}, nil)
	}
	require.LessOrEqual(t, runtime.NumGoroutine()-before, 1+8*5)
	require.NoError(t, p.Close())
}

func ExampleProducer_SendAsync() {
	b, _ := Open("/data", Config{FS: vfs.NewMem()})
	defer b.Close()
	b.CreateTopic("orders", TopicConfig{})

	p, _ := NewProducer(b, ProducerConfig{})
	for _, id := range []string{"order-1", "order-2", "order-3"} {
		p.SendAsync(Record{Topic: "orders", Key: []byte(id), Value: []byte("placed")}, func(r Record, err error) {
			// Called once per record, in offset order per partition.
			if err != nil {
				fmt.Println(err)
				return
			}
			fmt.Printf("%s -> %s-%d@%d\n", r.Key, r.Topic, r.Partition, r.Offset)
		})
	}
	p.Close() // sends what is left and waits for the callbacks
	// Output:
	// order-1 -> orders-0@0
	// order-2 -> orders-0@1
	// order-3 -> orders-0@2
}

func ExampleKeyPartition() {
	// The partition Kafka's Java client picks for key "abc" among 10.
	fmt.Println(KeyPartition([]byte("abc"), 10))
	// Output: 7
}

// TestProducerLingerSkipsFullBatches: batches that fill before their linger
// ends cost the timer goroutine no round each, and a batch opened after
// them still goes when its own linger ends, neither earlier nor later.
func TestProducerLingerSkipsFullBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, c := prodBroker(t, TopicConfig{Partitions: 2})
		p := newProd(t, c, ProducerConfig{Partitioner: PartitionerManual, Acks: AcksLeader, BatchBytes: sizeOf(3)})
		send := func(part, i int) {
			r := recordN(i)
			r.Partition = part
			p.SendAsync(r, nil)
		}
		send(0, 0) // lingers on partition 0 from t=0
		synctest.Wait()
		p.mu.Lock()
		runs := p.lingRuns
		p.mu.Unlock()
		for k := range 10 {
			for i := range 3 {
				send(1, 3*k+i) // full at its third record: sent at once
			}
			synctest.Wait()
			time.Sleep(100 * time.Microsecond)
		}
		require.Equal(t, []int{3, 3, 3, 3, 3, 3, 3, 3, 3, 3}, c.batchSizes())
		send(1, 30) // opened at t=1ms: lingers until 1ms+linger
		time.Sleep(defaultLinger - time.Millisecond - 1)
		synctest.Wait()
		require.Equal(t, 10, len(c.batchSizes()), "nothing more before the first linger ends")
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		require.Equal(t, []int{3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 1}, c.batchSizes(), "partition 0's batch at its linger")
		time.Sleep(time.Millisecond - 1)
		synctest.Wait()
		require.Len(t, c.batchSizes(), 11, "partition 1's last batch lingers on")
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		require.Equal(t, []int{3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 1, 1}, c.batchSizes(), "and goes at its own linger")
		p.mu.Lock()
		defer p.mu.Unlock()
		require.LessOrEqual(t, p.lingRuns-runs, 3, "the timer goroutine woke for the open batches only, not for each full one")
	})
}
