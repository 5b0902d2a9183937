package log

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/tp"
)

// Errors of the Consumer. Test for them with errors.Is.
var (
	// ErrNoGroup is returned by Commit of a consumer without a Group: there
	// is no group to hold its offsets.
	ErrNoGroup = errors.New("log: consumer has no group: nothing to commit to")
	// ErrNotAssigned is returned by Seek of a partition that is not in the
	// consumer's assignment.
	ErrNotAssigned = errors.New("log: partition not assigned to this consumer")
)

// errConsumerClosed is the error of a Poll, Commit or Seek after Close.
var errConsumerClosed = fmt.Errorf("log: consumer: %w", ErrClosed)

// errSkipped marks, within a fetch, a partition whose read failed
// transiently.
var errSkipped = errors.New("log: consumer: partition skipped")

// errRejoin is the cause with which the heartbeat ends a parked fetch: the
// group is rebalancing and Poll must rejoin.
var errRejoin = errors.New("log: consumer: rejoin the group")

// OffsetReset says where a consumer starts reading a partition that has no
// committed offset, or whose position fell out of the log.
type OffsetReset int

const (
	// ResetEarliest starts at the log start offset: everything still kept.
	// It is the zero value, so a consumer misses nothing by default; note
	// that Kafka's default (auto.offset.reset) is latest.
	ResetEarliest OffsetReset = iota
	// ResetLatest starts at the end: only records appended from then on.
	ResetLatest
)

func (r OffsetReset) String() string {
	switch r {
	case ResetEarliest:
		return "earliest"
	case ResetLatest:
		return "latest"
	}
	return fmt.Sprintf("OffsetReset(%d)", int(r))
}

// ConsumerConfig configures a Consumer. The zero value of every field but
// Topics means Kafka's default.
type ConsumerConfig struct {
	// Group is the consumer group; "" → no group: the consumer reads every
	// partition of its topics and cannot commit.
	Group string
	// Topics are the topics to read; at least one, each existing.
	Topics []string
	// Reset says where to start a partition without a committed offset
	// (ResetEarliest, the zero value, or ResetLatest), and where to go when
	// a position falls out of the log (retention deleted it, say).
	Reset OffsetReset
	// MinBytes is how many bytes a Poll waits for (fetch.min.bytes); 0 → 1.
	MinBytes int
	// MaxWait is how long a Poll waits for MinBytes (fetch.max.wait.ms);
	// 0 → 500 ms. Then it returns what there is, possibly nothing.
	MaxWait time.Duration
	// MaxBytes bounds the bytes of one Poll (fetch.max.bytes); 0 → 50 MiB.
	// A record batch larger than that still comes, alone.
	MaxBytes int
	// PartitionMaxBytes bounds the bytes of one partition in one Poll
	// (max.partition.fetch.bytes); 0 → 1 MiB.
	PartitionMaxBytes int
	// Isolation says which records Poll returns (isolation.level):
	// ReadUncommitted, the zero value and Kafka's default, every record
	// below the high watermark; ReadCommitted, only those of committed
	// transactions (and of no transaction), below the last stable offset,
	// where ResetLatest then starts too. Transaction markers are never
	// records.
	Isolation IsolationLevel
	// SessionTimeout: a member whose heartbeats stop for that long is
	// removed from its group (session.timeout.ms); 0 → 45 s. The broker
	// bounds it (by default to [6 s, 30 min]).
	SessionTimeout time.Duration
	// RebalanceTimeout is how long a rebalance waits for this member to
	// rejoin, and the longest time between two Polls before the consumer
	// leaves its group so that its partitions move to a live member
	// (max.poll.interval.ms); 0 → 5 min.
	RebalanceTimeout time.Duration
	// HeartbeatInterval is how often the consumer tells its group it is
	// alive (heartbeat.interval.ms); 0 → 3 s. It must be shorter than
	// SessionTimeout.
	HeartbeatInterval time.Duration
	// ClientID prefixes the member id the group gives the consumer; may be
	// "".
	ClientID string
	// Protocol is the group protocol (group.protocol):
	// GroupProtocolClassic, the zero value, or GroupProtocolConsumer
	// (KIP-848), for which the Client must be a ConsumerGroupClient.
	// SessionTimeout is then the group's (the coordinator's setting).
	Protocol GroupProtocol
	// Logger receives a line when a position is reset, when the consumer
	// leaves its group for not polling, and when a heartbeat fails;
	// nil → discard.
	Logger *slog.Logger
}

