package replica

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// ledCoordinators is what a member runs for the partitions it leads of one
// kind — a group coordinator per partition of __consumer_offsets, a
// transaction coordinator per partition of __transaction_state, the
// share-partitions of each partition of a topic — each loaded in the
// leader epoch it was started in: in the background, as Kafka loads a
// partition's state, so that a large partition does not hold the metadata
// back; stopped when leadership moves (or the leader epoch changes:
// another leader may have written in between). K is the partition, C what
// a load makes of it.
type ledCoordinators[K comparable, C any] struct {
	mu  sync.Mutex
	led map[K]*ledEntry[C] // loading or loaded
	// loading holds the latest load (or reload) goroutine of each key,
	// closed when it ends: the next load of the key waits for it, so that
	// a superseded load never closes what a later one installs, nor two
	// loads of a key read at once.
	loading map[K]chan struct{}
	closed  bool
	loads   sync.WaitGroup // the loading goroutines, joined by stop
}

// ledEntry is the coordinator of one key, in the leader epoch it was
// loaded in: the zero C, loaded false, while its goroutine loads it, which
// cancel ends.
type ledEntry[C any] struct {
	c      C
	loaded bool
	epoch  int32
	cancel context.CancelFunc
}

// ledLoader says how a ledCoordinators loads and closes its coordinators.
// open and close are called without the set's lock held.
type ledLoader[K comparable, C any] struct {
	what    string // for the log: "group coordinator"
	open    func(ctx context.Context, k K, epoch int32) (C, error)
	close   func(k K, c C)
	compare func(a, b K) int // the order in which keys are stopped, started and listed
	// backoff is the first wait after a failed load, doubled up to
	// maxBackoff; a failure is logged at the level level gives for the
	// wait that follows it (Error if level is nil).
	backoff, maxBackoff time.Duration
	level               func(backoff time.Duration) slog.Level
	log                 *slog.Logger
}

// coordinatorChanges is the decision of ledCoordinators.sync: given the
// keys whose coordinator runs or loads (led, with the leader epoch it was
// started in) and those this member leads in the metadata (want), the
// coordinators to stop — the partition is no longer led, or led in another
// epoch: another leader may have written to it in between — and the
// keys whose coordinator to load, both sorted by compare.
func coordinatorChanges[K comparable](led, want map[K]int32, compare func(a, b K) int) (stop, start []K) {
	for p, e := range led {
		if we, ok := want[p]; !ok || we != e {
			stop = append(stop, p)
		}
	}
	for p, e := range want {
		if le, ok := led[p]; !ok || le != e {
			start = append(start, p)
		}
	}
	slices.SortFunc(stop, compare)
	slices.SortFunc(start, compare)
	return stop, start
}

