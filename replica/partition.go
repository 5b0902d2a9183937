package replica

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica/internal/machine"
)

// partState is one partition this member holds a replica of: the local
// log and the two machines. mu serializes every step of either machine and
// the log changes their actions ask for (the partition's one writer).
type partState struct {
	tp      log.TopicPartition
	topicID controller.TopicID
	p       *log.Partition

	leading atomic.Bool // the leader machine leads (read without mu)
	inISR   atomic.Bool // this member is in the ISR, as the metadata says (throttle.go)
	// throttle: leaderListed, followerListed, ... (throttle_config.go)
	throttle atomic.Uint32
	// cfg is the topic's configuration last set on p (admin_configs.go);
	// only the metadata watcher uses it.
	cfg log.TopicConfig

	mu      sync.Mutex
	removed bool
	pm      *machine.PartitionMachine
	fm      *machine.FollowerMachine
	// follower side: the fetcher of following sends fetch (or epochReq)
	following   int // the leader fetched from; 0 none
	fetch       *machine.Fetch
	epochReq    *machine.FetchEpochEnd
	backoff     time.Time     // no fetch before
	backoffStep time.Duration // the last backoff of the errors in a row (fetcher.go)
	pending     []byte        // the records of the fetch answer being appended
	// leader side: acks=all produces awaiting the HW, by token
	waiters map[uint64]chan error
}

// logEpochs is the log's leader-epoch cache as the machines read it.
type logEpochs struct{ p *log.Partition }

func (e logEpochs) EndOffsetFor(epoch int32) (int32, int64) { return e.p.EndOffsetForEpoch(epoch) }

// lastEpoch is the latest epoch of p's cache, NoEpoch if it is empty.
func lastEpoch(p *log.Partition) int32 {
	es := p.EpochEntries()
	if len(es) == 0 {
		return machine.NoEpoch
	}
	return es[len(es)-1].Epoch
}

// applyPartition steps both machines with the partition's state in a new
// image and carries out what they ask.
func (b *Broker) applyPartition(ps *partState, st controller.PartitionState, minISR int, fenced map[int]bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.removed {
		return
	}
	var inel []int
	for _, r := range st.Replicas {
		if fenced[r] {
			inel = append(inel, r)
		}
	}
	ps.inISR.Store(slices.Contains(st.ISR, b.cfg.ID))
	p := ps.p
	md := machine.Metadata{
		Leader: st.Leader, LeaderEpoch: st.LeaderEpoch, PartitionEpoch: st.PartitionEpoch,
		Replicas: st.Replicas, ISR: st.ISR, MinInSyncReplicas: minISR, Ineligible: inel,
		LogEnd: p.EndOffset(), HW: p.HighWatermark(), LogStart: p.StartOffset(),
	}
	if st.Leader == b.cfg.ID && ps.following != 0 {
		ps.fm.Stop()
		b.stopFollowing(ps)
		md.LogEnd, md.HW = p.EndOffset(), p.HighWatermark()
	}
	b.runLeader(ps, ps.pm.Step(b.cfg.Clock.Now(), md, nil))
	ps.leading.Store(ps.pm.Leading())
	switch {
	case st.Leader == b.cfg.ID:
		return
	case st.Leader == controller.NoLeader:
		ps.fm.Stop()
		b.stopFollowing(ps)
		return
	}
	if l, e, ok := ps.fm.Following(); ok && (e > st.LeaderEpoch || l == st.Leader && e == st.LeaderEpoch) {
		return
	}
	b.becomeFollower(ps, st.Leader, st.LeaderEpoch)
}

func (b *Broker) becomeFollower(ps *partState, leader int, epoch int32) {
	p := ps.p
	ps.fm.Stop()
	b.runFollower(ps, ps.fm.Step(machine.BecomeFollower{
		Leader: leader, LeaderEpoch: epoch, TruncateOnFetch: true,
		LogEnd: p.EndOffset(), LastEpoch: lastEpoch(p), HW: p.HighWatermark(), LogStart: p.StartOffset(),
	}, nil))
}