// Kafka's consumer defaults.
const (
	defaultConsumerMaxWait    = 500 * time.Millisecond
	defaultConsumerMaxBytes   = 50 << 20
	defaultPartitionMaxBytes  = 1 << 20
	defaultHeartbeatInterval  = 3 * time.Second
	defaultConsumerMinBytes   = 1
	consumerJoinRetries       = 3
	consumerHeaderArenaMinCap = 64
)

func (c ConsumerConfig) withDefaults() ConsumerConfig {
	c.Topics = slices.Compact(slices.Sorted(slices.Values(c.Topics))) // a copy: never the caller's slice
	if c.MinBytes == 0 {
		c.MinBytes = defaultConsumerMinBytes
	}
	if c.MaxWait == 0 {
		c.MaxWait = defaultConsumerMaxWait
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = defaultConsumerMaxBytes
	}
	if c.PartitionMaxBytes == 0 {
		c.PartitionMaxBytes = defaultPartitionMaxBytes
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = group.DefaultSessionTimeout
	}
	if c.RebalanceTimeout == 0 {
		c.RebalanceTimeout = group.DefaultRebalanceTimeout
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = defaultHeartbeatInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c ConsumerConfig) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: consumer: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case len(c.Topics) == 0:
		return bad("no topics")
	case c.Topics[0] == "":
		return bad("empty topic name")
	case len(c.Group) > group.MaxNameLen:
		return bad("group id of %d bytes, at most %d", len(c.Group), group.MaxNameLen)
	case c.Protocol != GroupProtocolClassic && c.Protocol != GroupProtocolConsumer:
		return bad("unknown group protocol %d", int(c.Protocol))
	case c.Reset != ResetEarliest && c.Reset != ResetLatest:
		return bad("unknown reset %d", int(c.Reset))
	case c.Isolation != ReadUncommitted && c.Isolation != ReadCommitted:
		return bad("unknown isolation level %d", int(c.Isolation))
	case c.MinBytes < 0 || c.MaxBytes < 0 || c.PartitionMaxBytes < 0:
		return bad("negative byte count (MinBytes %d, MaxBytes %d, PartitionMaxBytes %d)", c.MinBytes, c.MaxBytes, c.PartitionMaxBytes)
	case c.MaxWait < 0 || c.SessionTimeout < 0 || c.RebalanceTimeout < 0 || c.HeartbeatInterval < 0:
		return bad("negative duration")
	case c.HeartbeatInterval >= c.SessionTimeout:
		return bad("heartbeat interval %v must be shorter than the session timeout %v", c.HeartbeatInterval, c.SessionTimeout)
	}
	return nil
}

