package group

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Transactional offset commits (KIP-98, KIP-447), as Kafka's group
// coordinator keeps them: a transactional producer commits a group's
// offsets with TxnCommit (Kafka's TxnOffsetCommit) as part of its
// transaction. They are written to __consumer_offsets at once, as one
// transactional batch of the producer, but stay pending — Committed does
// not show them — until the transaction coordinator ends the transaction
// with CompleteTxn, which writes the COMMIT or ABORT marker after them and
// then makes them the group's committed offsets or drops them. While any
// producer has offsets of a partition pending, PendingTxn reports the
// partition (OffsetFetch with RequireStable answers it
// UNSTABLE_OFFSET_COMMIT). A plain commit of a partition made after a
// transactional one, and before its marker, wins over it: the commit that
// is later in the log stands, as in Kafka. Open replays the same rules, so
// a restart (or another coordinator) finds the pending offsets pending, the
// committed ones applied and the aborted ones gone.

var (
	// ErrProducerFenced: a transactional commit or marker of a producer
	// epoch older than the one its offsets are pending with.
	ErrProducerFenced = errors.New("group: producer fenced by a newer epoch")
	// ErrTransactionsUnsupported: the coordinator's store cannot keep
	// transactional offset commits (it is no TxnOffsetStore).
	ErrTransactionsUnsupported = errors.New("group: the offset store does not support transactions")
)

// TxnOffsetStore is an OffsetStore that keeps transactional offset commits
// and the markers that end them (logStore, over a TxnOffsetsLog, is one).
type TxnOffsetStore interface {
	OffsetStore
	// StoreTxn makes the commits of group by the producer durable as part
	// of its transaction (one transactional batch of the producer in
	// __consumer_offsets); an error means they are not to be counted on.
	StoreTxn(group string, producerID int64, producerEpoch int16, offsets map[TopicPartition]CommittedOffset) error
	// StoreTxnMarker makes the end of the producer's transaction durable:
	// its COMMIT (commit) or ABORT marker.
	StoreTxnMarker(producerID int64, producerEpoch int16, commit bool) error
}

// TxnOffsetsLog is an OffsetsLog that holds transactional offset commits:
// Open's store then is a TxnOffsetStore.
type TxnOffsetsLog interface {
	OffsetsLog
	// AppendTxn appends records as one transactional batch of the
	// producer at its epoch, and returns once durable. The log refuses an
	// epoch older than the producer's (an error matching the log's own
	// "producer fenced" sentinel).
	AppendTxn(producerID int64, producerEpoch int16, records []Record) error
	// AppendMarker appends the COMMIT (commit) or ABORT marker of the
	// producer's transaction and returns once durable.
	AppendMarker(producerID int64, producerEpoch int16, commit bool) error
}

// TxnReplayer is an OffsetsLog that replays its records with their
// batches' transactional fields. Open replays a log that is one with
// ReplayTxn (and with Replay otherwise, which must then leave markers out).
type TxnReplayer interface {
	// ReplayTxn calls fn with every record of the partition in offset
	// order, a marker as a LogRecord with Control set, and returns the
	// first error of fn or of the read. fn does not retain the record's
	// key or value.
	ReplayTxn(ctx context.Context, fn func(r LogRecord) error) error
}

// LogRecord is a record of __consumer_offsets with the fields of its
// batch that transactions need.
type LogRecord struct {
	Key, Value    []byte
	ProducerID    int64 // -1: none
	ProducerEpoch int16
	Transactional bool // a record of its producer's transaction
	// Control: a transaction marker of ProducerID (Key and Value are the
	// control record's), COMMIT if Commit, else ABORT.
	Control, Commit bool
}

