package log

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/segment/batch"
)

// Errors of the Producer. Test for them with errors.Is.
var (
	// ErrIdempotenceUnsupported was returned by NewProducer for
	// ProducerConfig.Idempotent before idempotent producers were built.
	//
	// Deprecated: ProducerConfig.Idempotent works; nothing returns this
	// error any more.
	ErrIdempotenceUnsupported = errors.New("log: idempotent producer not built yet (set ProducerConfig.Idempotent to false)")
	// ErrTimeout is the error of a record that was not acknowledged within
	// ProducerConfig.Timeout. Such errors also match
	// context.DeadlineExceeded. The record may still have been written.
	ErrTimeout = errors.New("log: produce timed out")
)

// errProducerClosed is the error of a record sent after Close.
var errProducerClosed = fmt.Errorf("log: producer: %w", ErrClosed)

// ProducerConfig configures a Producer. The zero value means Kafka's
// defaults.
type ProducerConfig struct {
	// Acks says when a record counts as sent: AcksAll (the zero value) and
	// AcksLeader once the broker has appended it (on a standalone broker
	// both mean appended, and fsynced when the topic's FlushMessages asks
	// for it); AcksNone as soon as it is queued in the producer.
	Acks Acks
	// Linger is how long a batch waits for more records before it is sent
	// (Kafka's linger.ms); 0 → 5 ms (Kafka 4.0's default); negative → no
	// wait: a batch goes as soon as no other batch of its partition is in
	// flight. A full batch never waits, and neither does a batch whose
	// every record is a Send still waiting for it: its callers cannot add
	// records, so it goes as soon as no other batch of its partition is in
	// flight, as with a negative Linger (while one is, concurrent Sends
	// gather in the next batch). In a transaction, a batch of 32 KiB or
	// more goes as soon as no other batch of its partition is in flight:
	// CommitTransaction would send it anyway, and waits only for the last.
	Linger time.Duration
	// BatchBytes is the size at which a partition's batch is closed and
	// sent (Kafka's batch.size); 0 → 1 MB, kgo's default, not Kafka's
	// 16 KiB: to an in-process broker a batch costs a write(2), a wake-up
	// of the fetches parked on its partition and a read by each consumer,
	// and under load 16 KiB batches spend a third of the CPU per record on
	// those (1 KiB records produced and consumed: 2.1–2.3 µs per record
	// with 16 KiB batches, 1.45–1.6 µs with 1 MB, bench module). A batch
	// still goes after Linger however little it holds, and its buffer
	// grows with what its partition sends, so a partition that trickles
	// does not hold 1 MB. 1 MB leaves room under the topics' default
	// MaxMessageBytes (1 MiB + 12) for a codec's overhead on incompressible
	// records. A record larger than BatchBytes goes alone in a batch of its
	// own.
	BatchBytes int
	// Timeout bounds how long a record may wait: for room in the buffer,
	// in its batch, for the broker's answers and between retries (counted
	// from when its batch was opened): Kafka's delivery.timeout.ms. Past it
	// the record fails with an error matching ErrTimeout and
	// context.DeadlineExceeded (and the last error of its batch, if it was
	// retried). 0 → 30 s (Kafka's request.timeout.ms: a Client answers
	// within it or times out itself). It must be longer than Linger.
	Timeout time.Duration
	// Idempotent makes the producer idempotent, as Kafka's
	// enable.idempotence (KIP-98): on its first send it gets a producer id
	// and epoch from the Client (InitProducerID), and each batch carries
	// them and the sequence number of its first record in its partition,
	// so that the broker appends a retried batch only once and refuses one
	// that would leave a gap (ErrOutOfOrderSequence). The producer then
	// retries every retriable error (see MaxInFlight, RetryBackoff) until
	// Timeout, keeping each partition's records in send order. A batch the
	// broker cannot place (its state for the producer lost) makes the
	// producer bump its epoch and start the partition's sequences at 0
	// again (KIP-360); ErrProducerFenced is fatal: every record not yet
	// acknowledged, and every later send, fails with it. It needs AcksAll,
	// as in Kafka.
	Idempotent bool
	// Compression is the codec of the batches the producer sends (Kafka's
	// compression.type): CompressionNone (the zero value, Kafka's default),
	// CompressionGzip, CompressionSnappy, CompressionLz4 or CompressionZstd.
	// A batch is compressed once, when it is closed; BatchBytes counts the
	// records' uncompressed size. The broker stores the batch as it is sent
	// unless its topic's Compression says otherwise.
	Compression Compression
	// MaxInFlight is how many batches of one partition may be sent and not
	// yet acknowledged (Kafka's max.in.flight.requests.per.connection):
	// 0 → 5 for an idempotent producer (Kafka's default, and the most its
	// broker-side state covers), 1 otherwise. An idempotent producer sends
	// a partition's first batch of an epoch alone, the others once it is
	// answered. Only an idempotent producer
	// may have more than 1: concurrent calls of Client.ProduceBatch may
	// reach the broker in any order, which only sequence numbers repair.
	MaxInFlight int
	// RetryBackoff is how long a batch waits before it is sent again after
	// a retriable error (Kafka's retry.backoff.ms); 0 → 100 ms. An
	// idempotent producer retries ErrNotLeader, ErrNotEnoughReplicas,
	// timeouts of the Client and lost connections; a non-idempotent one
	// only ErrNotEnoughReplicas, the one error that says nothing was
	// written (the others could duplicate records).
	RetryBackoff time.Duration
	// Partitioner picks each record's partition; the zero value is
	// PartitionerDefault (Kafka's murmur2 for keys, sticky for nil keys).
	Partitioner Partitioner
	// BufferBytes bounds the memory of records waiting to be acknowledged:
	// their encoded size plus about 100 bytes of bookkeeping each (Kafka's
	// buffer.memory); 0 → 32 MiB. Send and SendAsync block while it is
	// full, up to Timeout.
	BufferBytes int
	// TransactionalID makes the producer transactional (Kafka's
	// transactional.id, KIP-98; see BeginTransaction): its records are
	// written in transactions that commit or abort atomically, with the
	// consumer offsets sent to them. It implies Idempotent (and so
	// AcksAll), and the Client must be a TxnClient. One producer at a time
	// per id: a new one fences the older ones.
	TransactionalID string
	// TransactionTimeout is how long the coordinator lets a transaction of
	// the producer stay open before it aborts it (Kafka's
	// transaction.timeout.ms); 0 → 1 minute. It must not pass the
	// coordinator's maximum (15 minutes by default).
	TransactionTimeout time.Duration
	// Logger receives a line for each failed batch holding fire-and-forget
	// records (nil done), whose errors would otherwise go unseen;
	// nil → discard.
	Logger *slog.Logger
}