// A Consumer reads records from the partitions of its topics: all of them
// without a Group, or the share a consumer group assigns it.
//
// In a group the protocol is Kafka's classic, eager one, with the range
// assignment its leader member computes, unless Protocol chooses the
// consumer protocol (KIP-848): then the coordinator assigns, a heartbeat
// brings a new assignment, the next Poll gives up the partitions it no
// longer has and starts the new ones, and the members not asked to give
// anything up read on through a rebalance. The consumer joins in its
// first Poll; a goroutine of its own heartbeats every HeartbeatInterval. When the group
// rebalances (a member joins or leaves, or one's session times out), the
// heartbeat ends a parked Poll and Poll rejoins before it fetches again.
// After every join the positions of the assigned partitions start from the
// group's committed offsets (else from Reset): records polled but not
// committed before a rebalance are delivered again, to their partition's
// new owner — delivery is at least once. Commit after processing each Poll
// to keep the repeats few.
//
// Poll, Commit, Seek and Assignment may be called from several goroutines,
// but Polls run one at a time; Close may be called from any goroutine and
// ends a parked Poll.
//
// Lock order: pollMu, then mu. No lock is held across a call to the Client
// except that Poll holds pollMu.
type Consumer struct {
	client Client
	cfg    ConsumerConfig
	logger *slog.Logger

	pollMu sync.Mutex // held by Poll; Close takes it to wait for a Poll to end
	// Owned by Poll (pollMu): the fetch request, its partitions, and per
	// partition its bytes (and the tail's batches they are, if they are a
	// tail's), where its records end in the result and its next position.
	fetchReq   []FetchPartition
	fetchParts []*partitionPosition
	fetchRaw   [][]byte
	fetchTail  [][]tailBatch
	fetchEnds  []int
	fetchNexts []int64
	fetchAbort abortFilter // ReadCommitted: skips aborted transactions

	mu         sync.Mutex
	closed     bool
	parts      []*partitionPosition // the assignment, sorted
	byTP       map[TopicPartition]*partitionPosition
	epoch      uint64 // bumped when parts is replaced
	next       int    // the index in parts of the partition fetched first by the next Poll
	cancelPoll context.CancelCauseFunc
	fetching   bool // the running Poll is fetching (not joining)
	polling    bool
	lastPoll   time.Time // when the last Poll ended
	// Group membership (Group != ""): memberID is "" when not a member.
	memberID   string
	generation int32
	joining    bool
	rejoin     bool // the group rebalances (or dropped us): the next Poll joins
	// The consumer protocol (GroupProtocolConsumer): the client, and the
	// assignment the coordinator gave last, which Poll applies (version
	// bumped at each).
	groupClient ConsumerGroupClient
	target      []TopicPartition
	targetVer   uint64
	failing     error // the last fetch failed transiently, with this error (noteFetch)

	stop     chan struct{} // closed by Close: the heartbeat goroutine returns
	hbCtx    context.Context
	hbCancel context.CancelFunc
	wg       sync.WaitGroup
}

// partitionPosition is where the consumer reads an assigned partition.
type partitionPosition struct {
	tp        TopicPartition
	pos       int64 // the offset of the next record Poll returns
	committed int64 // what the group holds for it; -1: nothing
}

// NewConsumer returns a consumer of cfg.Topics, which must exist
// (ErrUnknownTopic). Without a Group it reads every partition, from Reset,
// resolved now: with ResetLatest, records appended after NewConsumer returns
// are read. With a Group it starts its heartbeat goroutine now (Close stops
// it) and joins the group in its first Poll.
func NewConsumer(c Client, cfg ConsumerConfig) (*Consumer, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	// NewConsumer takes no context (DESIGN.md): its metadata calls are bounded
	// by the Client (a kafka.Dial client gives up after its retry limit).
	ctx := context.Background()
	counts := make([]int, len(cfg.Topics))
	for i, t := range cfg.Topics {
		n, err := c.Partitions(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("log: consumer: topic %q: %w", t, err)
		}
		counts[i] = n
	}
	cons := &Consumer{
		client:   c,
		cfg:      cfg,
		logger:   cfg.Logger,
		byTP:     map[TopicPartition]*partitionPosition{},
		lastPoll: time.Now(),
	}
	if cfg.Group == "" {
		var tps []TopicPartition
		for i, t := range cfg.Topics {
			for p := range counts[i] {
				tps = append(tps, TopicPartition{Topic: t, Partition: p})
			}
		}
		parts, err := cons.positions(ctx, tps, nil)
		if err != nil {
			return nil, err
		}
		cons.assign(parts)
		return cons, nil
	}
	if cfg.Protocol == GroupProtocolConsumer {
		gc, ok := c.(ConsumerGroupClient)
		if !ok {
			return nil, fmt.Errorf("%w: consumer: the client (%T) does not speak the consumer group protocol", ErrInvalidConfig, c)
		}
		cons.groupClient = gc
	}
	cons.rejoin = true
	cons.stop = make(chan struct{})
	cons.hbCtx, cons.hbCancel = context.WithCancel(context.Background())
	cons.wg.Add(1)
	go cons.heartbeats()
	return cons, nil
}

// positions returns the positions of tps: the committed offset if any, else
// where Reset says.
func (c *Consumer) positions(ctx context.Context, tps []TopicPartition, committed map[TopicPartition]int64) ([]*partitionPosition, error) {
	parts := make([]*partitionPosition, len(tps))
	for i, tp := range tps {
		p := &partitionPosition{tp: tp, committed: -1}
		if off, ok := committed[tp]; ok {
			p.pos, p.committed = off, off
		} else {
			var err error
			if p.pos, err = c.resetOffset(ctx, tp); err != nil {
				return nil, err
			}
		}
		parts[i] = p
	}
	return parts, nil
}

