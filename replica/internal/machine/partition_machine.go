package machine

import (
	"fmt"
	"slices"
	"time"
)

// PartitionMachine is the leader side of one partition on one broker, as a
// state machine without IO: Step(now, event) changes its state and returns
// actions for the driver. Time comes in with each event; the machine never
// reads a clock, starts a goroutine or touches the log. It follows Kafka's
// Partition (Partition.scala): follower fetch state and lastCaughtUpTime,
// ISR shrink and expansion through AlterPartition with at most one change in
// flight, the "maximal ISR" of KIP-497, the high watermark and acks=all.
//
// While another broker leads the partition (or none does) the machine is
// passive: it answers fetches with ErrNotLeader and remembers the epochs, so
// that a stale metadata event is not mistaken for a new one. The follower
// side is FollowerMachine.
//
// A PartitionMachine is not safe for concurrent use: the driver steps it
// from one goroutine (or under one lock) per partition.
type PartitionMachine struct {
	id      int
	lagTime time.Duration
	cache   EpochCache // the local log's

	leading        bool
	leader         int // as the metadata says; -1 none
	replicas       []int
	leaderEpoch    int32
	partitionEpoch int32
	isr            []int // committed: as the metadata (or an accepted AlterPartition) says
	minISR         int
	ineligible     []int
	pending        *isrChange // the AlterPartition in flight, if any

	followers map[int]*follower // every replica but this broker, while leading

	leo        int64 // the local log's end offset
	hw         int64
	logStart   int64
	epochStart int64 // the start offset of the current leader epoch

	waiting []waitingProduce // acks=all produces awaiting the HW, by Required
}

// PartitionConfig configures a PartitionMachine. The zero value means the
// defaults.
type PartitionConfig struct {
	// ReplicaLagTime: a follower in the ISR that has not caught up for
	// longer than this leaves it. 0 → DefaultReplicaLagTime.
	ReplicaLagTime time.Duration
}

// isrChange is a proposed ISR, sent as an AlterPartition and not answered
// yet (Kafka's PendingExpandIsr / PendingShrinkIsr).
type isrChange struct {
	isr         []int // the proposal
	leaderEpoch int32
	basedOn     int32 // the partition epoch the proposal was made at
}

// follower is what the leader knows of one follower (Kafka's ReplicaState).
type follower struct {
	leo      int64 // the offset of its last fetch; NoOffset until it fetches
	logStart int64
	// lastFetchLeaderLEO is the leader's LEO when the last fetch was read,
	// and lastFetch that fetch's time.
	lastFetchLeaderLEO int64
	lastFetch          time.Time
	// lastCaughtUp is the last time the follower was known to have caught
	// up with the leader's LEO; zero for never.
	lastCaughtUp time.Time
}

type waitingProduce struct {
	token    uint64
	required int64
}

// NewPartitionMachine returns the machine of partition replica id (this
// broker), passive until a Metadata event names id the leader. cache is the
// local log's leader-epoch cache; the machine only reads it, while leading,
// to answer follower fetches.
func NewPartitionMachine(id int, cache EpochCache, cfg PartitionConfig) *PartitionMachine {
	if cfg.ReplicaLagTime <= 0 {
		cfg.ReplicaLagTime = DefaultReplicaLagTime
	}
	return &PartitionMachine{
		id: id, lagTime: cfg.ReplicaLagTime, cache: cache,
		leader: -1, leaderEpoch: NoEpoch, partitionEpoch: -1,
		leo: 0, hw: 0, epochStart: NoOffset,
	}
}

// Events of a PartitionMachine.

// PartitionEvent is an event a PartitionMachine steps on.
type PartitionEvent interface{ isPartitionEvent() }

// Metadata is the partition's state in a newer metadata image (or the
// first). The log fields are the local log's as it is now; the machine reads
// them only when it becomes leader.
type Metadata struct {
	Leader            int // a broker ID, or -1 for none
	LeaderEpoch       int32
	PartitionEpoch    int32
	Replicas          []int
	ISR               []int
	MinInSyncReplicas int // ≤ 0 → 1
	// Ineligible are the replicas that may not join the ISR now: fenced
	// or shutting down (Kafka's isReplicaIsrEligible). The leader neither
	// proposes them nor lets them hold the HW unless they are in the ISR.
	// It is taken from every Metadata event, even one otherwise known.
	Ineligible []int

	LogEnd   int64
	HW       int64
	LogStart int64
}