// The producer's defaults: Kafka's but for BatchBytes.
const (
	defaultLinger      = 5 * time.Millisecond
	defaultBatchBytes  = 1_000_000 // kgo's, not Kafka's 16 KiB: see BatchBytes
	defaultTimeout     = 30 * time.Second
	defaultBufferBytes = 32 << 20
	defaultBackoff     = 100 * time.Millisecond
	// maxIdempotentInFlight is Kafka's bound on
	// max.in.flight.requests.per.connection with idempotence: the broker
	// keeps the metadata of a producer's last 5 batches.
	maxIdempotentInFlight = producerBatchesKept
)

func (c ProducerConfig) withDefaults() ProducerConfig {
	if c.TransactionalID != "" {
		c.Idempotent = true
		if c.TransactionTimeout == 0 {
			c.TransactionTimeout = DefaultTransactionTimeout
		}
	}
	if c.Linger == 0 {
		c.Linger = defaultLinger
	}
	if c.BatchBytes == 0 {
		c.BatchBytes = defaultBatchBytes
	}
	if c.Timeout == 0 {
		c.Timeout = defaultTimeout
	}
	if c.BufferBytes == 0 {
		c.BufferBytes = defaultBufferBytes
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 1
		if c.Idempotent {
			c.MaxInFlight = maxIdempotentInFlight
		}
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = defaultBackoff
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c ProducerConfig) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: producer: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case c.Idempotent && (c.MaxInFlight < 1 || c.MaxInFlight > maxIdempotentInFlight):
		return bad("max in flight %d: an idempotent producer allows 1 to %d", c.MaxInFlight, maxIdempotentInFlight)
	case !c.Idempotent && c.MaxInFlight != 1:
		return bad("max in flight %d: a producer that is not idempotent allows only 1", c.MaxInFlight)
	case c.Idempotent && c.Acks != AcksAll:
		// As Kafka: a batch acknowledged by a leader alone can be lost in a
		// failover, and its successors then have a gap before them.
		return bad("an idempotent producer needs AcksAll, not %v", c.Acks)
	case c.TransactionTimeout < 0 || c.TransactionalID == "" && c.TransactionTimeout != 0:
		return bad("transaction timeout %v without a transactional id, or negative", c.TransactionTimeout)
	case c.RetryBackoff < 0:
		return bad("negative retry backoff %v", c.RetryBackoff)
	case c.Acks < AcksAll || c.Acks > AcksNone:
		return bad("unknown acks %d", int(c.Acks))
	case !c.Compression.valid():
		return bad("unknown compression %d", int(c.Compression))
	case c.Partitioner < PartitionerDefault || c.Partitioner > PartitionerRoundRobin:
		return bad("unknown partitioner %d", int(c.Partitioner))
	case c.BatchBytes < 0:
		return bad("negative batch bytes %d", c.BatchBytes)
	case c.Timeout < 0:
		return bad("negative timeout %v", c.Timeout)
	case c.Linger >= c.Timeout:
		return bad("linger %v must be shorter than timeout %v", c.Linger, c.Timeout)
	case c.BufferBytes < 0:
		return bad("negative buffer bytes %d", c.BufferBytes)
	}
	return nil
}

