package log

import (
	"errors"
	"fmt"
	"time"

	"github.com/strata-log/strata/clock"
	"github.com/strata-log/strata/segment"
)

// startLoop starts the background loop, once, when a partition first has
// something for it to do: an append (or a move of its high watermark), a
// roll, or records opened from disk. Until then there is nothing to flush,
// retain, expire or checkpoint that Close does not write, so a store that
// never holds a record (a test fixture that creates a topic and closes)
// starts no goroutine. It does not start once Close has begun. It takes
// neither s.mu nor a partition's mu, and may be called holding either.
// The loop's timer is made here, not in the goroutine, so that a fake
// clock advanced just after the call that started it finds the timer.
func (s *Store) startLoop() {
	if s.loopOn.Load() {
		return
	}
	s.loopMu.Lock()
	defer s.loopMu.Unlock()
	if s.loopOn.Load() || s.loopStopped {
		return
	}
	now := s.cfg.Clock.Now()
	// The first round runs at once (the wake below) and arms the timer for
	// what the partitions need; until then it waits for the nearest
	// store-wide interval.
	timer := s.cfg.Clock.NewTimer(min(s.cfg.RetentionCheckInterval, s.cfg.CheckpointInterval, s.cfg.ProducerIDExpirationCheckInterval))
	s.wg.Add(1)
	go s.loop(now, timer)
	s.loopOn.Store(true)
	if s.cfg.OnLoopStart != nil {
		s.cfg.OnLoopStart()
	}
	select {
	case s.wakeCh <- struct{}{}:
	default:
	}
}

// stopLoop keeps the loop from starting and, if it runs, stops it and
// waits for it.
func (s *Store) stopLoop() {
	s.loopMu.Lock()
	s.loopStopped = true
	s.loopMu.Unlock()
	close(s.stop)
	s.wg.Wait()
}

// notify is every partition's appended hook: the loop starts with the
// first append, then the owner's Notify runs.
func (s *Store) notify(p *Partition) {
	s.startLoop()
	if n := s.cfg.Notify; n != nil {
		n(p)
	}
}

// loop is the store's one background goroutine: it fsyncs sealed segments
// after a roll, flushes partitions by FlushInterval, writes the checkpoints
// every CheckpointInterval, runs retention every RetentionCheckInterval and
// expires idle producers every ProducerIDExpirationCheckInterval, each
// interval counted from now, when startLoop started it.
func (s *Store) loop(now time.Time, timer clock.Timer) {
	defer s.wg.Done()
	lastRetention, lastCheckpoint, lastExpire := now, now, now
	defer timer.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.wakeCh:
		case <-timer.C():
		}
		s.roundMu.Lock()
		now = s.cfg.Clock.Now()
		s.flushDue(now)
		if now.Sub(lastRetention) >= s.cfg.RetentionCheckInterval {
			lastRetention = now
			s.enforceRetention(now)
		}
		if now.Sub(lastExpire) >= s.cfg.ProducerIDExpirationCheckInterval {
			lastExpire = now
			s.expireProducers(now)
		}
		if now.Sub(lastCheckpoint) >= s.cfg.CheckpointInterval {
			lastCheckpoint = now
			if err := s.writeCheckpoints(); err != nil {
				s.logger.Error("checkpoint failed", "err", err)
			}
		}
		s.roundMu.Unlock()
		timer.Reset(s.nextWake(now, lastRetention, lastCheckpoint, lastExpire))
	}
}

// nextWake is how long the loop may sleep before something is due.
func (s *Store) nextWake(now, lastRetention, lastCheckpoint, lastExpire time.Time) time.Duration {
	d := min(lastRetention.Add(s.cfg.RetentionCheckInterval).Sub(now),
		lastCheckpoint.Add(s.cfg.CheckpointInterval).Sub(now),
		lastExpire.Add(s.cfg.ProducerIDExpirationCheckInterval).Sub(now))
	for _, p := range s.Partitions() {
		if fi := p.config().FlushInterval; fi > 0 {
			d = min(d, time.Unix(0, p.lastFlush.Load()).Add(fi).Sub(now))
		}
	}
	return max(d, time.Millisecond)
}

