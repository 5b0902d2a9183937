package log

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/strata-log/strata/share"
	"github.com/strata-log/strata/tp"
)

// ShareClient is what a ShareConsumer needs from a broker: a share group's
// membership, acquisitions and acknowledgements (KIP-932). *Broker
// implements it in the process.
type ShareClient interface {
	// ShareHeartbeat is Kafka's ShareGroupHeartbeat.
	ShareHeartbeat(ctx context.Context, req share.HeartbeatRequest) (share.HeartbeatResponse, error)
	// ShareFetch first applies req.Acks, then acquires records for a
	// member and returns them with their delivery counts (Kafka's
	// ShareFetch, acknowledgements piggy-backed), waiting up to MaxWait
	// when none could be acquired. Acquired offsets with no record are
	// acknowledged as gaps by the client. Acknowledgements that fail are
	// answered as a *ShareAckError with the records fetched all the same.
	ShareFetch(ctx context.Context, req ShareFetchRequest) ([]ShareRecord, error)
	// ShareAcknowledge applies a member's acknowledgements, each
	// partition's all or none (Kafka's ShareAcknowledge).
	ShareAcknowledge(ctx context.Context, group, member string, acks map[TopicPartition][]share.AckBatch) error
}

// ShareFetchRequest asks a ShareClient for records of a share group.
type ShareFetchRequest struct {
	Group, Member string
	Partitions    []TopicPartition
	MaxRecords    int           // 0 → 500
	MaxWait       time.Duration // how long to wait when none can be acquired
	// Acks are the member's acknowledgements to apply before acquiring,
	// each partition's all or none; nil: none.
	Acks map[TopicPartition][]share.AckBatch
}

// ShareAckError is the error of a ShareFetch whose acknowledgements failed
// (in part): each failed partition's error. It matches each of them with
// errors.Is (share.ErrInvalidRecordState when locks expired: the records
// are delivered again).
type ShareAckError struct {
	Partitions map[TopicPartition]error
}

func (e *ShareAckError) Error() string {
	parts := slices.SortedFunc(maps.Keys(e.Partitions), tp.Compare)
	msg := "log: share acknowledgement failed:"
	for i, t := range parts {
		if i == 3 {
			return fmt.Sprintf("%s and %d more", msg, len(parts)-i)
		}
		msg += fmt.Sprintf(" %s: %v;", t, e.Partitions[t])
	}
	return strings.TrimSuffix(msg, ";")
}

// Unwrap returns the partitions' errors.
func (e *ShareAckError) Unwrap() []error {
	out := make([]error, 0, len(e.Partitions))
	for _, t := range slices.SortedFunc(maps.Keys(e.Partitions), tp.Compare) {
		out = append(out, e.Partitions[t])
	}
	return out
}

// defaultShareMaxRecords is Kafka's max.poll.records.
const defaultShareMaxRecords = 500

// DefaultShareMaxPollInterval is Kafka's max.poll.interval.ms, a
// ShareConsumer's MaxPollInterval by default.
const DefaultShareMaxPollInterval = 5 * time.Minute

// ShareConsumerConfig configures a ShareConsumer. The zero value of each
// field but Group and Topics means Kafka's default.
type ShareConsumerConfig struct {
	// Group is the share group's id. Required.
	Group string
	// Topics are the topics the member subscribes to. Required.
	Topics []string
	// MaxRecords is the most records one Poll returns (max.poll.records,
	// 500).
	MaxRecords int
	// MaxWait is how long a Poll waits for records when none is there
	// (fetch.max.wait.ms, 500 ms).
	MaxWait time.Duration
	// ExplicitAck makes every record of a Poll need its Accept, Release
	// or Reject before the next Poll (share.acknowledgement.mode=explicit);
	// by default (implicit) the next Poll accepts those left
	// unacknowledged.
	ExplicitAck bool
	// MaxPollInterval is the longest a member may go without a Poll
	// (max.poll.interval.ms, 5 min): past it the member leaves the group,
	// as Kafka's share consumer does, so that a worker stuck in a job or
	// gone without Close hands its partitions to the others (which the
	// group's assignor may have given to it alone) and releases the
	// records it holds; its next Poll joins again.
	MaxPollInterval time.Duration
	// ClientID names the member in descriptions of the group.
	ClientID string
	// Logger receives a line when a heartbeat fails; nil discards.
	Logger *slog.Logger
}