// A Producer sends records to the partitions of a Client's topics, in
// batches, as Kafka's producer does.
//
// Each record's partition is chosen by the Partitioner. Records are
// gathered per partition into one record batch until it holds BatchBytes or
// has waited Linger, then the batch goes to the broker with one
// Client.ProduceBatch. A partition has up to MaxInFlight batches in flight
// (1 unless the producer is idempotent) and its records are written in the
// order they were sent. Retriable errors are retried with RetryBackoff until
// Timeout (see ProducerConfig.Idempotent and RetryBackoff for which).
//
// Partition counts are read once per topic with Client.Partitions and
// cached; a produce that fails with ErrUnknownTopic or ErrUnknownPartition
// makes the next send read them again. Topics are never created by the
// Producer: a send to a topic the Client does not know waits for its
// metadata (asking again, backing off from RetryBackoff to 1 s) up to
// Timeout, as Kafka's producer waits up to max.block.ms, or until the
// send's ctx ends; then it fails with an error matching ErrUnknownTopic
// (and ErrTimeout or ctx's error).
//
// The Producer owns a linger-timer goroutine, for each partition that has
// batches to send up to MaxInFlight sender goroutines, and while closed
// batches wait to be compressed up to GOMAXPROCS encoder goroutines; Close
// stops and waits for them.
// It is safe for concurrent use.
type Producer struct {
	c      Client
	broker BuiltProducer // c's, if it has it: batches go by the trusted path (partition_trusted.go)
	cfg    ProducerConfig
	linger time.Duration // cfg.Linger, 0 when negative: no wait

	mu       sync.Mutex
	behind   atomic.Int32 // goroutines of the Producer's own waiting for mu (lockBehind)
	topics   map[string]*topicState
	last     *topicState   // the topic of the previous send: skips the map
	free     []*pbatch     // batches to reuse
	buffered int           // estimated bytes of unacknowledged records
	lingers  []lingerEntry // batches opened, by linger deadline (all equal: FIFO)
	lingHead int           // lingers[:lingHead] are done with
	armed    bool          // the timer goroutine waits for lingers[lingHead]
	lingRuns int           // rounds of the timer goroutine (tests)
	changed  chan struct{} // closed when a batch completes, if not nil

	// holdKicks: kickLocked starts no worker (CommitTransaction sends
	// itself, sendInlineLocked).
	holdKicks bool
	// Batches waiting for an encoder (producer_encoder.go): encQ[encHead:];
	// encoders run, at most maxEncoders.
	encQ        []encodeJob
	encHead     int
	encoders    int
	maxEncoders int
	nextID      uint64
	closed      bool
	// The idempotent producer's identity: pid once pidState is pidReady.
	// pidWait is closed when a fetch under way (pidFetching) ends.
	pid      ProducerID
	pidState int8
	pidWait  chan struct{}
	fatal    error        // ErrProducerFenced: every send fails with it
	txn      *txnProducer // with a TransactionalID (producer_txn.go)
	clock    time.Time    // the anchor of nowMsLocked, with its monotonic reading
	clockNs  int64        // clock.UnixNano()
	lastMs   int64        // the timestamp of the previous record...
	lastTime time.Time    // ...as a Time: most records share their ms

	// waiters are Send's, reused. Per Producer, not per package: a channel
	// made inside a testing/synctest bubble must stay in it.
	waiters sync.Pool

	kick      chan struct{} // wakes the timer goroutine
	stop      chan struct{} // closed by Close: the timer goroutine returns
	closeDone chan struct{} // closed when Close has finished
	wg        sync.WaitGroup
}