// Appended: the leader appended to its log, whose end offset is now LogEnd.
type Appended struct{ LogEnd int64 }

// LogStartMoved: retention or a delete-records moved the leader's log start.
type LogStartMoved struct{ LogStart int64 }

// FollowerFetch is a Fetch from follower Replica (Kafka's Fetch with a
// replica id).
type FollowerFetch struct {
	Replica int
	// LeaderEpoch is the leader epoch the follower knows (Fetch's
	// CurrentLeaderEpoch); NoEpoch skips the check.
	LeaderEpoch      int32
	FetchOffset      int64
	LastFetchedEpoch int32 // the epoch of the last batch the follower holds; NoEpoch if none or not sent
	LogStart         int64 // the follower's log start offset
}

// Tick is the passage of time: the driver sends one every ReplicaLagTime/2
// or more often (Kafka checks every replica.lag.time.max.ms / 2).
type Tick struct{}

// AlterPartitionResult is how an AlterPartition ended, as far as the leader
// needs to know.
type AlterPartitionResult uint8

const (
	// AlterAccepted: the controller committed the change; the answer carries
	// the partition's new state.
	AlterAccepted AlterPartitionResult = iota + 1
	// AlterRejected: the controller refused the proposal and did not apply
	// it (an invalid or ineligible ISR): the leader reverts to the
	// committed ISR and may propose again.
	AlterRejected
	// AlterStale: the proposal was based on an old leader or partition epoch
	// (fenced, stale, not the leader). The leader keeps the change in flight
	// — it does not know what the controller holds — until newer metadata
	// arrives.
	AlterStale
)

// AlterPartitionAnswer is the answer to a ProposeISR. LeaderEpoch and
// BasedOn are the proposal's (ProposeISR.LeaderEpoch and PartitionEpoch); an
// answer that matches no proposal in flight is ignored. A transient failure
// (no controller, leadership lost: outcome unknown) is not an answer: the
// driver retries the same proposal.
type AlterPartitionAnswer struct {
	LeaderEpoch int32
	BasedOn     int32
	Result      AlterPartitionResult
	// With AlterAccepted, the committed state.
	ISR            []int
	PartitionEpoch int32
}

// AwaitProduce: an acks=all produce was appended; it completes when the HW
// reaches Required (the offset after its last record).
type AwaitProduce struct {
	Token    uint64 // the driver's, unique among waiting produces
	Required int64
}

// CancelProduce: the produce's timeout ended its wait; the driver answers it
// (Kafka: REQUEST_TIMED_OUT) and the machine forgets it.
type CancelProduce struct{ Token uint64 }

func (Metadata) isPartitionEvent()             {}
func (Appended) isPartitionEvent()             {}
func (LogStartMoved) isPartitionEvent()        {}
func (FollowerFetch) isPartitionEvent()        {}
func (Tick) isPartitionEvent()                 {}
func (AlterPartitionAnswer) isPartitionEvent() {}
func (AwaitProduce) isPartitionEvent()         {}
func (CancelProduce) isPartitionEvent()        {}

// Actions of a PartitionMachine.

// SetHW: the leader's high watermark moved (up) to HW; the driver sets it on
// the log, which makes the records below it readable by consumers.
type SetHW struct{ HW int64 }

// StartEpoch: this broker became leader with a new leader epoch; the driver
// records (Epoch, StartOffset) in the log's leader-epoch cache before any
// append in the epoch.
type StartEpoch struct {
	Epoch       int32
	StartOffset int64
}

// ProposeISR: send an AlterPartition with this ISR, based on these epochs.
// The driver answers it with an AlterPartitionAnswer carrying the same
// LeaderEpoch and PartitionEpoch (as BasedOn).
type ProposeISR struct {
	ISR            []int
	LeaderEpoch    int32
	PartitionEpoch int32
}

// CompleteProduce: answer the waiting acks=all produce Token, with Err nil
// (acknowledged), ErrNotEnoughReplicasAfterAppend or ErrNotLeader.
type CompleteProduce struct {
	Token uint64
	Err   error
}

