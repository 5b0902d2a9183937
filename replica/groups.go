package replica

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
	"unicode/utf16"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/segment/batch"
)

// Consumer groups in a cluster, as Kafka does them. __consumer_offsets has
// Config.OffsetsTopicPartitions partitions (Kafka's 50), RF 3 (or fewer,
// with fewer brokers), created through the controller by the first group
// call or FindCoordinator any member gets. A group belongs to partition
// GroupPartition(group, N), and its coordinator is that partition's
// leader. Each member runs one group.Coordinator per partition it leads:
// it loads it when it becomes the leader — the committed offsets of the
// partition's groups, with their leader epochs and metadata, read back from
// its replica by group.Open, in the background, the groups answered
// COORDINATOR_LOAD_IN_PROGRESS meanwhile — and closes it
// when leadership moves (or the leader epoch changes); its commits are
// acks=all produces to that partition, so a new leader has every
// acknowledged one. Each group's metadata (its generation and members) is
// written there too, as Kafka's GroupMetadata record, when a generation
// completes and when the group empties (a tombstone): a new coordinator
// loads the group Stable, so its members heartbeat and commit on, without a
// rebalance.
//
// Kafka clients find the coordinator with FindCoordinator, which any member
// answers (the member's kafka.Backend is a kafka.GroupRouter), and are told NOT_COORDINATOR
// by the others. As a log.Client, a member runs a group call at its own
// coordinator or sends it to the partition's leader over the Transport
// (groups_route.go), and follows it when it moves.

// DefaultOffsetsTopicPartitions is Kafka's offsets.topic.num.partitions.
const DefaultOffsetsTopicPartitions = 50

// ErrGroupsUnsupported was returned by a Transport that could not carry
// consumer-group calls.
//
// Deprecated: every Transport carries them; nothing returns it.
var ErrGroupsUnsupported = errors.New("replica: consumer-group calls cannot be forwarded over this transport yet")

// GroupPartition returns the partition of __consumer_offsets, of n, that
// holds a group's commits: Kafka's Utils.abs(groupId.hashCode) % n, with
// Java's String.hashCode (over UTF-16 code units), so that a Kafka
// client's or tool's idea of the partition matches.
func GroupPartition(groupID string, n int) int {
	if n <= 0 {
		return 0
	}
	var h int32
	for _, u := range utf16.Encode([]rune(groupID)) {
		h = 31*h + int32(u)
	}
	switch {
	case h == math.MinInt32:
		h = 0 // Kafka's Utils.abs
	case h < 0:
		h = -h
	}
	return int(h) % n
}

// memberGroups is the group coordination of one member: a coordinator per
// __consumer_offsets partition it leads, and the Kafka client through which
// it forwards group calls over the Kafka-protocol transport.
type memberGroups struct {
	ledCoordinators[int, *group.Coordinator]
	markers groupMarkers // the coordinator epochs of the markers being written (txn_markers.go)

	clientMu sync.Mutex
	client   *kafka.Client // dialed at the first forwarded call
}

func (b *Broker) offsetsPartitions() int {
	if n := b.cfg.OffsetsTopicPartitions; n > 0 {
		return n
	}
	return DefaultOffsetsTopicPartitions
}

// syncCoordinator starts and stops this member's coordinators to match the
// partitions of __consumer_offsets it leads. Called after each image, by
// the metadata goroutine: it closes the coordinators of the partitions it
// no longer leads (Close waits for their commits in progress; a
// coordinator's last commits are in the log the next one of the partition
// reads) and starts a goroutine to load each new one.
func (b *Broker) syncCoordinator() {
	want := map[int]int32{} // partition → leader epoch, where this member leads
	if t, ok := b.img.Load().Topic(log.OffsetsTopic); ok {
		for _, st := range t.Partitions {
			ps := b.part(log.TopicPartition{Topic: log.OffsetsTopic, Partition: st.Partition})
			if st.Leader == b.cfg.ID && ps != nil && ps.leading.Load() {
				want[st.Partition] = st.LeaderEpoch
			}
		}
	}
	b.groups.sync(b.ctx, want, b.groupLoader())
}

