package machine

import (
	"errors"
	"fmt"
)

// FollowerMachine is the follower side of one partition on one broker, as a
// state machine without IO: from the leader's answers it decides where the
// local log must be truncated so that it never diverges from the leader's
// (KIP-101, KIP-279, KIP-320), what to fetch next, and which HW and log start
// to adopt. It follows Kafka's AbstractFetcherThread for one partition.
//
// The driver steps it with BecomeFollower, then with the answers to the
// requests it asks for (FetchResponse, EpochEndResponse) and with the
// outcome of the log changes it asks for (Truncated, FollowerAppended), which
// the driver reports before stepping any other event. One request or log
// change is outstanding at a time. A FollowerMachine is not safe for
// concurrent use.
type FollowerMachine struct {
	cache EpochCache // the local log's

	leader          int
	leaderEpoch     int32
	truncateOnFetch bool
	phase           followerPhase
	// after the log change the machine waits for: ask the leader for an
	// epoch's end again (an intermediate truncation) rather than fetch
	askAgain bool
	// noEpoch: fetch without a last fetched epoch (after the KIP-101
	// fallback to the HW, the leader's epochs cannot be compared)
	noEpoch bool

	leo       int64
	lastEpoch int32
	hw        int64
	logStart  int64

	// the leader's HW and log start from the fetch answer being appended
	leaderHW, leaderLogStart int64
}

type followerPhase uint8

const (
	followerIdle      followerPhase = iota // not following
	followerFetching                       // a Fetch is out
	followerAsking                         // an OffsetForLeaderEpoch is out
	followerTruncated                      // waiting for Truncated
	followerAppending                      // waiting for FollowerAppended
)

// NewFollowerMachine returns an idle machine reading the local log's epoch
// cache.
func NewFollowerMachine(cache EpochCache) *FollowerMachine {
	return &FollowerMachine{cache: cache, leader: -1, leaderEpoch: NoEpoch, lastEpoch: NoEpoch}
}

// Events of a FollowerMachine.

// FollowerEvent is an event a FollowerMachine steps on.
type FollowerEvent interface{ isFollowerEvent() }

// BecomeFollower: the metadata names Leader the leader at LeaderEpoch. The
// log fields are the local log's as it is now.
type BecomeFollower struct {
	Leader      int
	LeaderEpoch int32
	// TruncateOnFetch: the leader answers Fetch's LastFetchedEpoch with a
	// DivergingEpoch (KIP-320); without it the follower asks
	// OffsetForLeaderEpoch before it fetches (KIP-101/KIP-279).
	TruncateOnFetch bool

	LogEnd int64
	// LastEpoch is the latest epoch in the log's epoch cache (Kafka's
	// latestEpoch), NoEpoch if none. It may be above the last batch's: an
	// epoch this broker led without appending. Sending the last batch's
	// instead would let the leader's records of an older epoch be appended
	// after that entry, and the cache lose the true start of their epoch.
	LastEpoch int32
	HW        int64
	LogStart  int64
}

// FetchResponse is the leader's answer for this partition to a Fetch the
// machine asked for.
type FetchResponse struct {
	LeaderEpoch int32 // the Fetch's (the machine ignores an answer of another epoch)
	Err         error // from the leader: ErrOffsetOutOfRange, ErrFencedLeaderEpoch, ...
	Diverging   *EpochEnd
	HW          int64
	LogStart    int64
	LogEnd      int64
	Records     bool // the answer holds records, starting at the fetch offset
}

// EpochEndResponse is the leader's answer to FetchEpochEnd (Kafka's
// OffsetForLeaderEpoch): its largest epoch ≤ the one asked for and that
// epoch's end offset, or (NoEpoch, NoOffset) when it has none.
type EpochEndResponse struct {
	LeaderEpoch int32 // the request's
	Err         error
	End         EpochEnd
}

// Truncated: the driver carried out a Truncate or TruncateFully; the log
// now ends at LogEnd, and LastEpoch is its cache's latest epoch (NoEpoch if
// none), as in BecomeFollower.
type Truncated struct {
	LogEnd    int64
	LastEpoch int32
}

// FollowerAppended: the driver appended the records of the last
// FetchResponse; the log now ends at LogEnd, and LastEpoch is its cache's
// latest epoch.
type FollowerAppended struct {
	LogEnd    int64
	LastEpoch int32
}

func (BecomeFollower) isFollowerEvent()   {}
func (FetchResponse) isFollowerEvent()    {}
func (EpochEndResponse) isFollowerEvent() {}
func (Truncated) isFollowerEvent()        {}
func (FollowerAppended) isFollowerEvent() {}

// Actions of a FollowerMachine.

// Fetch: send the leader a Fetch for this partition from Offset, with
// LastFetchedEpoch (NoEpoch: none) and the leader epoch, and step the
// answer as a FetchResponse. The driver batches fetches to one leader in one
// request.
type Fetch struct {
	Leader           int
	LeaderEpoch      int32
	Offset           int64
	LastFetchedEpoch int32
}

