// Package timingwheel is Strata's timer service: a hierarchical timing wheel,
// and on it the purgatory where delayed operations (long-poll fetches,
// acks=all produces) wait until they can complete or their timeout passes.
//
// # The wheel
//
// A [TimingWheel] is Kafka's design. The finest level has WheelSize buckets,
// each Tick wide, and spans Tick × WheelSize; an overflow level, whose tick is
// the whole span of the level below, is created the first time a timer does
// not fit, and so on up. A bucket is a chain of blocks of 64 pointers to its
// timers: [TimingWheel.AfterFunc] stores one (the 40-byte [Timer]s themselves
// are allocated 32 at a time), a bucket never copies itself to grow, the
// finest level hands a due bucket to the workers whole in O(1), and blocks
// are recycled through a free list rather than left to the garbage
// collector. A priority queue holds the buckets (never the timers) by
// expiration: the driver goroutine sleeps until the earliest bucket expires,
// so it wakes once per bucket that was given a timer, not once per tick.
// When a bucket of a coarse level expires, its timers are added again and
// fall into finer levels, until the finest level hands them to the workers.
//
// [Timer.Stop] is one compare-and-swap on the timer, with no lock: the timer
// is marked, and whichever comes first, Stop or a worker taking the due
// timer, wins. A stopped timer stays in its bucket, inert, until the bucket
// expires or a sweep drops it; AfterFunc sweeps once at least half of the
// timers held (and at least 1024) are stopped, so sweeps cost O(1) per Stop
// and stopped timers never outnumber pending ones by more than that. (This is
// what Go's runtime does with its own stopped timers. Kafka unlinks at once,
// from a doubly linked list, which on this path costs a lock and two cache
// misses on the neighbours.)
//
// With a 1 ms tick and 20 buckets the levels have ticks of 1 ms, 20 ms,
// 400 ms and 8 s, spanning 20 ms, 400 ms, 8 s and 160 s. A timer due at
// 8903 ms does not fit the 8 s level and waits in the fourth level's bucket
// [8000, 16000); at 8000 ms it moves, 903 ms early, to the 400 ms level's
// bucket [8800, 9200); at 8800 ms to the 20 ms level's [8900, 8920); at
// 8900 ms to the 1 ms level; it fires at 8903 ms.
//
// Guarantees:
//
//   - A timer never fires early, and less than a tick late plus scheduling
//     latency. Timers keep their exact due time (the clock is read when
//     AfterFunc is called); a bucket of a coarse level expires at its start
//     and its timers move down, while a bucket of the finest level expires
//     when its latest timer is due, so timers due within one tick fire
//     together. (Kafka fires a finest bucket at its start, up to a tick
//     early.)
//   - Callbacks run on a fixed pool of workers ([Config].Workers), never one
//     goroutine per timer. The driver only moves due timers to the workers'
//     queue, which never blocks it, so a slow callback delays other
//     callbacks (when all workers are busy) but never the clock.
//   - [TimingWheel.Stop] waits for the driver and the workers (and so for
//     the callbacks that are running); no callback starts after it returns.
//
// The core (levels, buckets, the bucket queue, advancing to a time; core.go
// and heap.go) is pure: no goroutines, no locks, no clock; time is a number
// passed in (the driver passes nanoseconds since the wheel started). The driver (timingwheel.go) owns the lock, the clock, one
// sleeping timer and the goroutines. Time comes through [clock.Clock], so a broker
// running on a fake clock runs its wheel on it too; tests also run the
// system-clock driver in virtual time with testing/synctest.
//
// # The purgatory
//
// A [Purgatory] holds operations (each an [Operation]). [Purgatory.TryCompleteElseWatch] completes
// an operation at once if it can, or else watches it under its keys (for a
// fetch, its topic-partition) and arms its timeout on the wheel;
// [Purgatory.CheckAndComplete] retries the operations watched under a key
// (for a fetch: after an append to that partition). The contract:
//
//   - Each operation ends exactly once: completed (TryComplete returned true,
//     or [Delayed.ForceComplete]), expired (its timeout passed), or cancelled
//     ([Delayed.Cancel]), whichever comes first, even when these race.
//     OnComplete runs exactly once if it completed or expired; OnExpiration
//     runs after it if it expired (Kafka's order); a cancelled operation runs
//     neither.
//   - TryComplete is never called concurrently with itself nor after the
//     operation ended, and OnComplete never concurrently with TryComplete.
//   - No wake-up is lost: TryCompleteElseWatch asks TryComplete again after
//     watching, so a change made visible before CheckAndComplete is called
//     is seen by TryCompleteElseWatch or by CheckAndComplete.
//   - Callbacks run on the goroutine that ended the operation: the caller of
//     TryCompleteElseWatch, CheckAndComplete or ForceComplete, or a worker of
//     the wheel for expiry. They must not block for long.
//   - Ended operations are purged from the watch lists: CheckAndComplete
//     compacts the key's list, and when ended entries outnumber both
//     [PurgatoryConfig].PurgeInterval and the live entries, every list is
//     swept. Empty lists are removed, so keys no longer watched cost nothing.
//   - Watch lists are split into shards by a hash of the key
//     (hash/maphash), so unrelated keys do not contend.
//
// A parked fetch, in outline (see the package examples for complete code):
//
//	op := &fetch{log: lg, offset: next, done: make(chan []Record, 1)}
//	d, _ := purgatory.TryCompleteElseWatch(op, maxWait, tp)
//	select {
//	case recs := <-op.done: // completed by an append, or expired at maxWait
//		return recs, nil
//	case <-ctx.Done():
//		if d.Cancel() {
//			return nil, ctx.Err()
//		}
//		return <-op.done, nil // it completed first
//	}
//
// and on the append path, after the new end offset is published:
//
//	purgatory.CheckAndComplete(tp)
//
// # Tests
//
// go test runs the deterministic core tests, the driver in virtual time and
// the purgatory under concurrency in well under a minute (also with -race).
// STRATA_SOAK=1 makes the randomized and concurrent tests run many more
// rounds. Benchmarks compare the wheel with time.AfterFunc in the same run:
//
//	go test -run '^$' -bench . ./timingwheel/
package timingwheel
