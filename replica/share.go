package replica

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/strata-log/strata/internal/kerr"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/share"
	"github.com/strata-log/strata/tp"
)

// Share groups (KIP-932) in a cluster, placed as Kafka places them. A
// group's membership (ShareGroupHeartbeat, ShareGroupDescribe, the
// assignment) is served by its group coordinator: the leader of the
// group's partition of __consumer_offsets, as for consumer groups
// (groups.go). A share-partition — a group's in-flight records of one
// partition, their locks and delivery counts — is held by the leader of
// that partition, which serves ShareFetch and ShareAcknowledge for it and
// writes every change to __share_group_state (as many partitions as
// __consumer_offsets, Config.OffsetsTopicPartitions: Kafka's 50; RF 3)
// as an acks=all produce before it answers. When leadership of a
// partition moves, the new leader loads its share-partitions back from
// __share_group_state (the records the old leader had acquired come back
// Available, to be delivered again) and answers NOT_LEADER_OR_FOLLOWER
// meanwhile; the old one forgets them.
//
// Each member runs one share.Coordinator for both roles, told what it
// serves by sharePlacement. The state of a partition's share-partitions,
// of every group, is in one partition of __share_group_state, picked by
// the hash of its topic id and partition (ShareStatePartition):
// a new leader reads one partition to load them. The records keep Kafka's
// key (group, topic id, partition) and formats.
//
// Not done here (yet): membership is kept in memory only (Kafka also
// writes it to __consumer_offsets): when the coordinator moves, members
// get UNKNOWN_MEMBER_ID and join again; a group's configs, kept in
// partition 0 of __share_group_state, hold its pruning (share_prune.go)
// back to the oldest of them; a leader's
// writes are not fenced by its leader epoch as Kafka's share coordinator
// fences them: a member checks that it leads the partition before and
// after each write, and a new leader reads up to a barrier it wrote, which
// leaves a short window in which a deposed leader that has not yet learnt
// of it could have an acknowledgement answered and not seen by its
// successor.

// memberShares is the share groups of one member: its share coordinator,
// and the partitions whose share-partitions it has loaded in it (or loads).
type memberShares struct {
	c *share.Coordinator
	ledCoordinators[log.TopicPartition, struct{}]

	idsMu  sync.Mutex
	ledIDs map[ledKey]log.TopicPartition // the led partitions, by topic id (the records' keys name them so)

	cfgMu   sync.Mutex                   // after the coordinator's SetGroupConfig
	configs map[string]share.GroupConfig // as last read from or written to the log (share_configs.go)
}

type ledKey struct {
	id        [16]byte
	partition int32
}

// startShares opens the member's share coordinator (it loads nothing:
// shareLoop loads each partition as the member comes to lead it).
func (b *Broker) startShares() error {
	c, err := share.Open(context.Background(), share.Config{
		Partitions: func(t string) (int, error) {
			if t == log.OffsetsTopic || t == log.ShareStateTopic || t == log.TransactionStateTopic {
				return 0, fmt.Errorf("%w: %s", log.ErrUnknownTopic, t)
			}
			return b.Partitions(context.Background(), t)
		},
		Offsets: func(t log.TopicPartition) (int64, int64, error) {
			ps := b.part(t)
			if ps == nil {
				return 0, 0, fmt.Errorf("%w: %s-%d has no replica on broker %d", log.ErrNotLeader, t.Topic, t.Partition, b.cfg.ID)
			}
			return ps.p.StartOffset(), ps.p.HighWatermark(), nil
		},
		OtherGroup: func(g string) bool {
			if gc := b.localCoordinator(g); gc != nil {
				_, ok := gc.Type(g)
				return ok
			}
			return false
		},
		Clock:             b.cfg.Clock,
		Logger:            b.log,
		Placement:         sharePlacement{b},
		StoreGroupConfigs: b.storeShareConfigs,
	}, shareStateLog{b})
	if err != nil {
		return fmt.Errorf("replica: start share coordinator: %w", err)
	}
	b.shares.c = c
	return nil
}

// stopShares ends the loads and closes the share coordinator (Close, once
// the goroutines that use it have stopped).
func (b *Broker) stopShares() {
	s := &b.shares
	s.stop(b.shareLoader())
	if s.c != nil {
		s.c.Close()
	}
}