// assign makes parts the assignment. mu is held, or c is not shared yet.
func (c *Consumer) assign(parts []*partitionPosition) {
	slices.SortFunc(parts, func(a, b *partitionPosition) int { return tp.Compare(a.tp, b.tp) })
	c.parts = parts
	c.byTP = make(map[TopicPartition]*partitionPosition, len(parts))
	for _, p := range parts {
		c.byTP[p.tp] = p
	}
	c.epoch++
	c.next = 0
}

// Poll returns the next records of the assigned partitions: up to MaxBytes
// in all and PartitionMaxBytes per partition, whole record batches, each
// record with its Topic and Partition set, in offset order per partition.
// Which partition is read first rotates from Poll to Poll, so a busy one
// cannot starve the others. With fewer than MinBytes available Poll waits:
// an append to an assigned partition ends the wait at once; otherwise it
// returns what there is (maybe nothing) after MaxWait. Cancelling ctx ends
// it with ctx.Err(). Keys, values and header values are the consumer's to
// keep but not to write to: read from the end of a partition that a
// Producer of the same process writes, they are the bytes of its latest
// batches, which other readers share.
//
// The positions advance past the records returned. A position that fell out
// of the log is moved per Reset. In a group, Poll first joins (or rejoins)
// when needed, which waits for the rebalance to complete: that wait is
// bounded by ctx and the group's rebalance timeout, not by MaxWait. A
// rebalance that begins while Poll waits for records ends the wait, and
// Poll rejoins and goes on waiting until MaxWait. A partition whose leader
// moved or died, or whose broker cannot be reached (ErrNotLeader,
// ErrUnreachable, a refused or reset connection), gives no records and
// keeps its position: Poll reads it again, backing off from 100 ms to 1 s,
// until MaxWait, and then returns what the others gave, maybe nothing (the
// Logger gets a warning when reads start failing, and a line when they
// recover). A Poll whose ctx ends meanwhile returns an error matching both
// ctx's error and the last such cause. Any other error (a corrupt batch, a
// deleted topic) is returned with no records, and no position moves. After
// Close, Poll returns ErrClosed.
func (c *Consumer) Poll(ctx context.Context) ([]Record, error) {
	if ctx.Err() != nil {
		return nil, retryCtxErr(ctx, c.softErr())
	}
	c.pollMu.Lock()
	defer c.pollMu.Unlock()
	deadline := time.Now().Add(c.cfg.MaxWait)
	defer c.pollEnded()
	last := c.softErr() // the last transient error of a fetch: retried
	backoff := consumerRetryBackoff
	for {
		pctx, cancel := context.WithCancelCause(ctx)
		join, err := c.pollPhase(cancel)
		if err != nil {
			cancel(nil)
			return nil, err
		}
		var recs []Record
		var soft error
		retry := false
		if join && c.groupClient != nil {
			err = c.join848(pctx)
		} else if join {
			err = c.join(pctx)
		} else {
			recs, soft, err = c.fetch(pctx, time.Until(deadline))
			if soft != nil && (last == nil || !ctxCaused(soft)) {
				last = soft
			}
			if left := time.Until(deadline); err == nil && soft != nil && len(recs) == 0 && left > 0 {
				// Every partition read failed for now (a leader moved
				// or died): back off and read again within MaxWait.
				err = idle(pctx, min(backoff, left))
				backoff = min(2*backoff, maxRetryBackoff)
				retry = true
			}
		}
		c.mu.Lock()
		c.cancelPoll, c.fetching, c.joining = nil, false, false
		c.mu.Unlock()
		cause := context.Cause(pctx)
		cancel(nil)
		switch {
		case err == nil && (join || retry):
			continue // joined: now fetch; or backed off: fetch again
		case err == nil:
			return recs, nil
		case ctx.Err() != nil:
			if last == nil && errors.Is(err, ctx.Err()) {
				return nil, err // the Client's, which may say why
			}
			return nil, retryCtxErr(ctx, last)
		case errors.Is(cause, ErrClosed):
			return nil, errConsumerClosed
		case errors.Is(cause, errRejoin):
			continue
		}
		return nil, err
	}
}