// TxnCommitRequest is a transactional offset commit (Kafka's
// TxnOffsetCommit).
type TxnCommitRequest struct {
	// TransactionalID is the producer's, carried for a Kafka client's
	// request (the coordinator does not read it).
	TransactionalID string
	Group           string
	ProducerID      int64
	ProducerEpoch   int16
	// MemberID, GroupInstanceID and Generation (TxnOffsetCommit v3+,
	// KIP-447) fence a zombie member: set, they are checked as a plain
	// commit's are; unset ("", "", -1: older clients) they are not.
	MemberID        string
	GroupInstanceID string
	Generation      int32
	Offsets         map[TopicPartition]CommittedOffset
}

// pendingTxn is a producer's offsets pending in its open transaction, by
// group.
type pendingTxn struct {
	epoch  int16
	groups map[string]map[TopicPartition]pendingOffset
}

// pendingOffset is one pending transactional commit; superseded, a plain
// commit of its partition came after it, and it will not apply.
type pendingOffset struct {
	co         CommittedOffset
	superseded bool
}

// txnLock serializes the transactional calls of one producer.
type txnLock struct {
	ch    chan struct{}
	users int
}

// TxnCommit commits offsets of req.Group as part of producer
// req.ProducerID's transaction: they are made durable by the store
// (a TxnOffsetStore; ErrTransactionsUnsupported otherwise) and stay
// pending until CompleteTxn ends the transaction. The member fields, when
// set, are checked as Kafka checks them (validateOffsetCommit): an unknown
// member ErrUnknownMember, another member holding the instance id
// ErrFencedInstanceID, another generation ErrIllegalGeneration (a
// consumer-protocol group's member: its epoch, ErrStaleMemberEpoch);
// unset, or a generation below 0 while the group is empty, they pass. A
// producer epoch older than the one its offsets are pending with is
// ErrProducerFenced. Bad offsets are ErrInvalidRequest. A refused commit
// changes nothing.
func (c *Coordinator) TxnCommit(ctx context.Context, req TxnCommitRequest) error {
	if err := validGroup(req.Group); err != nil {
		return err
	}
	if req.ProducerID < 0 || req.ProducerEpoch < 0 {
		return fmt.Errorf("%w: producer id %d epoch %d", ErrInvalidRequest, req.ProducerID, req.ProducerEpoch)
	}
	if err := validOffsets(req.Offsets); err != nil {
		return err
	}
	store, err := c.txnStore()
	if err != nil {
		return err
	}
	unlockProducer, err := c.lockProducer(ctx, req.ProducerID)
	if err != nil {
		return err
	}
	defer unlockProducer()

	if err := c.lockOpen(); err != nil {
		return err
	}
	e := c.entry(req.Group)
	unlock, err := c.lockCommits(ctx, e) // after the group's plain commits: log order is apply order
	if err != nil {
		return err
	}
	defer unlock()

	if err := c.lockOpen(); err != nil {
		return err
	}
	err = c.checkTxnCommit(e, req)
	if err == nil {
		if pt := c.txns[req.ProducerID]; pt != nil && req.ProducerEpoch < pt.epoch {
			err = fmt.Errorf("%w: producer %d epoch %d, its offsets pending at epoch %d", ErrProducerFenced, req.ProducerID, req.ProducerEpoch, pt.epoch)
		}
	}
	c.mu.Unlock()
	if err != nil || len(req.Offsets) == 0 {
		return err
	}
	offsets := maps.Clone(req.Offsets)
	if store != nil {
		if err := store.StoreTxn(req.Group, req.ProducerID, req.ProducerEpoch, offsets); err != nil {
			return fmt.Errorf("group: store transactional commit of group %q by producer %d: %w", req.Group, req.ProducerID, err)
		}
	}
	c.mu.Lock()
	c.addPending(req.Group, req.ProducerID, req.ProducerEpoch, offsets)
	c.mu.Unlock()
	return nil
}