// FetchAnswer answers a FollowerFetch. With Err nil and Diverging nil the
// driver reads records from the fetch offset (at most up to LogEnd) and
// sends them with HW and LogStart. With Diverging set it sends no records,
// only the diverging epoch (the follower truncates). With Err it sends the
// error, and for ErrOffsetOutOfRange the log start and end.
type FetchAnswer struct {
	Replica   int
	Err       error
	Diverging *EpochEnd
	HW        int64
	LogStart  int64
	LogEnd    int64
}

func (SetHW) isAction()           {}
func (StartEpoch) isAction()      {}
func (ProposeISR) isAction()      {}
func (CompleteProduce) isAction() {}
func (FetchAnswer) isAction()     {}

// Step applies ev at time now and appends the resulting actions to out.
func (m *PartitionMachine) Step(now time.Time, ev PartitionEvent, out []Action) []Action {
	switch ev := ev.(type) {
	case Metadata:
		return m.metadata(now, ev, out)
	case Appended:
		return m.appended(now, ev, out)
	case LogStartMoved:
		if m.leading && ev.LogStart > m.logStart {
			m.logStart = ev.LogStart
		}
		return out
	case FollowerFetch:
		return m.fetch(now, ev, out)
	case Tick:
		return m.tick(now, out)
	case AlterPartitionAnswer:
		return m.alterAnswer(now, ev, out)
	case AwaitProduce:
		return m.await(ev, out)
	case CancelProduce:
		m.waiting = slices.DeleteFunc(m.waiting, func(w waitingProduce) bool { return w.token == ev.Token })
		return out
	}
	panic(fmt.Sprintf("replica: unknown partition event %T", ev))
}

// Leading reports whether this broker leads the partition.
func (m *PartitionMachine) Leading() bool { return m.leading }

// HW returns the high watermark (meaningful while leading).
func (m *PartitionMachine) HW() int64 { return m.hw }

// LogEnd returns the leader's log end offset as the machine knows it.
func (m *PartitionMachine) LogEnd() int64 { return m.leo }

// LeaderEpoch and PartitionEpoch return the epochs the machine is at.
func (m *PartitionMachine) LeaderEpoch() int32    { return m.leaderEpoch }
func (m *PartitionMachine) PartitionEpoch() int32 { return m.partitionEpoch }

// ISR returns the committed ISR.
func (m *PartitionMachine) ISR() []int { return slices.Clone(m.isr) }

// MaximalISR returns the committed ISR together with the members of the
// proposal in flight, if any (KIP-497): the set the HW waits for.
func (m *PartitionMachine) MaximalISR() []int { return m.maximalISR() }

// Pending returns the ISR proposed by the AlterPartition in flight.
func (m *PartitionMachine) Pending() ([]int, bool) {
	if m.pending == nil {
		return nil, false
	}
	return slices.Clone(m.pending.isr), true
}

// FollowerLogEnd returns the leader's view of a follower's LEO (NoOffset
// until it fetches).
func (m *PartitionMachine) FollowerLogEnd(replica int) (int64, bool) {
	f, ok := m.followers[replica]
	if !ok {
		return NoOffset, false
	}
	return f.leo, true
}

// CheckProduce says whether an acks=all produce may be appended now:
// ErrNotLeader, or ErrNotEnoughReplicas when the committed ISR is smaller
// than MinInSyncReplicas (capped at the replica count), as Kafka checks
// before appending.
func (m *PartitionMachine) CheckProduce() error {
	if !m.leading {
		return ErrNotLeader
	}
	if len(m.isr) < m.effectiveMinISR() {
		return fmt.Errorf("%w: ISR %v, min %d", ErrNotEnoughReplicas, m.isr, m.effectiveMinISR())
	}
	return nil
}

// effectiveMinISR is MinInSyncReplicas capped at the number of replicas, as
// Kafka's effectiveMinIsr.
func (m *PartitionMachine) effectiveMinISR() int {
	return max(1, min(m.minISR, len(m.replicas)))
}

func (m *PartitionMachine) inMaximalISR(r int) bool {
	return slices.Contains(m.isr, r) || m.pending != nil && slices.Contains(m.pending.isr, r)
}