// shareLoop brings the share-partitions and memberships this member holds
// in line with each metadata image it applies, until Close.
func (b *Broker) shareLoop() {
	defer b.wg.Done()
	var wg sync.WaitGroup
	wg.Go(b.followShareConfigs)  // until Close, as this loop
	wg.Go(b.pruneShareStateLoop) // likewise (share_prune.go)
	defer wg.Wait()
	for {
		ch := b.metaWatch()
		b.syncShares()
		select {
		case <-ch:
		case <-b.ctx.Done():
			return
		}
	}
}

// syncShares drops the share-partitions of the partitions this member no
// longer leads (or leads in a new epoch), starts loading those of the
// partitions it has come to lead, and forgets the members of the groups it
// no longer coordinates.
func (b *Broker) syncShares() {
	img := b.img.Load()
	want := map[log.TopicPartition]int32{}
	for _, name := range img.Topics() {
		if name == log.OffsetsTopic || name == log.ShareStateTopic || name == log.TransactionStateTopic {
			continue
		}
		t, _ := img.Topic(name)
		for _, st := range t.Partitions {
			if st.Leader != b.cfg.ID {
				continue
			}
			t := log.TopicPartition{Topic: name, Partition: st.Partition}
			if ps := b.part(t); ps != nil && ps.leading.Load() {
				want[t] = st.LeaderEpoch
			}
		}
	}
	s := &b.shares
	// Named before a load can install them (a load's writes check them),
	// forgotten after the drop.
	s.idsMu.Lock()
	for t := range want {
		if s.ledIDs == nil {
			s.ledIDs = map[ledKey]log.TopicPartition{}
		}
		s.ledIDs[ledKey{tp.TopicID(t.Topic), int32(t.Partition)}] = t
	}
	s.idsMu.Unlock()
	stopped, _ := s.sync(b.ctx, want, b.shareLoader())
	s.idsMu.Lock()
	for _, t := range stopped {
		if _, ok := want[t]; !ok {
			delete(s.ledIDs, ledKey{tp.TopicID(t.Topic), int32(t.Partition)})
		}
	}
	s.idsMu.Unlock()
	s.c.DropMembers(b.leadsGroupPartition)
}