// CompleteTxn ends producer producerID's transaction in the coordinator's
// __consumer_offsets partition, as the partition leader does on the
// transaction coordinator's WriteTxnMarkers: it stores the COMMIT (commit)
// or ABORT marker, then makes the offsets the producer has pending the
// groups' committed offsets (those a later plain commit superseded
// excepted) or drops them. A producer with nothing pending gets its marker
// all the same (a retried marker is harmless). An epoch older than the one
// its offsets are pending with is ErrProducerFenced; a store error is
// returned (wrapped) and changes nothing: the caller retries.
func (c *Coordinator) CompleteTxn(ctx context.Context, producerID int64, producerEpoch int16, commit bool) error {
	if producerID < 0 || producerEpoch < 0 {
		return fmt.Errorf("%w: producer id %d epoch %d", ErrInvalidRequest, producerID, producerEpoch)
	}
	unlockProducer, err := c.lockProducer(ctx, producerID)
	if err != nil {
		return err
	}
	defer unlockProducer()
	if err := c.lockOpen(); err != nil {
		return err
	}
	pt := c.txns[producerID]
	c.mu.Unlock()
	if pt != nil && producerEpoch < pt.epoch {
		return fmt.Errorf("%w: marker of producer %d at epoch %d, its offsets pending at epoch %d", ErrProducerFenced, producerID, producerEpoch, pt.epoch)
	}
	store, err := c.txnStore()
	switch {
	case errors.Is(err, ErrTransactionsUnsupported) && pt == nil:
		return nil // nothing could be pending here
	case err != nil:
		return err
	case store != nil:
		if err := store.StoreTxnMarker(producerID, producerEpoch, commit); err != nil {
			return fmt.Errorf("group: store marker of producer %d: %w", producerID, err)
		}
	}
	if pt == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.completePending(producerID, commit)
	return nil
}

// PendingTxn returns those of tps that have transactional offsets of group
// pending (KIP-447: OffsetFetch with RequireStable answers them
// UNSTABLE_OFFSET_COMMIT), or, for tps nil, every such partition.
func (c *Coordinator) PendingTxn(group string, tps []TopicPartition) map[TopicPartition]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[TopicPartition]bool{}
	for _, pt := range c.txns {
		offs := pt.groups[group]
		if tps == nil {
			for tp := range offs {
				out[tp] = true
			}
			continue
		}
		for _, tp := range tps {
			if _, ok := offs[tp]; ok {
				out[tp] = true
			}
		}
	}
	return out
}

// validOffsets checks commits as Commit does.
func validOffsets(offsets map[TopicPartition]CommittedOffset) error {
	for tp, co := range offsets {
		if tp.Topic == "" || len(tp.Topic) > MaxNameLen || tp.Partition < 0 || int64(tp.Partition) > 1<<31-1 || co.Offset < 0 {
			return fmt.Errorf("%w: commit of offset %d for %s/%d", ErrInvalidRequest, co.Offset, tp.Topic, tp.Partition)
		}
		if len(co.Metadata) > MaxMetadataLen || co.LeaderEpoch < -1 {
			return fmt.Errorf("%w: commit for %s/%d: leader epoch %d, %d bytes of metadata (at most %d)", ErrInvalidRequest, tp.Topic, tp.Partition, co.LeaderEpoch, len(co.Metadata), MaxMetadataLen)
		}
	}
	return nil
}

// txnStore returns the store as a TxnOffsetStore: nil without a store
// (memory only), ErrTransactionsUnsupported for a store that is none.
func (c *Coordinator) txnStore() (TxnOffsetStore, error) {
	if c.cfg.Store == nil {
		return nil, nil
	}
	s, ok := c.cfg.Store.(TxnOffsetStore)
	if !ok {
		return nil, ErrTransactionsUnsupported
	}
	if ls, ok := s.(*logStore); ok && !ls.transactional() {
		return nil, ErrTransactionsUnsupported
	}
	return s, nil
}