// pollPhase starts a phase of Poll: a join if one is needed, else a fetch.
// cancel ends the phase early (Close, or a rebalance while fetching).
func (c *Consumer) pollPhase(cancel context.CancelCauseFunc) (join bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false, errConsumerClosed
	}
	c.polling, c.cancelPoll = true, cancel
	join = c.cfg.Group != "" && c.rejoin
	c.joining, c.fetching = join, !join
	return join, nil
}

func (c *Consumer) pollEnded() {
	c.mu.Lock()
	c.polling, c.lastPoll = false, time.Now()
	c.mu.Unlock()
}

// consumerRetryBackoff is the first wait before a Poll reads again
// partitions whose reads all failed transiently (Kafka's retry.backoff.ms).
const consumerRetryBackoff = 100 * time.Millisecond

// retryCtxErr is the error of a call whose ctx ended while it retried:
// ctx's error and, if there was one, the last transient error it met (both
// match with errors.Is).
func retryCtxErr(ctx context.Context, last error) error {
	cerr := ctx.Err()
	if last == nil || last == cerr {
		return cerr
	}
	return fmt.Errorf("%w while retrying; last error: %w", cerr, last)
}

// ctxCaused reports whether err may be a deadline's or a cancellation's
// doing rather than the cluster's: as a cause it yields to an earlier one.
func ctxCaused(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// softErr returns the transient error of the last fetch, nil if it
// succeeded.
func (c *Consumer) softErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failing
}

// fetch reads the assigned partitions once, waiting up to wait for
// MinBytes, and advances the positions past the records it returns. A
// partition whose read failed transiently (transient: its leader moved or
// died, its broker could not be reached) gives no records and keeps its
// position; soft is the last such error, for Poll to retry.
func (c *Consumer) fetch(ctx context.Context, wait time.Duration) (recs []Record, soft error, err error) {
	recs, soft, err = c.fetchOnce(ctx, wait)
	c.noteFetch(soft, err)
	return recs, soft, err
}

// noteFetch logs when the consumer's reads start failing transiently, and
// when they recover: once each, not once a Poll.
func (c *Consumer) noteFetch(soft, err error) {
	c.mu.Lock()
	was := c.failing != nil
	if soft != nil && (c.failing == nil || !ctxCaused(soft)) || soft == nil && err == nil {
		c.failing = soft
	}
	c.mu.Unlock()
	switch {
	case soft != nil && !was:
		c.logger.Warn("log: consumer: reading a partition failed, retrying", "err", soft)
	case soft == nil && err == nil && was:
		c.logger.Info("log: consumer: reading every partition again")
	}
}