// groupLoader loads the coordinator of a partition of __consumer_offsets
// over this member's replica of it, which it replays (group.Open): the
// committed offsets with their leader epochs and metadata, and the groups'
// metadata.
func (b *Broker) groupLoader() *ledLoader[int, *group.Coordinator] {
	return &ledLoader[int, *group.Coordinator]{
		what: "group coordinator",
		open: func(ctx context.Context, p int, _ int32) (*group.Coordinator, error) {
			tp := log.TopicPartition{Topic: log.OffsetsTopic, Partition: p}
			ps := b.part(tp)
			if ps == nil {
				return nil, fmt.Errorf("%w: no replica of %s-%d", log.ErrUnknownPartition, tp.Topic, p)
			}
			return group.Open(ctx, group.Config{
				Partitions: func(t string) (int, error) { return b.Partitions(context.Background(), t) }, Logger: b.log.With("offsets partition", p),
				// A regex is resolved against every topic, internal ones too, as
				// Kafka's coordinator resolves it against its metadata image.
				TopicNames: b.Topics,
			}, b.groupOffsetsLog(ps.p, tp)) // with transactional offsets (txn_markers.go)
		},
		close:   func(_ int, c *group.Coordinator) { c.Close() },
		compare: cmp.Compare[int],
		backoff: 50 * time.Millisecond, maxBackoff: 5 * time.Second,
		log: b.log,
	}
}

// stopCoordinator ends every load, closes every coordinator and the
// forwarding client, for good (Close, once the metadata goroutine has
// stopped).
func (b *Broker) stopCoordinator() {
	g := &b.groups
	g.stop(b.groupLoader())
	g.clientMu.Lock()
	if g.client != nil {
		g.client.Close()
		g.client = nil
	}
	g.clientMu.Unlock()
}

// groupTP returns the partition of __consumer_offsets of a group and its
// state in the current image; false while the topic does not exist.
func (b *Broker) groupTP(groupID string) (log.TopicPartition, bool) {
	n, ok := b.img.Load().PartitionCount(log.OffsetsTopic)
	if !ok || n == 0 {
		return log.TopicPartition{}, false
	}
	return log.TopicPartition{Topic: log.OffsetsTopic, Partition: GroupPartition(groupID, n)}, true
}

// localCoordinator returns this member's coordinator of a group: nil
// unless it leads the group's partition and has loaded it in the leader
// epoch of the current image — and its replica of the partition still
// leads: applying an image that moves the leadership makes the replica a
// follower first, then, once every partition is applied, stores the image
// and closes the coordinator (syncCoordinator); in between, the old
// coordinator would go on answering Joins, Syncs and Heartbeats that the
// new leader's coordinator answers too: two generations of a group at
// once, members one of them does not know (kgo's TestGroupETL against
// three members saw UNKNOWN_MEMBER_ID after such a move).
func (b *Broker) localCoordinator(groupID string) *group.Coordinator {
	tp, ok := b.groupTP(groupID)
	if !ok {
		return nil
	}
	st, ok := b.img.Load().Partition(tp.Topic, tp.Partition)
	if !ok || st.Leader != b.cfg.ID {
		return nil
	}
	if ps := b.part(tp); ps == nil || !ps.leading.Load() {
		return nil
	}
	c, _, _ := b.groups.get(tp.Partition, st.LeaderEpoch)
	return c // nil while loading
}

// CoordinatorFor names the coordinator of a group (kafka.GroupRouter):
// this member's own, if it leads the group's partition, or the leader.
// It creates __consumer_offsets first if the cluster has none, bounded by
// ctx.
func (b kafkaBackend) CoordinatorFor(ctx context.Context, groupID string) (*group.Coordinator, int32, bool) {
	if err := b.ensureOffsetsTopic(ctx); err != nil {
		return nil, -1, false
	}
	tp, ok := b.groupTP(groupID)
	if !ok {
		return nil, -1, false
	}
	leader, err := b.leaderOf(tp)
	switch {
	case err != nil:
		return nil, -1, false
	case leader == b.cfg.ID:
		return b.localCoordinator(groupID), int32(leader), true // nil: loading
	}
	return nil, int32(leader), true
}