// lockProducer takes the lock of the producer's transactional calls,
// waiting at most until ctx is done; Close waits for the holder.
func (c *Coordinator) lockProducer(ctx context.Context, id int64) (unlock func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := c.lockOpen(); err != nil {
		return nil, err
	}
	if c.txnLocks == nil {
		c.txnLocks = map[int64]*txnLock{}
	}
	l := c.txnLocks[id]
	if l == nil {
		l = &txnLock{ch: make(chan struct{}, 1)}
		c.txnLocks[id] = l
	}
	l.users++
	c.commits.Add(1)
	c.mu.Unlock()
	done := func() {
		c.mu.Lock()
		if l.users--; l.users == 0 {
			delete(c.txnLocks, id)
		}
		c.mu.Unlock()
		c.commits.Done()
	}
	return acquire(ctx, l.ch, done)
}

// checkTxnCommit checks the member fields of req. mu is held.
func (c *Coordinator) checkTxnCommit(e *entry, req TxnCommitRequest) error {
	if req.MemberID == "" && req.GroupInstanceID == "" && req.Generation < 0 {
		return nil // an older client's: nothing to check (Kafka neither)
	}
	if _, ok := c.consumer.groups[req.Group]; ok {
		_, err := c.checkConsumerCommit(req.Group, req.MemberID, req.Generation)
		return err
	}
	return e.st.checkTxnCommit(req.MemberID, req.GroupInstanceID, req.Generation)
}

// checkTxnCommit is Kafka's validateOffsetCommit for a transactional
// commit with member fields: a negative generation passes while the group
// is empty; otherwise the instance id, if any, must be held by the member,
// the member must be in the group, and the generation the group's. It
// changes nothing (a transactional commit does not renew a session, as in
// Kafka).
func (g *groupState) checkTxnCommit(member, instanceID string, generation int32) error {
	if generation < 0 && len(g.members) == 0 && g.phase == phaseEmpty {
		return nil
	}
	if instanceID != "" {
		holder, ok := g.static[instanceID]
		switch {
		case !ok:
			return fmt.Errorf("%w: no member holds instance id %q in group %q", ErrUnknownMember, instanceID, g.id)
		case holder != member:
			return fmt.Errorf("%w: member %q with instance id %q in group %q, held by %q", ErrFencedInstanceID, member, instanceID, g.id, holder)
		}
	}
	if g.members[member] == nil {
		return fmt.Errorf("%w: %q in group %q", ErrUnknownMember, member, g.id)
	}
	if generation != g.generation {
		return fmt.Errorf("%w: transactional commit from generation %d, group %q is at %d", ErrIllegalGeneration, generation, g.id, g.generation)
	}
	return nil
}

// addPending records stored transactional commits. mu is held.
func (c *Coordinator) addPending(group string, producerID int64, epoch int16, offsets map[TopicPartition]CommittedOffset) {
	if c.txns == nil {
		c.txns = map[int64]*pendingTxn{}
	}
	addPendingTo(c.txns, group, producerID, epoch, offsets)
}

func addPendingTo(txns map[int64]*pendingTxn, group string, producerID int64, epoch int16, offsets map[TopicPartition]CommittedOffset) {
	pt := txns[producerID]
	if pt == nil {
		pt = &pendingTxn{groups: map[string]map[TopicPartition]pendingOffset{}}
		txns[producerID] = pt
	}
	pt.epoch = max(pt.epoch, epoch)
	g := pt.groups[group]
	if g == nil {
		g = map[TopicPartition]pendingOffset{}
		pt.groups[group] = g
	}
	for tp, co := range offsets {
		g[tp] = pendingOffset{co: co}
	}
}

// supersedeTxn marks the pending transactional commits of group's
// partitions in offsets as superseded by a plain commit stored after them.
// mu is held.
func (c *Coordinator) supersedeTxn(group string, offsets map[TopicPartition]CommittedOffset) {
	supersede(c.txns, group, offsets)
}