// topicState is what the Producer knows of a topic.
type topicState struct {
	name   string
	n      int          // partitions to choose from
	parts  []*partState // every partition seen; len(parts) >= n
	stale  bool         // read the partition count again before the next send
	sticky int          // the sticky partition of nil-key records; -1: none
	rr     uint         // PartitionerRoundRobin's counter
}

// States of Producer.pid.
const (
	pidNone int8 = iota
	pidFetching
	pidReady
)

// partState is one partition's accumulator: the batch that takes records,
// the closed batches not yet completed (queued, in flight, waiting for a
// retry or for their predecessors to complete), and its senders' progress.
type partState struct {
	topic      *topicState
	tp         TopicPartition
	open       *pbatch // takes records; nil when none
	head, tail *pbatch // closed batches not completed, in send order
	closedSeq  uint64  // batches closed so far: batch.seq of the last
	doneSeq    uint64  // batches completed so far (they complete in order)
	lastSize   int     // the encoded size of the last batch closed: sizes the next one's buffer
	lastCount  int     // and its record count: sizes the next one's slots
	unresolved int     // closed batches without an outcome yet
	workers    int     // sender goroutines for this partition
	sending    int     // of which in a ProduceBatch call (or fetching an id)
	timerWait  bool    // a worker sleeps until a retry is due
	completing bool    // a worker is calling the callbacks of completed batches

	// The idempotent producer's sequences here: batches carry pid, and
	// nextSeq is the base sequence of the next batch given one. unassigned
	// batches (at the tail) have none yet. rewrite: the oldest unresolved
	// batch could not be placed; once nothing is in flight the partition
	// moves to a new epoch and its unresolved batches are renumbered from 0.
	pid        ProducerID
	pidSet     bool
	nextSeq    int32
	unassigned int
	rewrite    bool
}