// FetchEpochEnd: send the leader an OffsetForLeaderEpoch for Epoch and step
// the answer as an EpochEndResponse.
type FetchEpochEnd struct {
	Leader      int
	LeaderEpoch int32
	Epoch       int32
}

// Truncate: truncate the log to end at To (at most its end), with its epoch
// cache: entries of epochs starting at To or later go, even when To is the
// log end. Lower the HW to To if above; then step Truncated.
type Truncate struct{ To int64 }

// TruncateFully: empty the log and start it at StartAt (the follower is
// below the leader's log start); then step Truncated.
type TruncateFully struct{ StartAt int64 }

// AppendRecords: append the records of the last FetchResponse as a follower
// (with their offsets and epochs); then step FollowerAppended.
type AppendRecords struct{}

// SetFollowerHW: set the log's HW to HW (the leader's, at most the local
// LEO). It may move down, after a leader change.
type SetFollowerHW struct{ HW int64 }

// SetLogStart: move the log's start up to Offset (the leader's retention).
type SetLogStart struct{ Offset int64 }

func (Fetch) isAction()         {}
func (FetchEpochEnd) isAction() {}
func (Truncate) isAction()      {}
func (TruncateFully) isAction() {}
func (AppendRecords) isAction() {}
func (SetFollowerHW) isAction() {}
func (SetLogStart) isAction()   {}

// Step applies ev and appends the resulting actions to out. An event that
// does not fit the machine's phase (a late answer, an answer of an older
// epoch) is ignored.
func (m *FollowerMachine) Step(ev FollowerEvent, out []Action) []Action {
	switch ev := ev.(type) {
	case BecomeFollower:
		return m.become(ev, out)
	case FetchResponse:
		if m.phase != followerFetching || ev.LeaderEpoch != m.leaderEpoch {
			return out
		}
		return m.fetched(ev, out)
	case EpochEndResponse:
		if m.phase != followerAsking || ev.LeaderEpoch != m.leaderEpoch {
			return out
		}
		if ev.Err != nil {
			return out // the driver retries the request after a backoff, or new metadata comes
		}
		return m.truncateTo(m.truncation(ev.End), out)
	case Truncated:
		if m.phase != followerTruncated {
			return out
		}
		m.leo, m.lastEpoch = ev.LogEnd, ev.LastEpoch
		m.hw = min(m.hw, m.leo)
		m.logStart = min(m.logStart, m.leo)
		return m.next(out)
	case FollowerAppended:
		if m.phase != followerAppending {
			return out
		}
		m.leo, m.lastEpoch = ev.LogEnd, ev.LastEpoch
		out = m.adopt(m.leaderHW, m.leaderLogStart, out)
		return m.next(out)
	}
	panic(fmt.Sprintf("replica: unknown follower event %T", ev))
}

// Following reports the leader and epoch followed; ok false when idle.
func (m *FollowerMachine) Following() (leader int, epoch int32, ok bool) {
	return m.leader, m.leaderEpoch, m.phase != followerIdle
}

// LogEnd, HW and LogStart return the local log's as the machine knows them.
func (m *FollowerMachine) LogEnd() int64   { return m.leo }
func (m *FollowerMachine) HW() int64       { return m.hw }
func (m *FollowerMachine) LogStart() int64 { return m.logStart }

// Stop makes the machine idle (this broker leads the partition now, or is
// no longer a replica): later answers are ignored.
func (m *FollowerMachine) Stop() { m.phase = followerIdle }

func (m *FollowerMachine) become(ev BecomeFollower, out []Action) []Action {
	if ev.LeaderEpoch < m.leaderEpoch || ev.LeaderEpoch == m.leaderEpoch && m.phase != followerIdle {
		return out // stale, or known
	}
	*m = FollowerMachine{
		cache: m.cache, leader: ev.Leader, leaderEpoch: ev.LeaderEpoch, truncateOnFetch: ev.TruncateOnFetch,
		leo: ev.LogEnd, lastEpoch: ev.LastEpoch, hw: min(ev.HW, ev.LogEnd), logStart: ev.LogStart,
	}
	switch {
	case ev.LastEpoch == NoEpoch:
		// No epochs to compare (KIP-101's fallback): what is above the HW
		// may not be the leader's.
		m.noEpoch = true
		if m.hw < m.leo {
			return m.truncateTo(truncation{to: m.hw, done: true, noEpoch: true}, out)
		}
		return m.fetch(out)
	case ev.TruncateOnFetch:
		return m.fetch(out)
	}
	return m.ask(m.lastEpoch, out)
}

func (m *FollowerMachine) fetch(out []Action) []Action {
	m.phase = followerFetching
	epoch := m.lastEpoch
	if m.noEpoch {
		epoch = NoEpoch
	}
	return append(out, Fetch{Leader: m.leader, LeaderEpoch: m.leaderEpoch, Offset: m.leo, LastFetchedEpoch: epoch})
}

