package replica

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
)

// A member as a log.GroupClient: each call runs at the group's
// coordinator — this member's, or the leader of the group's partition over
// the Transport — and is tried again, until ctx ends, while the
// coordinator moves.

// groupRetriable reports whether a group call may be tried again at the
// coordinator the next metadata names: the partition's leader moved or is
// unreachable, the coordinator closed as it gave up leadership, or (over
// the Kafka protocol) NOT_COORDINATOR and its kin.
func groupRetriable(err error) bool {
	return retriable(err) || errors.Is(err, group.ErrClosed) || kafka.CoordinatorMoved(err)
}

// groupCall runs fn at the coordinator of groupID.
func (b *Broker) groupCall(ctx context.Context, groupID string, fn func(log.GroupClient) error) error {
	return coordinatorCall(ctx, b, coordinatorOf{
		topic:     log.OffsetsTopic,
		ensure:    b.ensureOffsetsTopic,
		partition: func() (log.TopicPartition, bool) { return b.groupTP(groupID) },
		retriable: groupRetriable,
	}, fn, log.GroupClient(localGroups{b}), b.tr.Group)
}

// coordinatorOf names the coordinator of a key (a group, a transactional
// id): the leader of the key's partition of an internal topic, which
// ensure creates if the cluster has none.
type coordinatorOf struct {
	topic     string
	ensure    func(context.Context) error
	partition func() (log.TopicPartition, bool) // false while topic does not exist
	retriable func(error) bool                  // the call may be tried again at the coordinator the next metadata names
}

// coordinatorCall runs fn at the coordinator of a key: at this member's
// own (local) if it leads the key's partition, else at the leader's over
// the Transport (remote). A retriable failure — the coordinator moved,
// loads, or is unreachable: NOT_COORDINATOR and its kin — is tried again
// once the metadata changes or a backoff has passed, until ctx ends.
func coordinatorCall[P any](ctx context.Context, b *Broker, co coordinatorOf, fn func(P) error, local P, remote func(context.Context, int, func(P) error) error) error {
	if err := co.ensure(ctx); err != nil {
		return err
	}
	backoff := 5 * time.Millisecond
	for {
		ch := b.metaWatch()
		var leader int
		tp, ok := co.partition()
		err := fmt.Errorf("%w: no %s", errNoLeader, co.topic)
		if ok {
			leader, err = b.leaderOf(tp)
		}
		if err == nil {
			if leader == b.cfg.ID {
				err = fn(local)
			} else {
				err = remote(ctx, leader, fn)
			}
		}
		if err == nil || !co.retriable(err) {
			return err
		}
		if err := b.retryWait(ctx, ch, &backoff, err); err != nil {
			return err
		}
	}
}

// groupLocal runs fn against this member's coordinators (the LocalNetwork
// calls it at the coordinator's member).
func (b *Broker) groupLocal(fn func(log.GroupClient) error) error {
	return fn(localGroups{b})
}

// localGroups is this member's coordinators as a log.GroupClient: each
// call goes to the coordinator of its group, or fails with
// kafka.ErrNotCoordinator if this member has none for it now.
type localGroups struct{ b *Broker }

func (g localGroups) coordinator(groupID string) (*group.Coordinator, error) {
	if c := g.b.localCoordinator(groupID); c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("%w: broker %d does not coordinate group %q (yet)", kafka.ErrNotCoordinator, g.b.cfg.ID, groupID)
}

func (g localGroups) JoinGroup(ctx context.Context, req group.JoinRequest) (group.JoinResponse, error) {
	c, err := g.coordinator(req.Group)
	if err != nil {
		return group.JoinResponse{}, err
	}
	return c.Join(ctx, req)
}

func (g localGroups) SyncGroup(ctx context.Context, req group.SyncRequest) (group.SyncResponse, error) {
	c, err := g.coordinator(req.Group)
	if err != nil {
		return group.SyncResponse{}, err
	}
	return c.Sync(ctx, req)
}

func (g localGroups) Heartbeat(ctx context.Context, groupID, memberID string, generation int32) error {
	c, err := g.coordinator(groupID)
	if err != nil {
		return err
	}
	return c.Heartbeat(ctx, groupID, memberID, generation)
}

func (g localGroups) LeaveGroup(ctx context.Context, groupID, memberID string) error {
	c, err := g.coordinator(groupID)
	if err != nil {
		return err
	}
	return c.Leave(ctx, groupID, memberID)
}

func (g localGroups) CommitOffsets(ctx context.Context, groupID, memberID string, generation int32, offsets map[log.TopicPartition]int64) error {
	c, err := g.coordinator(groupID)
	if err != nil {
		return err
	}
	return c.Commit(ctx, groupID, memberID, generation, offsets)
}

func (g localGroups) FetchOffsets(ctx context.Context, groupID string, tps []log.TopicPartition) (map[log.TopicPartition]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, err := g.coordinator(groupID)
	if err != nil {
		return nil, err
	}
	return c.Committed(groupID, tps), nil
}

// Group runs a group call over the Kafka protocol (Transport): through
// this member's kafka.Client, which finds the group's coordinator with
// FindCoordinator (asking this member, whose metadata names the same
// leader) and follows NOT_COORDINATOR as any Kafka client does.
func (t *kafkaTransport) Group(ctx context.Context, _ int, call func(log.GroupClient) error) error {
	c, err := t.b.groupClient(ctx)
	if err != nil {
		return err
	}
	return call(c)
}

