package timingwheel

import (
	"fmt"
	"hash/maphash"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Operation is a delayed operation: a request that waits in a [Purgatory]
// until it can complete, or until its timeout.
type Operation interface {
	// TryComplete reports whether the operation can complete now. The
	// purgatory calls it when the operation is first watched and again each
	// time CheckAndComplete is called for one of its keys, never
	// concurrently with itself and never after the operation has ended.
	// It must be quick and must not call into the purgatory.
	TryComplete() bool
	// OnComplete runs exactly once if the operation completes: when
	// TryComplete returned true, when it expires, or on ForceComplete. It
	// runs on the goroutine that completed it (for expiry, a worker of the
	// timing wheel) and never concurrently with TryComplete.
	OnComplete()
	// OnExpiration runs after OnComplete when the operation completed
	// because its timeout passed.
	OnExpiration()
}

// PurgatoryConfig configures a [Purgatory]. The zero value means the defaults.
type PurgatoryConfig struct {
	// PurgeInterval is the number of ended operations still listed under
	// some key that triggers a sweep of every watch list (and at least as
	// many as the live entries, so sweeps cost O(1) per operation over
	// time). 0 means 1000, Kafka's fetch.purgatory.purge.interval.requests.
	PurgeInterval int
	// Shards is the number of independently locked parts the watch lists are
	// split into by a hash of the key; a power of two. 0 means 512, as in
	// Kafka.
	Shards int
}

// Default purgatory settings, as in Kafka.
const (
	DefaultPurgeInterval = 1000
	DefaultShards        = 512
)

func (c PurgatoryConfig) withDefaults() PurgatoryConfig {
	if c.PurgeInterval == 0 {
		c.PurgeInterval = DefaultPurgeInterval
	}
	if c.Shards == 0 {
		c.Shards = DefaultShards
	}
	return c
}

func (c PurgatoryConfig) validate() error {
	switch {
	case c.PurgeInterval < 0:
		return fmt.Errorf("%w: negative purge interval %d", ErrInvalidConfig, c.PurgeInterval)
	case c.Shards < 0 || c.Shards > 1<<16 || bits.OnesCount(uint(c.Shards)) != 1:
		return fmt.Errorf("%w: shards %d is not a power of two up to 65536", ErrInvalidConfig, c.Shards)
	}
	return nil
}

// Purgatory holds delayed operations, each watched under one or more keys of
// type K (for a fetch, its topic-partition) and timed out by a [TimingWheel].
// Its methods are safe for concurrent use. A Purgatory starts no goroutine:
// expiry runs on the wheel's workers, everything else on its callers.
//
// The shards are allocated when the first operation is watched (64 bytes
// each, 32 KiB for Kafka's 512): a broker that never parks a fetch, such as
// a unit-test fixture, never pays for them, and CheckAndComplete before then
// is one atomic load.
type Purgatory[K comparable] struct {
	counters
	tw      *TimingWheel
	seed    maphash.Seed
	mask    uint64
	nshards int
	ready   atomic.Bool // shards is set; stored after it
	initMu  sync.Mutex  // serializes setting shards
	shards  []shard[K]  // written once, before ready; read after ready
	bufs    sync.Pool   // *[]*Delayed: CheckAndComplete's snapshots
}

// counters is the part of a Purgatory that its operations update; it is not
// generic, so Delayed need not be.
type counters struct {
	entries       atomic.Int64 // entries in watch lists, live or ended
	stale         atomic.Int64 // entries whose operation has ended
	pending       atomic.Int64 // operations watched and not yet ended
	purging       atomic.Bool
	purgeInterval int64
	purgeAll      func()
}

type shard[K comparable] struct {
	mu    sync.Mutex
	lists map[K]*watchList
	spare []*watchList // emptied lists kept for reuse
	_     [24]byte     // keep shards on separate cache lines
}

type watchList struct{ ops []*Delayed }

const (
	maxSpareLists = 4
	maxSpareCap   = 64
	maxPooledBuf  = 1 << 14
)

// NewPurgatory returns a purgatory whose operations expire on tw. tw stays
// the caller's: stop it after the last operation has ended (operations still
// pending when it stops never expire; end them with Cancel or ForceComplete).
func NewPurgatory[K comparable](tw *TimingWheel, cfg PurgatoryConfig) (*Purgatory[K], error) {
	if tw == nil {
		return nil, fmt.Errorf("%w: nil timing wheel", ErrInvalidConfig)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Purgatory[K]{
		tw:      tw,
		seed:    maphash.MakeSeed(),
		mask:    uint64(cfg.Shards - 1),
		nshards: cfg.Shards,
	}
	p.purgeInterval = int64(cfg.PurgeInterval)
	p.purgeAll = p.purge
	return p, nil
}

// Operation states. An operation ends once: the first transition out of
// pending wins, made under the operation's lock.
const (
	statePending uint32 = iota
	stateCompleted
	stateExpired
	stateCancelled
)

// Delayed is an operation in a purgatory, the handle that ends it early.
type Delayed struct {
	timer Timer
	op    Operation
	c     *counters
	mu    sync.Mutex // serialises TryComplete and the end of the operation
	state atomic.Uint32
	nkeys int32
}

// TryCompleteElseWatch completes op at once if op.TryComplete says it can
// (running OnComplete on this goroutine, and returning true). Otherwise it
// watches op under each key and arms its timeout on the wheel, then asks
// TryComplete once more, since data may have arrived while it was watching:
// from then on no CheckAndComplete for one of the keys can be missed.
//
// With no keys the operation ends only by expiry, ForceComplete or Cancel.
// The returned handle ends the operation early.
func (p *Purgatory[K]) TryCompleteElseWatch(op Operation, timeout time.Duration, keys ...K) (*Delayed, bool) {
	if op == nil {
		panic("timingwheel: TryCompleteElseWatch with nil operation")
	}
	d := &Delayed{op: op, c: &p.counters, nkeys: int32(len(keys))}
	d.mu.Lock()
	if op.TryComplete() {
		d.state.Store(stateCompleted)
		d.mu.Unlock()
		op.OnComplete()
		return d, true
	}
	for _, k := range keys {
		p.watch(k, d)
	}
	p.pending.Add(1)
	if op.TryComplete() {
		d.end(stateCompleted)
		for _, k := range keys {
			p.unwatch(k, d)
		}
		d.mu.Unlock()
		op.OnComplete()
		return d, true
	}
	p.tw.schedule(&d.timer, timeout, d)
	d.mu.Unlock()
	return d, false
}

// CheckAndComplete asks each operation watched under key whether it can
// complete now, completes those that can (running their OnComplete on this
// goroutine) and returns how many it completed. Call it after whatever the
// operations wait for has changed, such as an append to the key's partition,
// and after that change is visible to TryComplete.
func (p *Purgatory[K]) CheckAndComplete(key K) int {
	if !p.ready.Load() {
		return 0 // nothing was ever watched
	}
	s := p.shard(key)
	s.mu.Lock()
	wl := s.lists[key]
	if wl == nil {
		s.mu.Unlock()
		return 0
	}
	bp, _ := p.bufs.Get().(*[]*Delayed)
	if bp == nil {
		bp = new([]*Delayed)
	}
	// Try a snapshot, without the shard lock: TryComplete takes the
	// operation's lock, which TryCompleteElseWatch holds while it watches.
	buf := append((*bp)[:0], wl.ops...)
	s.mu.Unlock()

	n := 0
	for _, d := range buf {
		if d.state.Load() != statePending {
			continue
		}
		d.mu.Lock()
		if d.state.Load() == statePending && d.op.TryComplete() {
			d.end(stateCompleted)
			d.mu.Unlock()
			d.op.OnComplete()
			n++
			continue
		}
		d.mu.Unlock()
	}
	clear(buf)
	if cap(buf) <= maxPooledBuf {
		*bp = buf[:0]
		p.bufs.Put(bp)
	}

	s.mu.Lock()
	if wl := s.lists[key]; wl != nil {
		p.compact(s, key, wl)
	}
	s.mu.Unlock()
	p.maybePurge()
	return n
}

// Watched returns the number of entries in the watch lists: one per key of
// each watched operation, including operations that have ended but are not
// yet purged.
func (p *Purgatory[K]) Watched() int { return int(p.entries.Load()) }

// Pending returns the number of operations that are watched or timed and
// have not ended.
func (p *Purgatory[K]) Pending() int { return int(p.pending.Load()) }

// shard returns key's shard. The shards must be allocated (ready).
func (p *Purgatory[K]) shard(key K) *shard[K] {
	return &p.shards[maphash.Comparable(p.seed, key)&p.mask]
}

// allocShards allocates the shards, once.
func (p *Purgatory[K]) allocShards() {
	p.initMu.Lock()
	defer p.initMu.Unlock()
	if p.shards == nil {
		p.shards = make([]shard[K], p.nshards)
		p.ready.Store(true)
	}
}

func (p *Purgatory[K]) watch(key K, d *Delayed) {
	if !p.ready.Load() {
		p.allocShards()
	}
	s := p.shard(key)
	s.mu.Lock()
	wl := s.lists[key]
	if wl == nil {
		if n := len(s.spare); n > 0 {
			wl = s.spare[n-1]
			s.spare[n-1] = nil
			s.spare = s.spare[:n-1]
		} else {
			wl = &watchList{}
		}
		if s.lists == nil {
			s.lists = make(map[K]*watchList)
		}
		s.lists[key] = wl
	}
	wl.ops = append(wl.ops, d)
	s.mu.Unlock()
	p.entries.Add(1)
}

// unwatch removes the ended d from key's list, where it was just added.
func (p *Purgatory[K]) unwatch(key K, d *Delayed) {
	s := p.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	wl := s.lists[key]
	if wl == nil {
		return // a sweep took it already
	}
	for i := len(wl.ops) - 1; i >= 0; i-- {
		if wl.ops[i] == d {
			wl.ops = slices.Delete(wl.ops, i, i+1)
			p.entries.Add(-1)
			p.stale.Add(-1)
			break
		}
	}
	if len(wl.ops) == 0 {
		p.dropList(s, key, wl)
	}
}

// dropList removes key's empty list, keeping it for reuse if it is small.
func (p *Purgatory[K]) dropList(s *shard[K], key K, wl *watchList) {
	delete(s.lists, key)
	if len(s.spare) < maxSpareLists && cap(wl.ops) <= maxSpareCap {
		s.spare = append(s.spare, wl)
	}
}

// compact drops ended operations from wl (under s.mu) and the list itself
// once it is empty.
func (p *Purgatory[K]) compact(s *shard[K], key K, wl *watchList) {
	kept := wl.ops[:0]
	for _, d := range wl.ops {
		if d.state.Load() == statePending {
			kept = append(kept, d)
		}
	}
	removed := len(wl.ops) - len(kept)
	clear(wl.ops[len(kept):])
	wl.ops = kept
	if removed > 0 {
		p.entries.Add(-int64(removed))
		p.stale.Add(-int64(removed))
	}
	if len(kept) == 0 {
		p.dropList(s, key, wl)
	} else if cap(kept) > maxSpareCap && len(kept) < cap(kept)/4 {
		wl.ops = append([]*Delayed(nil), kept...) // give back a list that was long
	}
}

// purge sweeps every watch list.
func (p *Purgatory[K]) purge() {
	if !p.ready.Load() {
		return
	}
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		for key, wl := range s.lists {
			p.compact(s, key, wl)
		}
		s.mu.Unlock()
	}
}

// maybePurge sweeps the watch lists when ended entries outnumber both the
// purge interval and the live entries.
func (c *counters) maybePurge() {
	st := c.stale.Load()
	if st <= c.purgeInterval || st <= c.entries.Load()-st {
		return
	}
	if !c.purging.CompareAndSwap(false, true) {
		return
	}
	c.purgeAll()
	c.purging.Store(false)
}

// end moves a pending operation to state s and disarms its timer. The caller
// holds d.mu. It reports whether the operation was pending.
func (d *Delayed) end(s uint32) bool {
	if d.state.Load() != statePending {
		return false
	}
	d.state.Store(s)
	d.timer.Stop()
	d.c.stale.Add(int64(d.nkeys))
	d.c.pending.Add(-1)
	return true
}

// run is the expiry: the timer fired on a worker of the wheel.
func (d *Delayed) run() {
	d.mu.Lock()
	ok := d.end(stateExpired)
	d.mu.Unlock()
	if ok {
		d.op.OnComplete()
		d.op.OnExpiration()
		d.c.maybePurge()
	}
}

// ForceComplete completes the operation now, whether or not TryComplete
// would: it runs OnComplete on this goroutine and returns true, unless the
// operation has already ended (then it does nothing and returns false).
func (d *Delayed) ForceComplete() bool {
	d.mu.Lock()
	ok := d.end(stateCompleted)
	d.mu.Unlock()
	if ok {
		d.op.OnComplete()
		d.c.maybePurge()
	}
	return ok
}

// Cancel ends the operation without running any of its callbacks, for a
// waiter that has gone away (a consumer whose context was cancelled). It
// returns true if it ended the operation; false if the operation had already
// ended, in which case its OnComplete has run or is running.
func (d *Delayed) Cancel() bool {
	d.mu.Lock()
	ok := d.end(stateCancelled)
	d.mu.Unlock()
	if ok {
		d.c.maybePurge()
	}
	return ok
}

// Done reports whether the operation has ended: completed, expired or
// cancelled.
func (d *Delayed) Done() bool { return d.state.Load() != statePending }