func (m *FollowerMachine) ask(epoch int32, out []Action) []Action {
	m.phase = followerAsking
	return append(out, FetchEpochEnd{Leader: m.leader, LeaderEpoch: m.leaderEpoch, Epoch: epoch})
}

// next continues after a log change: ask again after an intermediate
// truncation in the OffsetForLeaderEpoch mode, else fetch.
func (m *FollowerMachine) next(out []Action) []Action {
	if m.askAgain && !m.truncateOnFetch && m.lastEpoch != NoEpoch {
		m.askAgain = false
		return m.ask(m.lastEpoch, out)
	}
	m.askAgain = false
	return m.fetch(out)
}

func (m *FollowerMachine) fetched(ev FetchResponse, out []Action) []Action {
	switch {
	case errors.Is(ev.Err, ErrOffsetOutOfRange):
		// Kafka's handleOutOfRangeError: past the leader's end (it can
		// only be after an unclean election) truncate to it; below its
		// start, start over there.
		if ev.LogEnd < m.leo {
			return m.truncateTo(truncation{to: ev.LogEnd, done: true}, out)
		}
		m.phase = followerTruncated
		m.noEpoch = false
		m.hw, m.logStart = ev.LogStart, ev.LogStart
		return append(out, TruncateFully{StartAt: ev.LogStart})
	case ev.Err != nil:
		// Fenced or unknown epoch, not the leader: the driver fetches
		// again after a backoff (the last Fetch, as is), or new metadata
		// comes with BecomeFollower.
		return out
	case ev.Diverging != nil:
		return m.truncateTo(m.truncation(*ev.Diverging), out)
	case ev.Records:
		m.phase = followerAppending
		m.leaderHW, m.leaderLogStart = ev.HW, ev.LogStart
		return append(out, AppendRecords{})
	}
	out = m.adopt(ev.HW, ev.LogStart, out)
	return m.fetch(out)
}

// adopt takes the leader's HW, at most the local LEO and at least the log
// start (Kafka's updateHighWatermark on a follower), and its log start if
// larger than the local one.
func (m *FollowerMachine) adopt(hw, logStart int64, out []Action) []Action {
	hw = max(min(hw, m.leo), m.logStart)
	if hw != m.hw {
		m.hw = hw
		out = append(out, SetFollowerHW{HW: hw})
	}
	if logStart = min(logStart, m.hw); logStart > m.logStart {
		m.logStart = logStart
		out = append(out, SetLogStart{Offset: logStart})
	}
	return out
}

type truncation struct {
	to      int64
	done    bool // false: an intermediate truncation; ask (or fetch) again with the new last epoch
	noEpoch bool // fetch without a last fetched epoch afterwards
	// known: the leader knows our latest epoch, so a cut at the log end
	// would change nothing (no empty epoch entry of ours to drop)
	known bool
}

// truncation is Kafka's getOffsetTruncationState: where to truncate given
// the leader's (epoch, end offset) for the follower's last epoch.
func (m *FollowerMachine) truncation(leader EpochEnd) truncation {
	switch {
	case leader.EndOffset == NoOffset:
		// The leader has no epoch as old as ours: nothing to compare.
		// Fall back to the HW (KIP-101) and fetch without epochs.
		return truncation{to: min(m.hw, m.leo), done: true, noEpoch: true}
	case leader.Epoch == NoEpoch:
		return truncation{to: min(leader.EndOffset, m.leo), done: true}
	}
	epoch, end := m.cache.EndOffsetFor(leader.Epoch)
	switch {
	case end == NoOffset:
		// We hold no epoch ≤ the leader's: the leader's end offset is the
		// best we know (Kafka does the same).
		return truncation{to: min(leader.EndOffset, m.leo), done: true}
	case epoch != leader.Epoch:
		// We do not know the leader's epoch: cut to the end of our largest
		// epoch below it, and compare again from there.
		return truncation{to: min(end, m.leo), done: false}
	}
	return truncation{to: min(end, leader.EndOffset, m.leo), done: true, known: leader.Epoch == m.lastEpoch}
}

func (m *FollowerMachine) truncateTo(tr truncation, out []Action) []Action {
	m.askAgain = !tr.done
	m.noEpoch = tr.noEpoch
	if tr.to >= m.leo && tr.known {
		return m.next(out)
	}
	// Even at the log end: the cache may hold an epoch that starts there
	// with no records (one this broker led without appending), which must
	// go before records of an older epoch come (Kafka truncates the cache
	// from the log end in that case too). With a cache whose epochs all
	// hold records, a diverging answer always cuts below the log end, so
	// this cannot repeat: each truncation drops the latest epoch.
	m.phase = followerTruncated
	return append(out, Truncate{To: min(tr.to, m.leo)})
}