// groupClient returns the member's Kafka client, dialing it the first
// time: seeded with the member's own address, it learns the others from
// Metadata.
func (b *Broker) groupClient(ctx context.Context) (*kafka.Client, error) {
	g := &b.groups
	g.clientMu.Lock()
	defer g.clientMu.Unlock()
	if g.client != nil {
		return g.client, nil
	}
	// Close cancels b.ctx before it takes clientMu: a dial in progress
	// ends, and none starts after.
	dctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	if err := dctx.Err(); err != nil {
		return nil, log.ErrClosed
	}
	cfg := kafka.DialConfig{Seeds: []string{b.Addr()}, ClientID: fmt.Sprintf("strata-broker-%d", b.cfg.ID)}
	if b.cfg.Network != nil {
		cfg.Dial = b.cfg.Network.Dial
	}
	if _, cli, err := b.cfg.dataPlaneTLS(); err == nil {
		cfg.TLS = cli // Addr takes only the cluster's certificates (tls.go)
	}
	c, err := kafka.Dial(dctx, cfg)
	if err != nil {
		if b.ctx.Err() != nil {
			return nil, log.ErrClosed
		}
		return nil, fmt.Errorf("%w: dial this member's Kafka client: %w", ErrUnreachable, err)
	}
	g.client = c
	return c, nil
}

// JoinGroup joins a consumer group at its coordinator.
func (b *Broker) JoinGroup(ctx context.Context, req group.JoinRequest) (resp group.JoinResponse, err error) {
	err = b.groupCall(ctx, req.Group, func(g log.GroupClient) (err error) { resp, err = g.JoinGroup(ctx, req); return err })
	return resp, err
}

// SyncGroup returns a member's assignment from the coordinator.
func (b *Broker) SyncGroup(ctx context.Context, req group.SyncRequest) (resp group.SyncResponse, err error) {
	err = b.groupCall(ctx, req.Group, func(g log.GroupClient) (err error) { resp, err = g.SyncGroup(ctx, req); return err })
	return resp, err
}

// Heartbeat keeps a group member alive.
func (b *Broker) Heartbeat(ctx context.Context, groupID, memberID string, generation int32) error {
	return b.groupCall(ctx, groupID, func(g log.GroupClient) error { return g.Heartbeat(ctx, groupID, memberID, generation) })
}

// LeaveGroup removes a member from its group.
func (b *Broker) LeaveGroup(ctx context.Context, groupID, memberID string) error {
	return b.groupCall(ctx, groupID, func(g log.GroupClient) error { return g.LeaveGroup(ctx, groupID, memberID) })
}

// CommitOffsets commits a member's positions (an acks=all produce to the
// group's __consumer_offsets partition at the coordinator).
func (b *Broker) CommitOffsets(ctx context.Context, groupID, memberID string, generation int32, offsets map[log.TopicPartition]int64) error {
	return b.groupCall(ctx, groupID, func(g log.GroupClient) error {
		return g.CommitOffsets(ctx, groupID, memberID, generation, offsets)
	})
}

// FetchOffsets returns a group's committed offsets.
func (b *Broker) FetchOffsets(ctx context.Context, groupID string, tps []log.TopicPartition) (out map[log.TopicPartition]int64, err error) {
	err = b.groupCall(ctx, groupID, func(g log.GroupClient) (err error) { out, err = g.FetchOffsets(ctx, groupID, tps); return err })
	return out, err
}

// ConsumerHeartbeat runs a heartbeat of the consumer group protocol
// (KIP-848) at the group's coordinator: this member's, or the leader's of
// the group's partition of __consumer_offsets, over the Transport (Kafka's
// ConsumerGroupHeartbeat when it is the Kafka protocol). A member is so a
// log.ConsumerGroupClient: a log.Consumer on it may choose
// GroupProtocolConsumer. A join without a MemberID is given one here, as a
// Kafka 4 client makes its own, so that a join tried again at a moved
// coordinator is the same member rather than a second one.
func (b *Broker) ConsumerHeartbeat(ctx context.Context, req group.ConsumerHeartbeatRequest) (resp group.ConsumerHeartbeatResponse, err error) {
	if req.MemberID == "" && req.MemberEpoch == 0 {
		var id [16]byte
		rand.Read(id[:]) // never fails (crypto/rand)
		req.MemberID = base64.RawURLEncoding.EncodeToString(id[:])
	}
	err = b.groupCall(ctx, req.Group, func(g log.GroupClient) (err error) {
		cg, ok := g.(log.ConsumerGroupClient)
		if !ok {
			return fmt.Errorf("%w: the transport to the coordinator of %q does not carry the consumer group protocol", log.ErrInvalidConfig, req.Group)
		}
		resp, err = cg.ConsumerHeartbeat(ctx, req)
		return err
	})
	return resp, err
}

func (g localGroups) ConsumerHeartbeat(ctx context.Context, req group.ConsumerHeartbeatRequest) (group.ConsumerHeartbeatResponse, error) {
	c, err := g.coordinator(req.Group)
	if err != nil {
		return group.ConsumerHeartbeatResponse{}, err
	}
	return c.ConsumerHeartbeat(ctx, req)
}

var (
	_ log.ConsumerGroupClient = (*Broker)(nil)
	_ log.ConsumerGroupClient = localGroups{}
)