func supersede[V any](txns map[int64]*pendingTxn, group string, offsets map[TopicPartition]V) {
	for _, pt := range txns {
		g := pt.groups[group]
		for tp := range offsets {
			if po, ok := g[tp]; ok {
				po.superseded = true
				g[tp] = po
			}
		}
	}
}

// completePending applies (commit) or drops the producer's pending
// commits. mu is held.
func (c *Coordinator) completePending(producerID int64, commit bool) {
	pt := c.txns[producerID]
	if pt == nil {
		return
	}
	delete(c.txns, producerID)
	if !commit {
		return
	}
	for _, g := range slices.Sorted(maps.Keys(pt.groups)) {
		kept := pt.committed(g)
		if len(kept) == 0 {
			continue
		}
		e := c.entry(g)
		e.st.applyCommitted(kept)
		c.forgetIfIdle(e)
	}
}

// committed returns group g's pending commits that a commit marker
// applies: those no plain commit superseded.
func (pt *pendingTxn) committed(g string) map[TopicPartition]CommittedOffset {
	kept := map[TopicPartition]CommittedOffset{}
	for tp, po := range pt.groups[g] {
		if !po.superseded {
			kept[tp] = po.co
		}
	}
	return kept
}

// Replay.

// addTxn applies the next record of a replay with its batch's fields: a
// transactional commit is pending, a marker completes its producer's
// pending commits, a plain commit supersedes pending ones.
func (r *replay) addTxn(rec LogRecord) error {
	switch {
	case rec.Control:
		pt := r.txns[rec.ProducerID]
		if pt == nil {
			return nil
		}
		delete(r.txns, rec.ProducerID)
		if !rec.Commit {
			return nil
		}
		for g := range pt.groups {
			for tp, co := range pt.committed(g) {
				if r.committed[g] == nil {
					r.committed[g] = map[TopicPartition]CommittedOffset{}
				}
				r.committed[g][tp] = co
			}
		}
		return nil
	case rec.Transactional && rec.ProducerID >= 0:
		g, tp, co, err := DecodeCommittedOffsetRecord(rec.Key, rec.Value)
		if errors.Is(err, ErrNotOffsetRecord) {
			return r.add(rec.Key, rec.Value) // not an offset: as any record
		}
		if err != nil {
			return err
		}
		if co.Offset < 0 {
			return nil // a tombstone is never transactional; nothing pending
		}
		addPendingTo(r.txns, g, rec.ProducerID, rec.ProducerEpoch, map[TopicPartition]CommittedOffset{tp: co})
		return nil
	}
	if g, tp, co, err := DecodeCommittedOffsetRecord(rec.Key, rec.Value); err == nil && co.Offset >= 0 {
		supersede(r.txns, g, map[TopicPartition]bool{tp: true})
	}
	return r.add(rec.Key, rec.Value)
}

// Store.

func (s *logStore) transactional() bool {
	_, ok := s.l.(TxnOffsetsLog)
	return ok
}

// StoreTxn appends the commits, one record per partition in partition
// order, as one transactional batch of the producer.
func (s *logStore) StoreTxn(group string, producerID int64, producerEpoch int16, offsets map[TopicPartition]CommittedOffset) error {
	tl, ok := s.l.(TxnOffsetsLog)
	if !ok {
		return ErrTransactionsUnsupported
	}
	now := s.clock.Now()
	recs := make([]Record, 0, len(offsets))
	for _, tp := range sortedTPs(offsets) {
		k, v := EncodeCommittedOffsetRecord(group, tp, offsets[tp], now)
		recs = append(recs, Record{Key: k, Value: v})
	}
	return tl.AppendTxn(producerID, producerEpoch, recs)
}

// StoreTxnMarker appends the producer's marker.
func (s *logStore) StoreTxnMarker(producerID int64, producerEpoch int16, commit bool) error {
	tl, ok := s.l.(TxnOffsetsLog)
	if !ok {
		return ErrTransactionsUnsupported
	}
	return tl.AppendMarker(producerID, producerEpoch, commit)
}