func (m *PartitionMachine) maximalISR() []int {
	if m.pending == nil {
		return slices.Clone(m.isr)
	}
	out := slices.Clone(m.isr)
	for _, r := range m.pending.isr {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

func (m *PartitionMachine) metadata(now time.Time, ev Metadata, out []Action) []Action {
	if ev.LeaderEpoch < m.leaderEpoch {
		return out // stale
	}
	if ev.Leader != m.id {
		if m.leading {
			out = m.failWaiting(ErrNotLeader, out)
			m.followers, m.pending = nil, nil
		}
		m.leading = false
		m.leader, m.leaderEpoch, m.partitionEpoch = ev.Leader, ev.LeaderEpoch, ev.PartitionEpoch
		m.replicas, m.isr, m.minISR = slices.Clone(ev.Replicas), slices.Clone(ev.ISR), ev.MinInSyncReplicas
		return out
	}
	isNewLeader := !m.leading
	isNewEpoch := isNewLeader || ev.LeaderEpoch > m.leaderEpoch
	if !isNewEpoch && ev.PartitionEpoch <= m.partitionEpoch {
		// Known already (say, from an accepted AlterPartition), but a
		// broker may have been fenced or unfenced, and an AlterPartition
		// that completed a reassignment changed the replicas too.
		m.ineligible = slices.Clone(ev.Ineligible)
		if ev.PartitionEpoch == m.partitionEpoch && !slices.Equal(ev.Replicas, m.replicas) {
			m.replicas = slices.Clone(ev.Replicas)
			m.syncFollowers()
		}
		return m.maybeAdvanceHW(now, out)
	}
	m.leading, m.leader = true, m.id
	m.leaderEpoch, m.partitionEpoch = ev.LeaderEpoch, ev.PartitionEpoch
	m.replicas, m.isr, m.minISR = slices.Clone(ev.Replicas), slices.Clone(ev.ISR), ev.MinInSyncReplicas
	m.ineligible = slices.Clone(ev.Ineligible)
	// Newer metadata replaces whatever was in flight: an answer to it, if
	// one comes, no longer matches.
	m.pending = nil
	if isNewLeader {
		m.leo, m.hw, m.logStart = ev.LogEnd, min(ev.HW, ev.LogEnd), ev.LogStart
		m.followers = make(map[int]*follower)
	}
	m.syncFollowers()
	if isNewEpoch {
		// Kafka's makeLeader: the epoch starts at the current LEO, and every
		// follower's fetch state is reset; one in the ISR counts as caught
		// up now, the others as never, so that they do not hold the HW back.
		m.epochStart = m.leo
		out = append(out, StartEpoch{Epoch: m.leaderEpoch, StartOffset: m.epochStart})
		for r, f := range m.followers {
			inSync := slices.Contains(m.isr, r)
			var caughtUp time.Time
			if inSync {
				caughtUp = now
			}
			if isNewLeader {
				*f = follower{leo: NoOffset, logStart: NoOffset, lastFetchLeaderLEO: NoOffset, lastCaughtUp: caughtUp}
				continue
			}
			f.lastFetchLeaderLEO = m.epochStart
			f.lastFetch = caughtUp
			f.lastCaughtUp = caughtUp
		}
	}
	return m.maybeAdvanceHW(now, out)
}

// syncFollowers makes the followers the replicas but this broker: those
// no longer replicas go (a reassignment removed them); new ones come in as
// not in sync.
func (m *PartitionMachine) syncFollowers() {
	for r := range m.followers {
		if !slices.Contains(m.replicas, r) {
			delete(m.followers, r)
		}
	}
	for _, r := range m.replicas {
		if _, ok := m.followers[r]; !ok && r != m.id {
			m.followers[r] = &follower{leo: NoOffset, logStart: NoOffset, lastFetchLeaderLEO: NoOffset}
		}
	}
}

func (m *PartitionMachine) appended(now time.Time, ev Appended, out []Action) []Action {
	if !m.leading || ev.LogEnd <= m.leo {
		return out
	}
	m.leo = ev.LogEnd
	return m.maybeAdvanceHW(now, out)
}

func (m *PartitionMachine) fetch(now time.Time, ev FollowerFetch, out []Action) []Action {
	ans := FetchAnswer{Replica: ev.Replica, HW: m.hw, LogStart: m.logStart, LogEnd: m.leo}
	switch {
	case !m.leading:
		ans.Err = ErrNotLeader
		return append(out, ans)
	case ev.LeaderEpoch != NoEpoch && ev.LeaderEpoch < m.leaderEpoch:
		ans.Err = ErrFencedLeaderEpoch
		return append(out, ans)
	case ev.LeaderEpoch != NoEpoch && ev.LeaderEpoch > m.leaderEpoch:
		ans.Err = ErrUnknownLeaderEpoch
		return append(out, ans)
	}
	f, ok := m.followers[ev.Replica]
	if !ok {
		ans.Err = ErrNotReplica
		return append(out, ans)
	}
	// KIP-320: the follower's log diverges from ours if our log has no
	// epoch as large as its last one, or that epoch ends before its fetch
	// offset. Then it must truncate; its fetch state is left alone.
	if ev.LastFetchedEpoch != NoEpoch {
		e, end := m.cache.EndOffsetFor(ev.LastFetchedEpoch)
		if e < ev.LastFetchedEpoch || end < ev.FetchOffset {
			ans.Diverging = &EpochEnd{Epoch: e, EndOffset: end}
			return append(out, ans)
		}
	}
	if ev.FetchOffset < m.logStart || ev.FetchOffset > m.leo {
		ans.Err = ErrOffsetOutOfRange
		return append(out, ans)
	}
	prev := f.leo
	m.updateFollower(f, now, ev)
	out = m.maybeExpand(ev.Replica, f, out)
	if f.leo != prev {
		out = m.maybeAdvanceHW(now, out)
	}
	ans.HW = m.hw
	return append(out, ans)
}

// updateFollower is Kafka's Replica.updateFetchStateOrThrow. A follower
// that fetches at or past the leader's LEO is caught up now; one that
// fetches at or past the leader's LEO at its previous fetch was caught up at
// the time of that previous fetch (it has everything the leader had then).
func (m *PartitionMachine) updateFollower(f *follower, now time.Time, ev FollowerFetch) {
	switch {
	case ev.FetchOffset >= m.leo:
		f.lastCaughtUp = later(f.lastCaughtUp, now)
	case f.lastFetchLeaderLEO != NoOffset && ev.FetchOffset >= f.lastFetchLeaderLEO:
		f.lastCaughtUp = later(f.lastCaughtUp, f.lastFetch)
	}
	f.logStart = ev.LogStart
	f.leo = ev.FetchOffset
	f.lastFetchLeaderLEO = m.leo
	f.lastFetch = now
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// caughtUp is Kafka's ReplicaState.isCaughtUp: the follower has the
// leader's whole log, or caught up with it within the lag time.
func (m *PartitionMachine) caughtUp(f *follower, now time.Time) bool {
	return f.leo == m.leo || !f.lastCaughtUp.IsZero() && now.Sub(f.lastCaughtUp) <= m.lagTime
}

// maybeExpand proposes adding a follower outside the ISR that holds the
// whole committed log and the start of the leader's epoch, if eligible (Kafka's
// isFollowerInSync: LEO ≥ HW and LEO ≥ leader epoch start offset). The
// second condition keeps out a follower that has not yet fetched anything
// of this epoch, whose log may still hold records a failed leader left.
func (m *PartitionMachine) maybeExpand(r int, f *follower, out []Action) []Action {
	if m.pending != nil || slices.Contains(m.isr, r) || slices.Contains(m.ineligible, r) {
		return out
	}
	if f.leo < m.hw || f.leo < m.epochStart {
		return out
	}
	isr := make([]int, 0, len(m.isr)+1)
	for _, x := range m.replicas {
		if x == r || slices.Contains(m.isr, x) {
			isr = append(isr, x)
		}
	}
	return m.propose(isr, out)
}

func (m *PartitionMachine) propose(isr []int, out []Action) []Action {
	m.pending = &isrChange{isr: isr, leaderEpoch: m.leaderEpoch, basedOn: m.partitionEpoch}
	return append(out, ProposeISR{ISR: slices.Clone(isr), LeaderEpoch: m.leaderEpoch, PartitionEpoch: m.partitionEpoch})
}

// tick shrinks the ISR of the followers that have not caught up within the
// lag time (Kafka's maybeShrinkIsr), and moves the HW if a follower outside
// the ISR stopped holding it back.
func (m *PartitionMachine) tick(now time.Time, out []Action) []Action {
	if !m.leading {
		return out
	}
	if m.pending == nil {
		var isr []int
		shrink := false
		for _, r := range m.isr {
			if f, ok := m.followers[r]; ok && r != m.id && !m.caughtUp(f, now) {
				shrink = true
				continue
			}
			isr = append(isr, r)
		}
		if shrink {
			out = m.propose(isr, out)
		}
	}
	return m.maybeAdvanceHW(now, out)
}

func (m *PartitionMachine) alterAnswer(now time.Time, ev AlterPartitionAnswer, out []Action) []Action {
	p := m.pending
	if !m.leading || p == nil || ev.LeaderEpoch != p.leaderEpoch || ev.BasedOn != p.basedOn {
		return out // not the answer to what is in flight
	}
	switch ev.Result {
	case AlterAccepted:
		if ev.PartitionEpoch < m.partitionEpoch {
			return out
		}
		m.isr, m.partitionEpoch = slices.Clone(ev.ISR), ev.PartitionEpoch
		m.pending = nil
		return m.maybeAdvanceHW(now, out)
	case AlterRejected:
		// Not applied: back to the committed ISR. The next fetch or tick
		// proposes again if the reason still holds.
		m.pending = nil
		return m.maybeAdvanceHW(now, out)
	}
	// AlterStale: wait for the metadata.
	return out
}

func (m *PartitionMachine) await(ev AwaitProduce, out []Action) []Action {
	if !m.leading {
		return append(out, CompleteProduce{Token: ev.Token, Err: ErrNotLeader})
	}
	if ev.Required <= m.hw {
		return append(out, CompleteProduce{Token: ev.Token, Err: m.afterAppendErr()})
	}
	i, _ := slices.BinarySearchFunc(m.waiting, ev.Required, func(w waitingProduce, req int64) int {
		if w.required <= req {
			return -1
		}
		return 1
	})
	m.waiting = slices.Insert(m.waiting, i, waitingProduce{token: ev.Token, required: ev.Required})
	return out
}

// afterAppendErr is Kafka's checkEnoughReplicasReachOffset once the HW has
// reached a produce: acknowledged if the maximal ISR has MinInSyncReplicas
// members, else NOT_ENOUGH_REPLICAS_AFTER_APPEND. Since the HW does not move
// while the committed ISR (a subset of the maximal) is under min, the error
// cannot arise from this machine's own rules; it stays, as in Kafka, as the
// guard of the acknowledgement.
func (m *PartitionMachine) afterAppendErr() error {
	n := len(m.isr)
	if m.pending != nil {
		for _, r := range m.pending.isr {
			if !slices.Contains(m.isr, r) {
				n++
			}
		}
	}
	if n < m.effectiveMinISR() {
		return ErrNotEnoughReplicasAfterAppend
	}
	return nil
}

func (m *PartitionMachine) failWaiting(err error, out []Action) []Action {
	for _, w := range m.waiting {
		out = append(out, CompleteProduce{Token: w.token, Err: err})
	}
	m.waiting = m.waiting[:0]
	return out
}

// maybeAdvanceHW is Kafka's maybeIncrementLeaderHW: the HW is the least LEO
// over the leader and every follower in the maximal ISR, or outside it but
// caught up within the lag time and eligible (about to join: the HW waits
// for it, or it could never catch up with a moving HW). It only moves up, and not at all
// while the committed ISR is smaller than MinInSyncReplicas (KIP-966).
func (m *PartitionMachine) maybeAdvanceHW(now time.Time, out []Action) []Action {
	if !m.leading || len(m.isr) < m.effectiveMinISR() {
		return out
	}
	hw := m.leo
	for r, f := range m.followers {
		if f.leo < hw && (m.inMaximalISR(r) || m.caughtUp(f, now) && !slices.Contains(m.ineligible, r)) {
			hw = f.leo
		}
	}
	if hw <= m.hw {
		return out
	}
	m.hw = hw
	out = append(out, SetHW{HW: hw})
	n := 0
	for n < len(m.waiting) && m.waiting[n].required <= hw {
		n++
	}
	if n > 0 {
		err := m.afterAppendErr()
		for _, w := range m.waiting[:n] {
			out = append(out, CompleteProduce{Token: w.token, Err: err})
		}
		m.waiting = slices.Delete(m.waiting, 0, n)
	}
	return out
}