// Coordinators returns this member's coordinators (kafka.GroupRouter).
func (b kafkaBackend) Coordinators() []*group.Coordinator {
	return b.groups.loaded(cmp.Compare[int])
}

// offsetsAppend appends a coordinator's records to its partition of
// __consumer_offsets on this member, its leader: an acks=all produce (the
// coordinator replays the partition to its log end at load: the leader's
// log is the one that will be committed). A produce that fails there means the coordinator is moving or
// cannot commit now: kafka.ErrNotCoordinator, which sends the client to
// find it again (Kafka answers NOT_COORDINATOR or
// COORDINATOR_NOT_AVAILABLE).
type offsetsAppend struct {
	b  *Broker
	tp log.TopicPartition
}

func (l offsetsAppend) append(records []group.Record) error {
	var bd batch.Builder
	now := time.Now().UnixMilli()
	bd.Reset(now)
	n := 0
	for _, r := range records {
		n += bd.RecordSize(now, r.Key, r.Value, nil) + 5 // (a later record's offset delta)
	}
	bd.Grow(n) // one allocation: a group's metadata record holds every member's subscription
	for _, r := range records {
		bd.Append(now, r.Key, r.Value, nil)
	}
	ctx, cancel := context.WithTimeout(l.b.ctx, l.b.cfg.ProduceTimeout)
	defer cancel()
	_, err := l.b.produceLocal(ctx, l.tp, bd.Bytes(), log.AcksAll)
	if err != nil && !errors.Is(err, log.ErrRecordTooLarge) {
		return fmt.Errorf("%w: broker %d: append to %s-%d: %v", kafka.ErrNotCoordinator, l.b.cfg.ID, l.tp.Topic, l.tp.Partition, err)
	}
	return err
}

// ensureOffsetsTopic creates __consumer_offsets if the metadata lacks it
// (Kafka's cleanup.policy=compact: the last commit of each key).
func (b *Broker) ensureOffsetsTopic(ctx context.Context) error {
	return b.ensureInternalTopic(ctx, log.OffsetsTopic, log.TopicConfig{
		Partitions: b.offsetsPartitions(), RetentionTime: -1, Cleanup: log.CleanupCompact,
	})
}

// ensureInternalTopic creates an internal topic (__consumer_offsets,
// __transaction_state, __share_group_state) if the metadata lacks it,
// with cfg and Kafka's replication for them: RF 3 and
// min.insync.replicas 2, or fewer with fewer live brokers. If another
// member created it, it waits until this one has applied it.
func (b *Broker) ensureInternalTopic(ctx context.Context, name string, cfg log.TopicConfig) error {
	if _, ok := b.img.Load().PartitionCount(name); ok {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	live := 0
	for _, bi := range b.img.Load().Brokers() {
		if !bi.Fenced {
			live++
		}
	}
	cfg.ReplicationFactor = max(1, min(3, live))
	cfg.MinInSyncReplicas = min(2, cfg.ReplicationFactor)
	err := b.CreateTopic(ctx, name, cfg)
	for backoff := 5 * time.Millisecond; errors.Is(err, controller.ErrLeadershipLost) || errors.Is(err, controller.ErrNotController); {
		// The controller changed while it decided (a loaded machine's
		// election): the topic may or may not exist; ask the next one,
		// for whom it exists already or is created now.
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("replica: %s: %w (%w)", name, ctx.Err(), err)
		case <-b.ctx.Done():
			t.Stop()
			return log.ErrClosed
		}
		backoff = min(2*backoff, 100*time.Millisecond)
		if _, ok := b.img.Load().PartitionCount(name); ok {
			return nil
		}
		err = b.CreateTopic(ctx, name, cfg)
	}
	if !errors.Is(err, log.ErrTopicExists) {
		return err
	}
	for {
		ch := b.metaWatch()
		if _, ok := b.img.Load().PartitionCount(name); ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("replica: %s: %w", name, ctx.Err())
		case <-b.ctx.Done():
			return log.ErrClosed
		}
	}
}