func (c ShareConsumerConfig) withDefaults() ShareConsumerConfig {
	if c.MaxRecords == 0 {
		c.MaxRecords = defaultShareMaxRecords
	}
	if c.MaxWait == 0 {
		c.MaxWait = 500 * time.Millisecond
	}
	if c.MaxPollInterval == 0 {
		c.MaxPollInterval = DefaultShareMaxPollInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Topics = slices.Clone(c.Topics)
	return c
}

func (c ShareConsumerConfig) validate() error {
	switch {
	case c.Group == "":
		return fmt.Errorf("%w: share consumer: empty Group", ErrInvalidConfig)
	case len(c.Topics) == 0:
		return fmt.Errorf("%w: share consumer: no Topics", ErrInvalidConfig)
	case c.MaxRecords < 0:
		return fmt.Errorf("%w: share consumer: MaxRecords %d", ErrInvalidConfig, c.MaxRecords)
	case c.MaxWait < 0:
		return fmt.Errorf("%w: share consumer: MaxWait %v", ErrInvalidConfig, c.MaxWait)
	case c.MaxPollInterval < 0:
		return fmt.Errorf("%w: share consumer: MaxPollInterval %v", ErrInvalidConfig, c.MaxPollInterval)
	}
	for _, t := range c.Topics {
		if t == "" {
			return fmt.Errorf("%w: share consumer: empty topic", ErrInvalidConfig)
		}
	}
	return nil
}

// ErrUnacknowledged: a Poll of a ShareConsumer with ExplicitAck while
// records of the last Poll are not acknowledged, or an acknowledgement of
// a record the consumer does not hold (acknowledged already, or of an
// earlier Poll).
var ErrUnacknowledged = errors.New("log: share consumer: record not acknowledged as required")

// ShareRecord is a record delivered to a member of a share group, which
// acknowledges it with Accept, Release or Reject.
type ShareRecord struct {
	Record
	// DeliveryCount is how many times the record was delivered, this
	// time included.
	DeliveryCount int

	c    *ShareConsumer
	poll uint64 // the Poll that returned it
	i    int    // its index in the Poll's records
}

// Accept acknowledges the record as processed: it is never delivered
// again. The acknowledgement is sent by the next Poll, Commit or Close.
func (r ShareRecord) Accept() error { return r.ack(share.AckAccept) }

// Release gives the record back: it is delivered again, to any member
// (archived instead once delivered share.delivery.count.limit times).
func (r ShareRecord) Release() error { return r.ack(share.AckRelease) }

// Reject acknowledges the record as unprocessable: it is never delivered
// again.
func (r ShareRecord) Reject() error { return r.ack(share.AckReject) }

func (r ShareRecord) ack(t share.AckType) error {
	if r.c == nil {
		return fmt.Errorf("%w: %s-%d@%d was not delivered by a ShareConsumer", ErrUnacknowledged, r.Topic, r.Partition, r.Offset)
	}
	return r.c.ack(r, t)
}

// ShareConsumer is a member of a share group (KIP-932, Kafka's
// KafkaShareConsumer): the group's members share the records of its
// topics, each record delivered to one member at a time and acknowledged
// one by one. A record not acknowledged within the group's lock duration
// (share.record.lock.duration.ms, 30 s), or whose member dies, is
// delivered again, to any member. Poll, Commit and Close are called from
// one goroutine; a ShareRecord's Accept, Release and Reject from any.
type ShareConsumer struct {
	client ShareClient
	cfg    ShareConsumerConfig
	member string

	mu       sync.Mutex
	epoch    int32 // 0: not joined
	interval time.Duration
	assigned []TopicPartition
	poll     uint64
	held     []heldRecord // of the last Poll
	closed   bool
	polled   time.Time // when Poll was last called
	// left: the member left the group, not polled for MaxPollInterval;
	// the next Poll joins again.
	left bool

	// hbMu orders the heartbeats that join and leave (a leave for
	// MaxPollInterval and the next Poll's join); before mu.
	hbMu sync.Mutex

	stop   chan struct{}
	cancel context.CancelFunc // the heartbeats' context
	done   chan struct{}      // the heartbeat goroutine's
}

type heldRecord struct {
	t      TopicPartition
	offset int64
	ack    share.AckType
	acked  bool
}

// NewShareConsumer makes a member of cfg.Group over client; it joins the
// group with its first Poll.
func NewShareConsumer(client ShareClient, cfg ShareConsumerConfig) (*ShareConsumer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var id [16]byte
	_, _ = rand.Read(id[:]) // never fails
	return &ShareConsumer{client: client, cfg: cfg.withDefaults(), member: base64.RawURLEncoding.EncodeToString(id[:])}, nil
}

// MemberID is the member's id in the group.
func (c *ShareConsumer) MemberID() string { return c.member }

// Poll returns the next records acquired for the member, waiting up to
// MaxWait for some; none is no error. It sends the acknowledgements of
// the last Poll's records with its fetch (in implicit mode, those left
// unacknowledged are accepted). When some of them fail, Poll returns a
// *ShareAckError (errors.Is share.ErrInvalidRecordState when their locks
// expired: they are delivered again) and no records: those the fetch
// acquired are released with the next Poll, to any member.
func (c *ShareConsumer) Poll(ctx context.Context) ([]ShareRecord, error) {
	c.mu.Lock()
	c.polled = time.Now()
	c.mu.Unlock()
	if err := c.join(ctx); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.cfg.ExplicitAck {
		for _, h := range c.held {
			if !h.acked {
				c.mu.Unlock()
				return nil, fmt.Errorf("%w: %s-%d@%d of the last Poll", ErrUnacknowledged, h.t.Topic, h.t.Partition, h.offset)
			}
		}
	}
	acks := c.takeAcks(share.AckAccept)
	// Each Poll starts at the next partition, so that one with a backlog
	// of MaxRecords does not starve those after it.
	parts := make([]TopicPartition, 0, len(c.assigned))
	if n := len(c.assigned); n > 0 {
		k := int(c.poll % uint64(n))
		parts = append(append(parts, c.assigned[k:]...), c.assigned[:k]...)
	}
	c.mu.Unlock()
	if len(parts) == 0 {
		if err := c.send(ctx, acks); err != nil {
			return nil, err
		}
		return nil, idle(ctx, c.cfg.MaxWait) // nothing assigned yet
	}
	recs, err := c.client.ShareFetch(ctx, ShareFetchRequest{Group: c.cfg.Group, Member: c.member, Partitions: parts,
		MaxRecords: c.cfg.MaxRecords, MaxWait: c.cfg.MaxWait, Acks: acks})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.poll++
	var ackErr *ShareAckError
	if errors.As(err, &ackErr) {
		for _, r := range recs { // not handed out: released with the next Poll
			c.held = append(c.held, heldRecord{t: TopicPartition{Topic: r.Topic, Partition: r.Partition}, offset: r.Offset, ack: share.AckRelease, acked: true})
		}
		return nil, fmt.Errorf("log: share consumer: acknowledge: %w", err)
	}
	for i := range recs {
		r := &recs[i]
		r.c, r.poll, r.i = c, c.poll, len(c.held)
		c.held = append(c.held, heldRecord{t: TopicPartition{Topic: r.Topic, Partition: r.Partition}, offset: r.Offset})
	}
	if err != nil {
		return recs, fmt.Errorf("log: share consumer: fetch: %w", err)
	}
	return recs, nil
}

// Commit sends the acknowledgements made since the last Poll now
// (Kafka's commitSync), rather than with the next Poll.
func (c *ShareConsumer) Commit(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return fmt.Errorf("log: share consumer: %w", ErrClosed)
	}
	acks := c.takeAcked()
	c.mu.Unlock()
	return c.send(ctx, acks)
}