// runLeader carries out the leader machine's actions; it returns the
// FetchAnswer among them, if any. ps.mu is held.
func (b *Broker) runLeader(ps *partState, acts []machine.Action) *machine.FetchAnswer {
	var ans *machine.FetchAnswer
	for _, a := range acts {
		switch a := a.(type) {
		case machine.StartEpoch:
			if err := ps.p.SetLeaderEpoch(a.Epoch); err != nil {
				b.log.Error("replica: start leader epoch", "partition", ps.tp, "epoch", a.Epoch, "err", err)
			}
		case machine.SetHW:
			if _, err := ps.p.SetHighWatermark(a.HW); err != nil {
				b.log.Error("replica: set HW", "partition", ps.tp, "hw", a.HW, "err", err)
			}
		case machine.ProposeISR:
			b.alters.push(alterItem{ps: ps, prop: a})
		case machine.CompleteProduce:
			if ch, ok := ps.waiters[a.Token]; ok {
				delete(ps.waiters, a.Token)
				ch <- a.Err
			}
		case machine.FetchAnswer:
			ans = &a
		}
	}
	return ans
}

// runFollower carries out the follower machine's actions, stepping it
// with the outcome of each log change. ps.mu is held.
func (b *Broker) runFollower(ps *partState, acts []machine.Action) {
	p := ps.p
	for len(acts) > 0 {
		a := acts[0]
		acts = acts[1:]
		switch a := a.(type) {
		case machine.Fetch:
			ps.fetch, ps.epochReq = &a, nil
			b.follow(ps, a.Leader)
		case machine.FetchEpochEnd:
			ps.fetch, ps.epochReq = nil, &a
			b.follow(ps, a.Leader)
		case machine.Truncate:
			if err := p.TruncateTo(a.To); err != nil {
				b.followerFailed(ps, fmt.Errorf("truncate to %d: %w", a.To, err))
				return
			}
			acts = ps.fm.Step(machine.Truncated{LogEnd: p.EndOffset(), LastEpoch: lastEpoch(p)}, acts)
		case machine.TruncateFully:
			if err := p.TruncateFullyAndStartAt(a.StartAt); err != nil {
				b.followerFailed(ps, fmt.Errorf("truncate fully at %d: %w", a.StartAt, err))
				return
			}
			acts = ps.fm.Step(machine.Truncated{LogEnd: p.EndOffset(), LastEpoch: lastEpoch(p)}, acts)
		case machine.AppendRecords:
			raw := ps.pending
			ps.pending = nil
			if _, _, err := p.AppendAsFollower(raw); err != nil {
				b.followerFailed(ps, fmt.Errorf("append as follower: %w", err))
				return
			}
			acts = ps.fm.Step(machine.FollowerAppended{LogEnd: p.EndOffset(), LastEpoch: lastEpoch(p)}, acts)
		case machine.SetFollowerHW:
			if _, err := p.SetHighWatermark(a.HW); err != nil {
				b.log.Error("replica: follower HW", "partition", ps.tp, "err", err)
			}
		case machine.SetLogStart:
			// The leader's log start moved (DeleteRecords, retention):
			// this replica's follows, as Kafka's follower does
			// (maybeIncrementLogStartOffset). At most the HW just set.
			if a.Offset > p.StartOffset() {
				if _, err := p.DeleteRecordsBefore(min(a.Offset, p.HighWatermark())); err != nil {
					b.log.Warn("replica: follower log start", "partition", ps.tp, "offset", a.Offset, "err", err)
				}
			}
		}
	}
}

// followerFailed starts following again from the log as it is, after a
// backoff.
func (b *Broker) followerFailed(ps *partState, err error) {
	b.log.Warn("replica: follower", "partition", ps.tp, "err", err)
	leader, epoch, _ := ps.fm.Following()
	ps.backoff = b.cfg.Clock.Now().Add(100 * time.Millisecond)
	b.becomeFollower(ps, leader, epoch)
}

// follow puts ps on the fetcher of leader.
func (b *Broker) follow(ps *partState, leader int) {
	if ps.following != leader {
		if ps.following != 0 {
			b.fetcherOf(ps.following).remove(ps)
		}
		ps.following = leader
	}
	b.fetcherOf(leader).add(ps)
}

func (b *Broker) stopFollowing(ps *partState) {
	ps.fetch, ps.epochReq, ps.pending = nil, nil, nil
	if ps.following != 0 {
		b.fetcherOf(ps.following).remove(ps)
		ps.following = 0
	}
}

// failAllWaiting answers every waiting produce (Close).
func (b *Broker) failAllWaiting() {
	b.mu.RLock()
	parts := make([]*partState, 0, len(b.parts))
	for _, ps := range b.parts {
		parts = append(parts, ps)
	}
	b.mu.RUnlock()
	for _, ps := range parts {
		ps.mu.Lock()
		for tok, ch := range ps.waiters {
			ch <- log.ErrClosed
			delete(ps.waiters, tok)
		}
		ps.mu.Unlock()
	}
}
