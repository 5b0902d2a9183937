package log

// startCleaner starts the cleaner's goroutine, once, when the store's loop
// starts (StoreConfig.OnLoopStart): at the first append, roll or partition
// opened from disk. Records to compact get there one of those ways, so a
// broker that never holds a record (a test fixture that creates a topic and
// closes) starts no cleaner. Called before Open has made the cleaner (a
// partition opened by load), it leaves the start to cleanerReadyToStart;
// once Close has begun, it starts nothing.
func (b *Broker) startCleaner() {
	b.cleanerMu.Lock()
	defer b.cleanerMu.Unlock()
	b.cleanerWant = true
	b.startCleanerLocked()
}

// cleanerReadyToStart is called by Open once b.cleaner is made: the
// cleaner starts now if the store's loop already has.
func (b *Broker) cleanerReadyToStart() {
	b.cleanerMu.Lock()
	defer b.cleanerMu.Unlock()
	b.cleanerReady = true
	b.startCleanerLocked()
}

// startCleanerLocked starts the cleaner's goroutine if it is wanted, ready
// and not started, and the broker is not closing. Holds cleanerMu.
func (b *Broker) startCleanerLocked() {
	if !b.cleanerWant || !b.cleanerReady || b.cleanerOn {
		return
	}
	select {
	case <-b.stop:
		return
	default:
	}
	b.cleanerOn = true
	b.wg.Add(1)
	go b.cleanerLoop()
}
