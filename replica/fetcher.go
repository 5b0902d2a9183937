package replica

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/strata-log/strata/clock"
	"github.com/strata-log/strata/replica/internal/machine"
	"github.com/strata-log/strata/replica/internal/transport"
)

// fetcher is Kafka's ReplicaFetcherThread: one goroutine per source
// broker that fetches every partition this member follows there in one
// request, steps each partition's FollowerMachine with its part of the
// answer and sends the next request. Partitions come and go with add and
// remove; the goroutine count does not depend on the partition count.
type fetcher struct {
	b      *Broker
	leader int

	mu    sync.Mutex
	parts map[*partState]struct{}
	wake  chan struct{}
	// interrupt cancels the fetch in flight (nil when none), so that a
	// partition added meanwhile goes out at once rather than after the
	// leader has held that fetch up to FetchMaxWait: the first acks=all
	// produce after a failover waited for it (500 ms by default).
	interrupt   context.CancelFunc
	interrupted bool

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	// buf holds the last answer of the leader over the Kafka transport:
	// the records appended alias it until the next fetch reads into it.
	buf []byte
}

// bufferedFetcher is a Transport that can read a fetch answer into a
// buffer of the caller's (kafkaTransport).
type bufferedFetcher interface {
	replicaFetchInto(ctx context.Context, leader int, req transport.ReplicaFetchRequest, buf *[]byte) (transport.ReplicaFetchResponse, error)
}

// fetchBackoff is how long a fetcher waits after its leader could not be
// reached. A partition the leader answered with an error waits
// minFetchBackoff, doubled at each error in a row up to fetchBackoff: the
// usual error is a leader that has not applied the metadata naming it yet
// (NOT_LEADER, UNKNOWN_LEADER_EPOCH), which it does within milliseconds —
// and a new topic's first acks=all produce, or the first after a failover,
// waits for that retry.
const (
	fetchBackoff    = 50 * time.Millisecond
	minFetchBackoff = time.Millisecond
)

// backOff puts ps off fetching for its next backoff; ps.mu is held.
func (b *Broker) backOff(ps *partState) {
	ps.backoffStep = min(max(2*ps.backoffStep, minFetchBackoff), fetchBackoff)
	ps.backoff = b.cfg.Clock.Now().Add(ps.backoffStep)
}