// pbatch is a batch being built or sent, with the records' callbacks.
type pbatch struct {
	bd       batch.Builder
	slots    []slot
	id       uint64 // unique among the Producer's batches (recycling reuses the struct)
	seq      uint64 // position among its partition's closed batches, from 1
	created  time.Time
	deadline time.Time // created + Timeout
	bytes    int       // estimated memory, counted in Producer.buffered
	raw      []byte    // the finished batch (bd.Bytes), once finish is called
	encoding bool      // an encoder is finishing it outside mu: no sender takes it meanwhile
	seqStale bool      // setSeqLocked changed its sequence while it was encoding
	async    int       // records without a Send waiting for them
	next     *pbatch

	// given: raw went to an in-process broker, which may keep it (tail.go):
	// it is not written to again, but copied first (own). detach: bd's
	// buffer was given, so the next batch must not reuse it.
	given, detach bool
	// txn: a transactional producer's batch; finish marks it (attribute
	// bit 4) before the CRC is summed.
	txn bool

	// Idempotence: the producer id, epoch and base sequence, once seqSet.
	pid     ProducerID
	baseSeq int32
	seqSet  bool

	// Sending. A batch is resolved once it has its outcome (base, err);
	// it completes (callbacks) after every batch before it.
	attempts    int
	inAttempt   bool      // a worker is sending it
	predPending bool      // when last sent, a batch before it had no outcome
	waitPred    bool      // resend only once every batch before it has an outcome
	retryAt     time.Time // resend not before
	lastErr     error     // of the last attempt
	resolved    bool
	base        int64
	err         error
}

// finish completes the encoding of a batch that takes no more records.
func (b *pbatch) finish() {
	if b.txn {
		b.bd.SetTransactional()
	}
	b.raw = b.bd.Bytes()
}

// own makes raw the producer's to write to: a copy, if it was given.
func (b *pbatch) own() {
	if b.given {
		b.raw = bytes.Clone(b.raw)
		b.given = false
	}
}

// slot is one record of a batch: what its callback gets back.
type slot struct {
	key, value []byte
	headers    []Header
	ts         int64 // ms
	done       func(Record, error)
	w          *sendWaiter
}

// slotBytes is the bookkeeping of a record, counted against BufferBytes.
const slotBytes = 96

// lingerEntry asks the timer goroutine to look at batch id of ps at at.
type lingerEntry struct {
	ps *partState
	id uint64
	at time.Time
}

// sendWaiter is how Send waits for its record.
type sendWaiter struct {
	ch  chan struct{} // buffered: one token per completion
	rec Record
	err error
}

// NewProducer returns a Producer that sends through c. It fails with an
// error wrapping ErrInvalidConfig for a configuration that cannot work.
func NewProducer(c Client, cfg ProducerConfig) (*Producer, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: producer: nil client", ErrInvalidConfig)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	// A *Broker, or a Client that passes its capability through; not one
	// that only embeds a Broker: its ProduceBatch is what it means to be
	// called.
	broker := builtProducer(c)
	var txn *txnProducer
	if cfg.TransactionalID != "" {
		var err error
		if txn, err = newTxnProducer(c, cfg); err != nil {
			return nil, err
		}
	}
	p := &Producer{
		txn:       txn,
		c:         c,
		broker:    broker,
		cfg:       cfg,
		linger:    max(cfg.Linger, 0),
		topics:    map[string]*topicState{},
		kick:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		closeDone: make(chan struct{}),
		// As many batches compressed at once as the process has cores.
		maxEncoders: runtime.GOMAXPROCS(0),
	}
	p.anchorLocked(time.Now())
	p.waiters.New = func() any { return &sendWaiter{ch: make(chan struct{}, 1)} }
	p.wg.Add(1)
	go p.lingerLoop()
	return p, nil
}

// Send sends r and waits until it is acknowledged (as ProducerConfig.Acks
// says), then returns r with Partition, Offset and Timestamp set (a zero
// Timestamp becomes the time of the send, to the millisecond). With
// AcksNone it returns once r is queued, with Offset -1; a later failure
// goes to the Logger.
//
// Send does not wait out the Linger when it has nothing to wait for: a
// batch whose every record is a waiting Send goes as soon as no other batch
// of its partition is in flight; one with SendAsync records waits up to
// Linger for more. Then Send waits for the broker.
// Cancelling ctx ends the wait, not the send: the record may still be
// written. Errors are those of SendAsync.
func (p *Producer) Send(ctx context.Context, r Record) (Record, error) {
	if p.cfg.Acks == AcksNone {
		err := p.enqueue(ctx, &r, nil, nil)
		return r, err
	}
	w := p.waiters.Get().(*sendWaiter)
	if err := p.enqueue(ctx, &r, nil, w); err != nil {
		p.waiters.Put(w)
		return r, err
	}
	select {
	case <-w.ch:
		out, err := w.rec, w.err
		w.rec, w.err = Record{}, nil
		p.waiters.Put(w)
		return out, err
	case <-ctx.Done():
		// The sender still holds w: leave it to the garbage collector.
		return r, p.sendCtxErr(ctx, &r)
	}
}