// sync stops the coordinators of the keys not in want (or wanted in
// another epoch), closing the loaded ones before it returns — their last
// writes are in the log the next load reads — and starts a goroutine to
// load each new one, under parent. It returns the keys it stopped and
// started.
func (s *ledCoordinators[K, C]) sync(parent context.Context, want map[K]int32, l *ledLoader[K, C]) (stopped, started []K) {
	s.mu.Lock()
	led := make(map[K]int32, len(s.led))
	for k, e := range s.led {
		led[k] = e.epoch
	}
	stopKs, startKs := coordinatorChanges(led, want, l.compare)
	type closing struct {
		k K
		c C
	}
	stop := make([]closing, 0, len(stopKs))
	for _, k := range stopKs {
		e := s.led[k]
		e.cancel()
		if e.loaded {
			stop = append(stop, closing{k, e.c})
		}
		delete(s.led, k)
	}
	s.mu.Unlock()
	for _, c := range stop {
		l.close(c.k, c.c)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || parent.Err() != nil {
		return stopKs, nil
	}
	for _, k := range startKs {
		if _, ok := s.led[k]; ok {
			continue // started by a sync that ran meanwhile
		}
		ctx, cancel := context.WithCancel(parent)
		e := &ledEntry[C]{epoch: want[k], cancel: cancel}
		if s.led == nil {
			s.led = map[K]*ledEntry[C]{}
		}
		s.led[k] = e
		prev, done := s.track(k)
		go s.loadLoop(ctx, k, e, l, prev, done)
		started = append(started, k)
	}
	return stopKs, started
}

// track registers a new goroutine for k, the latest: it returns the
// previous one's channel, to wait for, and its own, to close when it ends
// (untrack). Called with s.mu held.
func (s *ledCoordinators[K, C]) track(k K) (prev <-chan struct{}, done chan struct{}) {
	if s.loading == nil {
		s.loading = map[K]chan struct{}{}
	}
	prev, done = s.loading[k], make(chan struct{})
	s.loading[k] = done
	s.loads.Add(1)
	return prev, done
}

func (s *ledCoordinators[K, C]) untrack(k K, done chan struct{}) {
	s.mu.Lock()
	if s.loading[k] == done {
		delete(s.loading, k)
	}
	s.mu.Unlock()
	close(done)
	s.loads.Done()
}

// loadLoop loads the coordinator of k for e, once k's previous load has
// ended, trying again after a failed load, until it is loaded or e is
// cancelled.
func (s *ledCoordinators[K, C]) loadLoop(ctx context.Context, k K, e *ledEntry[C], l *ledLoader[K, C], prev <-chan struct{}, done chan struct{}) {
	defer s.untrack(k, done)
	defer e.cancel()
	if prev != nil {
		select {
		case <-prev:
		case <-ctx.Done():
			return
		}
	}
	backoff := l.backoff
	for {
		c, err := l.open(ctx, k, e.epoch)
		if err == nil {
			s.mu.Lock()
			if s.closed || s.led[k] != e || ctx.Err() != nil {
				s.mu.Unlock()
				l.close(k, c) // superseded while it loaded
				return
			}
			e.c, e.loaded = c, true
			s.mu.Unlock()
			l.log.Debug("replica: "+l.what+" started", "partition", k, "leader epoch", e.epoch)
			return
		}
		if ctx.Err() != nil {
			return
		}
		lvl := slog.LevelError
		if l.level != nil {
			lvl = l.level(backoff)
		}
		l.log.Log(ctx, lvl, "replica: start "+l.what, "partition", k, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
			backoff = min(2*backoff, l.maxBackoff)
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// get looks k up in epoch: found if its coordinator loads or runs in that
// epoch, loaded (and c) once it is loaded.
func (s *ledCoordinators[K, C]) get(k K, epoch int32) (c C, found, loaded bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.led[k]; ok && e.epoch == epoch {
		return e.c, true, e.loaded
	}
	return c, false, false
}

// loaded returns the loaded coordinators, in the order of compare's keys.
func (s *ledCoordinators[K, C]) loaded(compare func(a, b K) int) []C {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := make([]K, 0, len(s.led))
	for k, e := range s.led {
		if e.loaded {
			ks = append(ks, k)
		}
	}
	slices.SortFunc(ks, compare)
	out := make([]C, len(ks))
	for i, k := range ks {
		out[i] = s.led[k].c
	}
	return out
}

// reload forgets the loaded coordinator of k and, in a goroutine, closes
// it and calls then (which syncs again, to load it anew if this member
// still leads k): the close may wait for the caller, one of the
// coordinator's own goroutines. A load of k started meanwhile waits for
// the close.
func (s *ledCoordinators[K, C]) reload(k K, l *ledLoader[K, C], then func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.led[k]
	if s.closed || !ok || !e.loaded {
		return
	}
	delete(s.led, k)
	e.cancel()
	_, done := s.track(k) // e is loaded: its load goroutine has nothing left to wait for
	go func() {
		defer s.untrack(k, done)
		l.close(k, e.c)
		then()
	}()
}

// stop ends every load and closes every coordinator, for good.
func (s *ledCoordinators[K, C]) stop(l *ledLoader[K, C]) {
	s.mu.Lock()
	s.closed = true
	led := s.led
	s.led = nil
	for _, e := range led {
		e.cancel()
	}
	s.mu.Unlock()
	s.loads.Wait()
	ks := make([]K, 0, len(led))
	for k, e := range led {
		if e.loaded {
			ks = append(ks, k)
		}
	}
	slices.SortFunc(ks, l.compare)
	for _, k := range ks {
		l.close(k, led[k].c)
	}
}