func (c *Consumer) fetchOnce(ctx context.Context, wait time.Duration) ([]Record, error, error) {
	c.mu.Lock()
	epoch, n := c.epoch, len(c.parts)
	c.fetchReq, c.fetchParts = c.fetchReq[:0], c.fetchParts[:0]
	for i := range n {
		p := c.parts[(c.next+i)%n]
		c.fetchReq = append(c.fetchReq, FetchPartition{TopicPartition: p.tp, Offset: p.pos})
		c.fetchParts = append(c.fetchParts, p)
	}
	if n > 0 {
		c.next = (c.next + 1) % n
	}
	c.mu.Unlock()
	wait = max(wait, time.Nanosecond) // 0 would mean the default
	if n == 0 {
		return nil, nil, idle(ctx, wait) // nothing assigned: wait for a rebalance
	}
	resp, err := c.client.Fetch(ctx, FetchRequest{
		Partitions:        c.fetchReq,
		MinBytes:          c.cfg.MinBytes,
		MaxBytes:          c.cfg.MaxBytes,
		PartitionMaxBytes: c.cfg.PartitionMaxBytes,
		MaxWait:           wait,
		Isolation:         c.cfg.Isolation.fetchIsolation(),
	})
	if err != nil {
		if transient(err) && !ctxCaused(err) && ctx.Err() == nil {
			return nil, err, nil
		}
		return nil, nil, fmt.Errorf("log: consumer: fetch: %w", err)
	}
	defer resp.Release()
	if len(resp.Partitions) != n {
		return nil, nil, fmt.Errorf("log: consumer: fetch of %d partitions answered %d", n, len(resp.Partitions))
	}

	// Read the batches (one copy, out of the segment files) and decode
	// them straight into one slice sized for every record fetched.
	var soft error
	total, raws, tails := 0, c.fetchRaw[:0], c.fetchTail[:0]
	defer func() { clear(raws); clear(tails); c.fetchRaw, c.fetchTail = raws[:0], tails[:0] }()
	for i := range resp.Partitions {
		fp := &resp.Partitions[i]
		var raw []byte
		var mine []tailBatch // the tail's: built by a Producer of this process
		if transient(fp.Err) {
			soft = fmt.Errorf("log: consumer: fetch %s-%d at %d: %w", fp.Topic, fp.Partition, c.fetchReq[i].Offset, fp.Err)
			fp.Records.Release()
			fp.Err = errSkipped
		}
		if fp.Err == nil {
			if raw, mine, err = fp.Records.bytes(); err != nil {
				return nil, nil, fmt.Errorf("log: consumer: fetch %s-%d at %d: %w", fp.Topic, fp.Partition, c.fetchReq[i].Offset, err)
			}
			fp.Records.Release()
		}
		raws, tails = append(raws, raw), append(tails, mine)
		total += countRecords(raw)
	}
	recs := make([]Record, 0, total)
	var (
		ends   = c.fetchEnds[:0]
		nexts  = slices.Grow(c.fetchNexts[:0], n)[:n]
		resets []int    // partitions whose position fell out of the log
		hdrs   []Header // the headers of every record
	)
	for i := range resp.Partitions {
		fp := &resp.Partitions[i]
		from := c.fetchReq[i].Offset
		nexts[i] = from
		switch {
		case errors.Is(fp.Err, ErrOffsetOutOfRange):
			resets = append(resets, i)
		case fp.Err == errSkipped:
			// No records this time; its position stays.
		case fp.Err != nil:
			return nil, nil, fmt.Errorf("log: consumer: fetch %s-%d at %d: %w", fp.Topic, fp.Partition, from, fp.Err)
		default:
			var ab *abortFilter
			if c.cfg.Isolation == ReadCommitted {
				ab = &c.fetchAbort
				ab.reset(fp.AbortedTransactions)
			}
			recs, nexts[i], err = decodeBuiltFrom(recs, &hdrs, raws[i], tails[i], ab, fp.TopicPartition, from)
			if err != nil {
				return nil, nil, fmt.Errorf("log: consumer: %s-%d at %d: %w", fp.Topic, fp.Partition, from, err)
			}
		}
		ends = append(ends, len(recs))
	}
	c.fetchEnds, c.fetchNexts = ends, nexts // kept for the next Poll
	resetTo := make([]int64, len(resets))
	for j, i := range resets {
		if resetTo[j], err = c.resetOffset(ctx, c.fetchReq[i].TopicPartition); err != nil {
			return nil, nil, err
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch != epoch {
		return nil, soft, nil // the assignment changed under the fetch: its records are not ours
	}
	for j, i := range resets {
		if p := c.fetchParts[i]; p.pos == c.fetchReq[i].Offset {
			c.logger.Info("log: consumer: position out of range, reset", "topic", p.tp.Topic, "partition", p.tp.Partition,
				"position", p.pos, "reset", c.cfg.Reset.String(), "to", resetTo[j])
			p.pos = resetTo[j]
		}
	}
	out, start := recs[:0], 0
	for i, end := range ends {
		p := c.fetchParts[i]
		if p.pos != c.fetchReq[i].Offset { // moved by Seek or a reset meanwhile: drop
			start = end
			continue
		}
		p.pos = max(p.pos, nexts[i])
		if len(out) != start {
			out = append(out, recs[start:end]...)
		} else {
			out = recs[:end]
		}
		start = end
	}
	clear(recs[len(out):]) // drop the references of records not returned
	return out, soft, nil
}

// idle waits for d or for ctx.
func idle(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// resetOffset is where Reset moves a partition.
func (c *Consumer) resetOffset(ctx context.Context, tp TopicPartition) (int64, error) {
	at := EarliestOffset
	switch {
	case c.cfg.Reset == ResetLatest && c.cfg.Isolation == ReadCommitted:
		at = LatestStableOffset
	case c.cfg.Reset == ResetLatest:
		at = LatestOffset
	}
	off, err := c.client.ListOffset(ctx, tp, at)
	if err != nil {
		return 0, fmt.Errorf("log: consumer: reset %s-%d to %s: %w", tp.Topic, tp.Partition, c.cfg.Reset, err)
	}
	return off, nil
}

// Seek moves the position of an assigned partition (ErrNotAssigned
// otherwise): the next Poll reads it from offset, which must be within the
// log, [start offset, end offset] (an *OffsetOutOfRangeError matching
// ErrOffsetOutOfRange otherwise). A Poll in progress drops what it read of
// that partition. The position holds until the next rebalance; Commit
// commits it.
func (c *Consumer) Seek(topic string, partition int, offset int64) error {
	tp := TopicPartition{Topic: topic, Partition: partition}
	c.mu.Lock()
	p, closed := c.byTP[tp], c.closed
	c.mu.Unlock()
	switch {
	case closed:
		return fmt.Errorf("log: seek: %w", errConsumerClosed)
	case p == nil:
		return fmt.Errorf("%w: %s-%d", ErrNotAssigned, topic, partition)
	}
	ctx := context.Background() // Seek takes none (DESIGN.md); the Client bounds its calls
	start, err := c.client.ListOffset(ctx, tp, EarliestOffset)
	if err != nil {
		return fmt.Errorf("log: seek %s-%d: %w", topic, partition, err)
	}
	end, err := c.client.ListOffset(ctx, tp, LatestOffset)
	if err != nil {
		return fmt.Errorf("log: seek %s-%d: %w", topic, partition, err)
	}
	if offset < start || offset > end {
		return &OffsetOutOfRangeError{Topic: topic, Partition: partition, Requested: offset, Start: start, End: end}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byTP[tp] != p {
		return fmt.Errorf("%w: %s-%d (a rebalance took it)", ErrNotAssigned, topic, partition)
	}
	p.pos = offset
	return nil
}

// Position returns the position of an assigned partition: the offset of
// the next record Poll returns from it.
func (c *Consumer) Position(topic string, partition int) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.byTP[TopicPartition{Topic: topic, Partition: partition}]
	if p == nil {
		return 0, fmt.Errorf("%w: %s-%d", ErrNotAssigned, topic, partition)
	}
	return p.pos, nil
}

// Assignment returns the partitions the consumer reads, sorted: every
// partition of its topics without a group; in a group, those of its current
// generation (none before its first Poll).
func (c *Consumer) Assignment() []TopicPartition {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]TopicPartition, len(c.parts))
	for i, p := range c.parts {
		out[i] = p.tp
	}
	return out
}

// Close ends a parked Poll, stops the heartbeat goroutine and waits for it,
// and leaves the group, so that the others rebalance at once rather than
// after the session timeout. It commits nothing: Commit first to keep the
// positions. Later Polls, Commits and Seeks return ErrClosed; Close is
// idempotent.
func (c *Consumer) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	if c.cancelPoll != nil {
		c.cancelPoll(errConsumerClosed)
	}
	c.mu.Unlock()
	c.pollMu.Lock()
	//lint:ignore SA2001 taking the lock was the point: it waits for the Poll in progress to end
	c.pollMu.Unlock()
	if c.cfg.Group == "" {
		return nil
	}
	close(c.stop)
	c.hbCancel()
	c.wg.Wait()
	c.mu.Lock()
	member := c.memberID
	c.memberID = ""
	c.mu.Unlock()
	if member == "" {
		return nil
	}
	// After a session timeout the group drops the member anyway: wait no
	// longer than that.
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.SessionTimeout)
	defer cancel()
	if err := c.leave(ctx, member); err != nil && !errors.Is(err, ErrUnknownMember) {
		return fmt.Errorf("log: consumer: leave group %q: %w", c.cfg.Group, err)
	}
	return nil
}

// leave leaves the group in the consumer's protocol.
func (c *Consumer) leave(ctx context.Context, member string) error {
	if c.groupClient != nil {
		return c.leave848(ctx, member)
	}
	return c.client.LeaveGroup(ctx, c.cfg.Group, member)
}