// Close sends the acknowledgements made, releases the records delivered
// and not acknowledged (they go to the other members at once), leaves the
// group and stops the heartbeats.
func (c *ShareConsumer) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	joined := c.epoch != 0
	acks := c.takeAcks(share.AckRelease)
	stop, cancel, done := c.stop, c.cancel, c.done
	c.mu.Unlock()
	if stop != nil {
		cancel()
		close(stop)
		<-done
	}
	if !joined {
		return nil
	}
	err := c.send(ctx, acks)
	c.mu.Lock()
	epoch := c.epoch
	c.mu.Unlock()
	if epoch != 0 {
		_, lerr := c.client.ShareHeartbeat(ctx, share.HeartbeatRequest{Group: c.cfg.Group, MemberID: c.member, MemberEpoch: -1, ClientID: c.cfg.ClientID})
		if err == nil && lerr != nil {
			err = fmt.Errorf("log: share consumer: leave: %w", lerr)
		}
	}
	return err
}

// ack records r's acknowledgement, to be sent.
func (c *ShareConsumer) ack(r ShareRecord, t share.AckType) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return fmt.Errorf("log: share consumer: %w", ErrClosed)
	case r.poll != c.poll || r.i >= len(c.held) || c.held[r.i].acked:
		return fmt.Errorf("%w: %s-%d@%d is not held (acknowledged already, or of an earlier Poll)", ErrUnacknowledged, r.Topic, r.Partition, r.Offset)
	}
	c.held[r.i].ack, c.held[r.i].acked = t, true
	return nil
}