// shareLoader loads the share-partitions of a partition into the member's
// share coordinator from __share_group_state, and drops them: the
// coordinator's locks come before the set's (a write it makes under them
// asks sharePlacement), so it is called without them.
func (b *Broker) shareLoader() *ledLoader[log.TopicPartition, struct{}] {
	c := b.shares.c
	return &ledLoader[log.TopicPartition, struct{}]{
		what: "share-partitions",
		open: func(ctx context.Context, t log.TopicPartition, _ int32) (struct{}, error) {
			err := c.Load(ctx, t, shareStateReader{b: b, tp: b.shareStateTP(t)})
			if err != nil {
				c.Drop(t) // what a failed load may have installed
			}
			return struct{}{}, err
		},
		close: func(t log.TopicPartition, _ struct{}) { c.Drop(t) },
		compare: func(x, y log.TopicPartition) int {
			return cmp.Or(strings.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
		},
		// The first tries may find the partition of __share_group_state
		// not created yet at its leader, or its leader moving.
		backoff: 20 * time.Millisecond, maxBackoff: time.Second,
		level: func(backoff time.Duration) slog.Level {
			if backoff >= time.Second {
				return slog.LevelWarn
			}
			return slog.LevelDebug
		},
		log: b.log,
	}
}

// leadsGroupPartition reports whether this member leads the partition of
// __consumer_offsets of a group (loaded or not).
func (b *Broker) leadsGroupPartition(group string) bool {
	gtp, ok := b.groupTP(group)
	if !ok {
		return false
	}
	l, ok := b.img.Load().Leader(gtp.Topic, gtp.Partition)
	return ok && l == b.cfg.ID
}

// sharePlacement tells the share coordinator what this member serves now
// (share.Placement).
type sharePlacement struct{ b *Broker }

func (p sharePlacement) Coordinates(group string) error {
	if p.b.localCoordinator(group) != nil {
		return nil
	}
	if p.b.leadsGroupPartition(group) {
		return fmt.Errorf("%w: broker %d loads the coordinator of share group %q", kerr.ErrCoordinatorLoading, p.b.cfg.ID, group)
	}
	return fmt.Errorf("%w: broker %d does not coordinate share group %q", kafka.ErrNotCoordinator, p.b.cfg.ID, group)
}

func (p sharePlacement) Leads(t log.TopicPartition) error {
	b := p.b
	st, ok := b.img.Load().Partition(t.Topic, t.Partition)
	if !ok {
		return fmt.Errorf("%w: %s-%d", log.ErrUnknownPartition, t.Topic, t.Partition)
	}
	ps := b.part(t)
	if st.Leader != b.cfg.ID || ps == nil || !ps.leading.Load() || b.fenced.Load() {
		return fmt.Errorf("%w: broker %d does not lead %s-%d", log.ErrNotLeader, b.cfg.ID, t.Topic, t.Partition)
	}
	if _, _, loaded := b.shares.get(t, st.LeaderEpoch); !loaded {
		return fmt.Errorf("%w: broker %d loads the share-partitions of %s-%d", log.ErrNotLeader, b.cfg.ID, t.Topic, t.Partition)
	}
	return nil
}

// ShareStatePartition returns the partition of __share_group_state, of n,
// that holds the share-partitions of partition t of every group: FNV-1a
// of its topic id (tp.TopicID) and partition, modulo n.
func ShareStatePartition(t log.TopicPartition, n int) int {
	id := tp.TopicID(t.Topic)
	return shareStatePartitionOf(id, int32(t.Partition), n)
}

func shareStatePartitionOf(id [16]byte, partition int32, n int) int {
	if n <= 0 {
		return 0
	}
	h := fnv.New32a()
	h.Write(id[:])
	h.Write([]byte{byte(partition >> 24), byte(partition >> 16), byte(partition >> 8), byte(partition)})
	return int(h.Sum32() % uint32(n))
}

func (b *Broker) shareStatePartitions() int {
	if n, ok := b.img.Load().PartitionCount(log.ShareStateTopic); ok && n > 0 {
		return n
	}
	return b.offsetsPartitions()
}

// shareStateTP is the partition of __share_group_state holding t's
// share-partitions.
func (b *Broker) shareStateTP(t log.TopicPartition) log.TopicPartition {
	return log.TopicPartition{Topic: log.ShareStateTopic, Partition: ShareStatePartition(t, b.shareStatePartitions())}
}

// shareStateLog is __share_group_state as the member's share coordinator
// writes it (share.StateLog). Replay reads nothing: the coordinator loads
// each partition's share-partitions when this member comes to lead it
// (shareStateReader).
type shareStateLog struct{ b *Broker }

func (shareStateLog) Replay(context.Context, func(int64, []byte, []byte) error) error { return nil }

// Append writes records, each to the partition of __share_group_state
// its key's partition picks, as acks=all produces (creating the topic on
// first use). It returns the offset of the first. Only the leader of a
// partition writes its share-partitions' records: a member that does not
// lead it (any more) before or after the write fails it — the change is
// not answered done, and a new leader that loaded before the write
// delivers the records again rather than having them accepted twice.
func (l shareStateLog) Append(records []share.Record) (int64, error) {
	if err := l.leads(records); err != nil {
		return 0, err
	}
	off, err := l.append(records)
	if err == nil {
		err = l.leads(records)
	}
	return off, err
}

// leads checks that this member leads, and has loaded, the partitions
// whose share-partitions records are of.
func (l shareStateLog) leads(records []share.Record) error {
	s := &l.b.shares
	for _, r := range records {
		id, p, err := share.StateKeyPartition(r.Key)
		if err != nil {
			return err
		}
		s.idsMu.Lock()
		t, ok := s.ledIDs[ledKey{id, p}]
		s.idsMu.Unlock()
		if !ok {
			return fmt.Errorf("%w: broker %d does not lead the partition of a share-partition it writes", log.ErrNotLeader, l.b.cfg.ID)
		}
		if err := sharePlacement(l).Leads(t); err != nil {
			return err
		}
	}
	return nil
}

func (l shareStateLog) append(records []share.Record) (int64, error) {
	b := l.b
	ctx, cancel := context.WithTimeout(b.ctx, b.cfg.ProduceTimeout)
	defer cancel()
	if err := b.ensureShareStateTopic(ctx); err != nil {
		return 0, err
	}
	n := b.shareStatePartitions()
	first := int64(-1)
	for i := 0; i < len(records); {
		id, p, err := share.StateKeyPartition(records[i].Key)
		if err != nil {
			return 0, err
		}
		part := shareStatePartitionOf(id, p, n)
		j := i + 1
		for ; j < len(records); j++ {
			id2, p2, err := share.StateKeyPartition(records[j].Key)
			if err != nil || shareStatePartitionOf(id2, p2, n) != part {
				break
			}
		}
		var bd batch.Builder
		now := time.Now().UnixMilli()
		bd.Reset(now)
		for _, r := range records[i:j] {
			bd.Append(now, r.Key, r.Value, nil)
		}
		base, err := b.Produce(ctx, log.TopicPartition{Topic: log.ShareStateTopic, Partition: part}, bd.Bytes(), log.AcksAll)
		if err != nil {
			return 0, fmt.Errorf("replica: write %s-%d: %w", log.ShareStateTopic, part, err)
		}
		if first < 0 {
			first = base
		}
		i = j
	}
	return first, nil
}

// shareStateReader is one partition of __share_group_state read from its
// leader, from its start to its high watermark (share.StateLog, for
// Coordinator.Load).
type shareStateReader struct {
	b  *Broker
	tp log.TopicPartition
}

func (r shareStateReader) Append([]share.Record) (int64, error) {
	return 0, errors.New("replica: a share state reader does not write")
}

func (r shareStateReader) Replay(ctx context.Context, fn func(offset int64, key, value []byte) error) error {
	b := r.b
	if _, ok := b.img.Load().PartitionCount(log.ShareStateTopic); !ok {
		return nil // no state was ever written
	}
	// A new leader's high watermark may be behind the records the last
	// one had committed: a barrier written with acks=all is committed
	// after them, so what is read up to it holds every one.
	barrier, err := r.barrier(ctx)
	if err != nil {
		return err
	}
	for off := int64(0); off <= barrier; {
		fctx, cancel := context.WithTimeout(ctx, b.cfg.ProduceTimeout)
		resp, err := b.Fetch(fctx, log.FetchRequest{Partitions: []log.FetchPartition{{TopicPartition: r.tp, Offset: off, MaxBytes: 1 << 20}}, MinBytes: 1, MaxWait: 100 * time.Millisecond})
		cancel()
		if err != nil {
			return err
		}
		fp := resp.Partitions[0]
		var oor *log.OffsetOutOfRangeError
		switch {
		case errors.As(fp.Err, &oor) && off < fp.LogStartOffset:
			resp.Release()
			off = fp.LogStartOffset
			continue
		case fp.Err != nil:
			resp.Release()
			return fmt.Errorf("read %s-%d at %d: %w", r.tp.Topic, r.tp.Partition, off, fp.Err)
		}
		raw, err := fp.Records.Bytes()
		resp.Release()
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		err = batch.Batches(raw, func(bt []byte, h batch.Header) error {
			next := h.NextOffset()
			err := batch.Records(bt, h, func(rec *batch.Record) error {
				if rec.Offset < off || rec.Offset >= barrier {
					return nil
				}
				return fn(rec.Offset, rec.Key, rec.Value)
			})
			off = max(off, next)
			return err
		})
		if err != nil {
			return fmt.Errorf("read %s-%d: %w", r.tp.Topic, r.tp.Partition, err)
		}
	}
	return nil
}

// shareBarrierKey is the key of a load's barrier record: a key version of
// its own, skipped by the share coordinator's loads and by the configs'
// reader.
var shareBarrierKey = []byte{0x7f, 0x01}

// barrier writes a barrier record to the partition with acks=all and
// returns its offset.
func (r shareStateReader) barrier(ctx context.Context) (int64, error) {
	var bd batch.Builder
	now := time.Now().UnixMilli()
	bd.Reset(now)
	bd.Append(now, shareBarrierKey, nil, nil)
	pctx, cancel := context.WithTimeout(ctx, r.b.cfg.ProduceTimeout)
	defer cancel()
	off, err := r.b.Produce(pctx, r.tp, bd.Bytes(), log.AcksAll)
	if err != nil {
		return 0, fmt.Errorf("write a barrier to %s-%d: %w", r.tp.Topic, r.tp.Partition, err)
	}
	return off, nil
}

// ensureShareStateTopic creates __share_group_state if the metadata lacks
// it: Config.OffsetsTopicPartitions (Kafka's 50) partitions, RF 3 (or fewer, with fewer brokers),
// min.insync.replicas 2.
func (b *Broker) ensureShareStateTopic(ctx context.Context) error {
	return b.ensureInternalTopic(ctx, log.ShareStateTopic, log.TopicConfig{
		Partitions: b.offsetsPartitions(), RetentionTime: -1, Cleanup: log.CleanupDelete,
	})
}

// ShareCoordinator returns the member's share coordinator
// (kafka.ShareBackend): the memberships of the share groups it
// coordinates and the share-partitions of the partitions it leads; other
// groups' heartbeats get NOT_COORDINATOR, other partitions' fetches
// NOT_LEADER_OR_FOLLOWER.
func (b kafkaBackend) ShareCoordinator() *share.Coordinator { return b.shares.c }