// sendCtxErr is the error of a Send whose ctx ended before its record was
// acknowledged: ctx's error and, if its partition's batches are being
// retried, the last error they met, so that the error says why (both
// match with errors.Is).
func (p *Producer) sendCtxErr(ctx context.Context, r *Record) error {
	cerr := ctx.Err()
	p.mu.Lock()
	var last error
	if t := p.topics[r.Topic]; t != nil && r.Partition >= 0 && r.Partition < len(t.parts) {
		for b := t.parts[r.Partition].head; b != nil; b = b.next {
			if !b.resolved && b.lastErr != nil {
				last = b.lastErr
			}
		}
	}
	p.mu.Unlock()
	if last == nil {
		return cerr
	}
	return fmt.Errorf("%w: record to %s-%d not acknowledged; last error: %w", cerr, r.Topic, r.Partition, last)
}

// SendAsync sends r and calls done(r, err) once r is acknowledged or has
// failed, with Partition, Offset and Timestamp set as Send returns them
// (Offset -1 on failure and with AcksNone). Key, Value and Headers are
// copied into the batch before SendAsync returns; the Record given to done
// holds the caller's slices.
//
// done is called exactly once per record: for the records of one partition
// in offset order, on a goroutine of the Producer, so it must be quick and
// must not call Flush or Close. A record refused before it is queued
// (ErrClosed, ErrUnknownTopic, ErrUnknownPartition, a record larger than
// BufferBytes, no room in the buffer within Timeout) gets its done call
// before SendAsync returns, on the caller's goroutine. A nil done is
// allowed: fire and forget, errors go to the Logger.
//
// SendAsync blocks while the producer's buffer is full (BufferBytes), or
// while the Client does not know the record's topic, up to Timeout. Records of one partition sent by one goroutine are written in
// the order of the calls.
func (p *Producer) SendAsync(r Record, done func(Record, error)) {
	if err := p.enqueue(context.Background(), &r, done, nil); err != nil && done != nil {
		done(r, err)
	}
}

// Flush sends every batch now, without waiting for Linger, and waits until
// every record sent before the call has been acknowledged or has failed.
// It returns ctx's error if ctx ends first, and ErrClosed after Close; the
// records' own errors go to their Send or done.
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errProducerClosed
	}
	return p.waitLocked(ctx, p.sendAllLocked())
}

// Close flushes (sends every batch and waits for every record sent so far),
// stops the Producer's goroutines and waits for them. Sends after Close fail
// with ErrClosed. Close is idempotent; it returns nil.
func (p *Producer) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.closeDone
		return nil
	}
	p.closed = true
	targets := p.closeAllLocked()
	p.notifyLocked() // senders blocked on a full buffer: they see closed
	p.waitLocked(context.Background(), targets)
	p.mu.Unlock()
	close(p.stop)
	p.wg.Wait()
	close(p.closeDone)
	return nil
}

// lockBehind takes mu for a goroutine of the Producer's own (a sender, an
// encoder, the timer), ahead of the callers of Send and SendAsync. A caller
// sending in a loop holds mu most of the time and takes it again within
// nanoseconds of releasing it; the goroutine its Unlock wakes is queued on
// the caller's own P (runnext) and runs only once the caller blocks or is
// preempted, up to 10 ms later, or when sync.Mutex turns to starvation
// mode after 1 ms: meanwhile its partition's next batch waits, and its
// records' memory stays in the buffer. So a caller that finds one of them
// waiting yields first (enqueue), and the waiter, next on that P, runs.
func (p *Producer) lockBehind() {
	p.behind.Add(1)
	p.mu.Lock()
	p.behind.Add(-1)
}