// fetcherOf returns the fetcher of leader, started if new. Once the
// member is closing it returns one that is never started.
func (b *Broker) fetcherOf(leader int) *fetcher {
	b.fetchMu.Lock()
	defer b.fetchMu.Unlock()
	if f, ok := b.fetchers[leader]; ok {
		return f
	}
	f := &fetcher{b: b, leader: leader, parts: map[*partState]struct{}{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
	f.ctx, f.cancel = context.WithCancel(b.ctx)
	if b.ctx.Err() != nil {
		close(f.done)
		return f
	}
	b.fetchers[leader] = f
	go f.run()
	return f
}

func (f *fetcher) add(ps *partState) {
	f.mu.Lock()
	_, had := f.parts[ps]
	f.parts[ps] = struct{}{}
	f.mu.Unlock()
	if !had {
		f.interruptNow()
	}
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// interruptNow cancels the fetch in flight, if any.
func (f *fetcher) interruptNow() {
	f.mu.Lock()
	if f.interrupt != nil {
		f.interrupt()
		f.interrupt, f.interrupted = nil, true
	}
	f.mu.Unlock()
}

func (f *fetcher) remove(ps *partState) {
	f.mu.Lock()
	delete(f.parts, ps)
	f.mu.Unlock()
}

func (f *fetcher) stop() {
	f.cancel()
	<-f.done
}

type sentFetch struct {
	ps *partState
	f  machine.Fetch
}

func (f *fetcher) run() {
	defer close(f.done)
	b := f.b
	// Kept from one fetch to the next: a fetcher allocates nothing per
	// fetch for its own bookkeeping.
	var parts, asks []*partState
	var sent []sentFetch
	var reqParts []transport.ReplicaFetchPartition
	for f.ctx.Err() == nil {
		clear(parts)
		parts = parts[:0]
		f.mu.Lock()
		for ps := range f.parts {
			parts = append(parts, ps)
		}
		f.mu.Unlock()

		now := b.cfg.Clock.Now()
		clear(sent)
		clear(asks)
		sent, asks = sent[:0], asks[:0]
		var wait time.Duration = -1
		for _, ps := range parts {
			ps.mu.Lock()
			switch {
			case ps.removed || ps.following != f.leader:
			case now.Before(ps.backoff):
				if d := ps.backoff.Sub(now); wait < 0 || d < wait {
					wait = d
				}
			case ps.fetch != nil && !ps.inISR.Load() && isThrottled(ps, b.followerQuota, followerListed, followerUnset) && b.followerQuota.exceeded(now):
				// Catching up and over the follower quota (throttle.go):
				// not in this fetch; looked at again within a window.
				if d := b.cfg.ReplicationQuotaWindow; wait < 0 || d < wait {
					wait = d
				}
			case ps.fetch != nil:
				sent = append(sent, sentFetch{ps: ps, f: *ps.fetch})
			case ps.epochReq != nil:
				asks = append(asks, ps)
			}
			ps.mu.Unlock()
		}
		for _, ps := range asks {
			f.askEpochEnd(ps)
		}
		if len(sent) == 0 {
			if len(asks) > 0 {
				continue
			}
			f.idle(wait)
			continue
		}
		reqParts = slices.Grow(reqParts[:0], len(sent))[:len(sent)]
		req := transport.ReplicaFetchRequest{ReplicaID: b.cfg.ID, MaxWait: b.cfg.FetchMaxWait.Milliseconds(), Partitions: reqParts}
		for i, s := range sent {
			req.Partitions[i] = transport.ReplicaFetchPartition{
				TopicPartition:     s.ps.tp,
				CurrentLeaderEpoch: s.f.LeaderEpoch,
				FetchOffset:        s.f.Offset,
				LastFetchedEpoch:   s.f.LastFetchedEpoch,
				LogStartOffset:     s.ps.p.StartOffset(),
				MaxBytes:           b.cfg.FetchMaxBytes,
			}
		}
		var resp transport.ReplicaFetchResponse
		var err error
		ctx, cancel := context.WithCancel(f.ctx)
		f.mu.Lock()
		f.interrupt, f.interrupted = cancel, false
		f.mu.Unlock()
		var backedOff clock.Stopper
		if wait >= 0 {
			// A partition backing off (its leader had not applied the
			// metadata yet) is due before the leader may answer: it
			// goes out then, not after FetchMaxWait.
			backedOff = b.cfg.Clock.AfterFunc(wait, f.interruptNow)
		}
		if bf, ok := b.tr.(bufferedFetcher); ok {
			resp, err = bf.replicaFetchInto(ctx, f.leader, req, &f.buf)
		} else {
			resp, err = b.tr.ReplicaFetch(ctx, f.leader, req)
		}
		if backedOff != nil {
			backedOff.Stop()
		}
		f.mu.Lock()
		interrupted := f.interrupted
		f.interrupt, f.interrupted = nil, false
		f.mu.Unlock()
		cancel()
		if err != nil && interrupted && f.ctx.Err() == nil {
			continue // a partition was added: fetch again, with it
		}
		if err != nil {
			b.log.Debug("replica: fetch", "leader", f.leader, "err", err)
			f.idle(fetchBackoff)
			continue
		}
		for i := range resp.Partitions {
			if i >= len(sent) {
				break
			}
			f.handle(sent[i], &resp.Partitions[i])
		}
		resp.Release()
		if cap(f.buf) > maxKeptFetchBuffer {
			f.buf = nil // a rare large answer: not kept for good
		}
	}
}

// maxKeptFetchBuffer is the largest fetch buffer a fetcher keeps between
// fetches.
const maxKeptFetchBuffer = 8 << 20

// idle waits for a partition to be added, d (if ≥ 0), or the end.
func (f *fetcher) idle(d time.Duration) {
	var tc <-chan time.Time
	if d >= 0 {
		t := f.b.cfg.Clock.NewTimer(d)
		defer t.Stop()
		tc = t.C()
	}
	select {
	case <-f.wake:
	case <-tc:
	case <-f.ctx.Done():
	}
}

func (f *fetcher) handle(s sentFetch, r *transport.ReplicaFetchedPartition) {
	b, ps := f.b, s.ps
	var raw []byte
	var readErr error
	if r.Err == nil && r.Diverging == nil && r.Records.Len() > 0 {
		raw, readErr = r.Records.Bytes()
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.removed || ps.following != f.leader || ps.fetch == nil || *ps.fetch != s.f {
		return // the partition moved on meanwhile
	}
	fr := machine.FetchResponse{
		LeaderEpoch: s.f.LeaderEpoch, Err: r.Err, Diverging: r.Diverging,
		HW: r.HighWatermark, LogStart: r.LogStartOffset, LogEnd: r.LogEndOffset,
		Records: len(raw) > 0,
	}
	if readErr != nil {
		fr.Err = readErr
	}
	if fr.Err != nil {
		b.log.Debug("replica: fetch answer", "partition", ps.tp, "leader", f.leader, "err", fr.Err)
		b.backOff(ps)
	} else {
		ps.backoffStep = 0
	}
	if !ps.inISR.Load() && isThrottled(ps, b.followerQuota, followerListed, followerUnset) {
		b.followerQuota.record(b.cfg.Clock.Now(), int64(len(raw)))
	}
	ps.pending = raw
	b.runFollower(ps, ps.fm.Step(fr, nil))
	ps.pending = nil // raw may alias the fetcher's buffer, read into again next
}

func (f *fetcher) askEpochEnd(ps *partState) {
	b := f.b
	ps.mu.Lock()
	q := ps.epochReq
	ps.mu.Unlock()
	if q == nil {
		return
	}
	ans, err := b.tr.EpochEnd(f.ctx, f.leader, transport.EpochEndRequest{
		TopicPartition: ps.tp, CurrentLeaderEpoch: q.LeaderEpoch, Epoch: q.Epoch,
	})
	if err == nil {
		err = ans.Err
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.epochReq == nil || *ps.epochReq != *q {
		return
	}
	if err != nil {
		b.backOff(ps)
	} else {
		ps.backoffStep = 0
	}
	b.runFollower(ps, ps.fm.Step(machine.EpochEndResponse{LeaderEpoch: q.LeaderEpoch, Err: err, End: ans.End}, nil))
}