// flushDue flushes partitions with a sealed segment to sync and those whose
// FlushInterval has passed with records unflushed.
func (s *Store) flushDue(now time.Time) {
	for _, p := range s.Partitions() {
		due := p.needFlush.Load()
		if fi := p.config().FlushInterval; fi > 0 && p.RecoveryPoint() < p.EndOffset() &&
			now.Sub(time.Unix(0, p.lastFlush.Load())) >= fi {
			due = true
		}
		if !due {
			continue
		}
		if err := p.Flush(); err != nil && !isClosed(err) {
			s.logger.Error("flush failed", "partition", p.String(), "err", err)
		}
	}
}

// expireProducers forgets, in every partition, the idempotent producers
// silent for its ProducerIDExpiration (Kafka's removeExpiredProducers).
func (s *Store) expireProducers(now time.Time) {
	for _, p := range s.Partitions() {
		if n := p.expireProducers(now); n > 0 {
			s.logger.Info("expired producers", "partition", p.String(), "producers", n)
		}
	}
}

// enforceRetention deletes old segments of every partition and, if any were,
// records the new log start offsets.
func (s *Store) enforceRetention(now time.Time) {
	deleted := 0
	for _, p := range s.Partitions() {
		n, err := p.enforceRetention(now)
		if err != nil && !isClosed(err) {
			s.logger.Error("retention failed", "partition", p.String(), "err", err)
		}
		deleted += n
	}
	if deleted > 0 {
		if err := s.writeCheckpoints(); err != nil {
			s.logger.Error("checkpoint failed", "err", err)
		}
	}
}

// enforceRetention deletes the oldest segments that are past RetentionTime
// (by their newest timestamp) or that put the partition over RetentionBytes,
// Kafka's rules; never the active segment. The log start offset moves to the
// first remaining segment. It returns how many segments it deleted.
func (p *Partition) enforceRetention(now time.Time) (int, error) {
	if p.config().Cleanup == CleanupCompact {
		return 0, nil
	}
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		return 0, p.closedErr()
	}
	segs := *p.segs.Load()
	k := 0
	if rt := p.config().RetentionTime; rt > 0 {
		limit := now.Add(-rt).UnixMilli()
		for k < len(segs)-1 && segs[k].MaxTimestamp() < limit {
			k++
		}
	}
	if rb := p.config().RetentionBytes; rb > 0 {
		var total int64
		for _, s := range segs {
			total += s.Size()
		}
		diff := total - rb
		for i := 0; i < len(segs)-1 && diff-segs[i].Size() >= 0; i++ {
			diff -= segs[i].Size()
			k = max(k, i+1)
		}
	}
	// Kafka's rule: only records below the high watermark are deleted.
	for k > 0 && segs[k].BaseOffset() > p.hw.Load() {
		k--
	}
	if k == 0 {
		p.mu.Unlock()
		return 0, nil
	}
	kept := append([]*segment.Segment(nil), segs[k:]...)
	if start := kept[0].BaseOffset(); start > p.start.Load() {
		p.start.Store(start)
	}
	p.segs.Store(&kept)
	// The epochs wholly below the new start go; the cache is checkpointed
	// after the segments are out of the list (a crash before that leaves
	// epochs below the start, which open drops).
	var epochErr error
	if c, changed := p.loadEpochs().truncateFromStart(p.start.Load()); changed {
		epochErr = p.storeEpochs(c)
	}
	// So do the producer snapshots below the start (the directory sync
	// below makes it durable; one left by a crash is harmless). The
	// producers themselves stay (KIP-360): their records may be gone, their
	// sequences are not.
	if err := p.removeSnapshotsBelow(p.start.Load()); err != nil && epochErr == nil {
		epochErr = err
	}
	p.mu.Unlock()

	// The segments are out of the list: removing their files (readers that
	// hold one keep it open) and syncing the directory need no lock.
	first := epochErr
	for _, s := range segs[:k] {
		if err := s.Delete(); err != nil && first == nil {
			first = err
		}
	}
	if err := p.fs.SyncDir(p.dir); err != nil && first == nil {
		first = fmt.Errorf("log: sync dir %s: %w", p.dir, err)
	}
	p.logger.Info("retention deleted segments", "partition", p.String(), "segments", k, "start", p.start.Load())
	return k, first
}

func isClosed(err error) bool { return errors.Is(err, ErrClosed) }