// takeAcks takes every held record's acknowledgement, rest for those not
// acknowledged, and forgets them. c.mu is held.
func (c *ShareConsumer) takeAcks(rest share.AckType) map[TopicPartition][]share.AckBatch {
	for i := range c.held {
		if !c.held[i].acked {
			c.held[i].ack, c.held[i].acked = rest, true
		}
	}
	return c.takeAcked()
}

// takeAcked takes the acknowledgements made, as runs of consecutive
// offsets of one type, and marks them sent. c.mu is held.
func (c *ShareConsumer) takeAcked() map[TopicPartition][]share.AckBatch {
	var out map[TopicPartition][]share.AckBatch
	for i := range c.held {
		h := &c.held[i]
		if !h.acked || h.ack < 0 {
			continue
		}
		if out == nil {
			out = map[TopicPartition][]share.AckBatch{}
		}
		bs := out[h.t]
		if k := len(bs) - 1; k >= 0 && bs[k].Last == h.offset-1 && bs[k].Types[0] == h.ack {
			bs[k].Last = h.offset
		} else {
			bs = append(bs, share.AckBatch{First: h.offset, Last: h.offset, Types: []share.AckType{h.ack}})
		}
		out[h.t] = bs
		h.ack = -1 // sent
	}
	if allSent(c.held) {
		c.held = c.held[:0]
	}
	return out
}

func allSent(held []heldRecord) bool {
	for _, h := range held {
		if !h.acked || h.ack >= 0 {
			return false
		}
	}
	return true
}

// send sends acknowledgements.
func (c *ShareConsumer) send(ctx context.Context, acks map[TopicPartition][]share.AckBatch) error {
	if len(acks) == 0 {
		return nil
	}
	if err := c.client.ShareAcknowledge(ctx, c.cfg.Group, c.member, acks); err != nil {
		return fmt.Errorf("log: share consumer: acknowledge: %w", err)
	}
	return nil
}
