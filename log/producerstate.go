package log

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/strata-log/strata/segment/batch"
)

// The idempotent producer's broker side, as Kafka's ProducerStateManager
// (KIP-98): per partition, for each producer id, its epoch and the metadata
// of its last 5 batches. ProducerState is a pure state machine: no IO, no
// clock, no locks. The partition's single writer drives it under its lock:
//
//	ok, err := ps.Check(pb)           // before appending
//	if err != nil { refuse the batch } // fenced, out of order, unknown producer
//	if ok.Duplicate { answer ok.FirstOffset...; append nothing }
//	append the batch at base offset B
//	ps.Update(pb, B)                   // after the append succeeded
//
// Every appended batch goes through Update (a non-idempotent one only moves
// EndOffset), so EndOffset is the offset up to which the state reflects the
// log: a snapshot is written at it, and recovery replays the log from it.
// Transaction markers go through CheckMarker and UpdateMarker; the state
// tracks each producer's open transaction and the last stable offset
// (producerstate_txn.go).
//
// The state is bounded: a producer costs about 100 bytes (230 with its 5
// batches kept); producers silent for producer.id.expiration.ms by the
// caller's clock are forgotten (Expire), and past DefaultMaxProducers a
// new producer makes the state forget the tenth of them heard of the
// longest ago, so that a flood of made-up producer ids cannot grow it
// without bound for a day.

// Errors of the idempotent producer. Test for them with errors.Is.
var (
	// ErrOutOfOrderSequence: the batch's sequence is not the next one of its
	// producer and epoch (a gap, or an old batch no longer in the 5 whose
	// metadata is kept), or a new epoch does not start at sequence 0. Kafka's
	// OUT_OF_ORDER_SEQUENCE_NUMBER.
	ErrOutOfOrderSequence = errors.New("log: out of order sequence number")
	// ErrProducerFenced: the batch's epoch is older than the producer's
	// latest: a newer instance of the producer has taken over. Kafka answers
	// INVALID_PRODUCER_EPOCH (PRODUCER_FENCED before 2.7).
	ErrProducerFenced = errors.New("log: producer fenced by a newer epoch")
	// ErrUnknownProducerID: the partition has no state for the producer (it
	// never wrote here, or its state expired) and the batch's sequence is not
	// 0, so the batches before it may be lost or duplicated. Kafka's
	// UNKNOWN_PRODUCER_ID, as brokers before 2.5 answered; see
	// ProducerState.Check. As Kafka's UnknownProducerIdException extends
	// OutOfOrderSequenceException, it matches ErrOutOfOrderSequence too
	// (test for it first where the two are told apart). A producer whose
	// earlier batches to the partition are still unanswered retries; else
	// it recovers by bumping its epoch and restarting at sequence 0.
	ErrUnknownProducerID error = unknownProducerError{}
	// ErrInvalidSequence: a batch with a producer id has a negative epoch or
	// base sequence (Kafka's INVALID_RECORD).
	ErrInvalidSequence = errors.New("log: invalid producer epoch or sequence")
)

type unknownProducerError struct{}

func (unknownProducerError) Error() string { return "log: unknown producer id" }

// Is makes ErrUnknownProducerID match ErrOutOfOrderSequence.
func (unknownProducerError) Is(target error) bool { return target == ErrOutOfOrderSequence }

// Kafka's "none" values in a batch header.
const (
	NoProducerID    int64 = -1
	noProducerEpoch int16 = -1
	noSequence      int32 = -1
)

// DefaultProducerIDExpiration is Kafka's producer.id.expiration.ms: a producer
// silent this long is forgotten.
const DefaultProducerIDExpiration = 24 * time.Hour

// producerBatchesKept is how many batches' metadata are kept per producer
// (Kafka's NUM_BATCHES_TO_RETAIN), the most a producer may have in flight.
const producerBatchesKept = 5

// ProducerBatch is what the producer state needs of a batch's header.
type ProducerBatch struct {
	ProducerID      int64 // NoProducerID for a non-idempotent batch
	Epoch           int16
	BaseSequence    int32
	LastOffsetDelta int32 // offsets in the batch - 1: a batch of n records has n-1
	// MaxTimestamp is the batch's max timestamp (ms): the producer's last
	// timestamp, from which expiration counts, as Kafka.
	MaxTimestamp int64
	// Transactional: attribute bit 4, the batch is part of its producer's
	// transaction (the first one opens it).
	Transactional bool
}

// ProducerBatchOf returns the producer fields of a batch header.
func ProducerBatchOf(h batch.Header) ProducerBatch {
	return ProducerBatch{
		ProducerID:      h.ProducerID,
		Epoch:           h.ProducerEpoch,
		BaseSequence:    h.BaseSequence,
		LastOffsetDelta: h.LastOffsetDelta,
		MaxTimestamp:    h.MaxTimestamp,
		Transactional:   h.Transactional(),
	}
}

// Idempotent reports whether the batch has a producer id.
func (b ProducerBatch) Idempotent() bool { return b.ProducerID >= 0 }

// LastSequence is the sequence of the batch's last record, wrapping after
// math.MaxInt32 to 0 as Kafka's sequences do.
func (b ProducerBatch) LastSequence() int32 {
	return incrementSequence(b.BaseSequence, b.LastOffsetDelta)
}

// incrementSequence adds inc (>= 0) to seq, wrapping past math.MaxInt32 to 0.
func incrementSequence(seq, inc int32) int32 {
	if seq > math.MaxInt32-inc {
		return inc - (math.MaxInt32 - seq) - 1
	}
	return seq + inc
}

// decrementSequence subtracts dec (>= 0) from seq (>= 0), the inverse of
// incrementSequence.
func decrementSequence(seq, dec int32) int32 {
	if seq < dec {
		return math.MaxInt32 - (dec - seq) + 1
	}
	return seq - dec
}

// inSequence reports whether next follows last.
func inSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || (next == 0 && last == math.MaxInt32)
}

// BatchMetadata is what is kept of one appended batch of a producer.
type BatchMetadata struct {
	FirstSeq, LastSeq int32
	LastOffset        int64
	OffsetDelta       int32 // LastOffset - first offset
	MaxTimestamp      int64
}

// FirstOffset is the offset of the batch's first record.
func (m BatchMetadata) FirstOffset() int64 { return m.LastOffset - int64(m.OffsetDelta) }

// producerEntry is one producer's state: 64 bytes, and 128 more once it
// has a second batch (a producer that writes once, or a flood of made-up
// producer ids, costs one allocation each).
type producerEntry struct {
	// last is the metadata of the producer's last batch in this epoch,
	// when n > 0; older holds the ones before it, oldest first, in
	// older[:n-1]: the last producerBatchesKept in all. n may be 0 for an
	// entry loaded from a Kafka snapshot that had no batch.
	last  BatchMetadata
	older *[producerBatchesKept - 1]BatchMetadata
	// lastTimestamp is the max timestamp of its last batch (the
	// producer's), from which expiration counts, as in Kafka; Expire
	// brings one ahead of its clock back to it.
	lastTimestamp int64
	// touched is the state's update count at its last batch: the order in
	// which producers were last heard of, whatever their clocks say, for
	// evicting the one silent the longest.
	touched uint64
	epoch   int16
	n       uint8
}

func (e *producerEntry) lastSeq() int32 {
	if e.n == 0 {
		return noSequence
	}
	return e.last.LastSeq
}

// batch returns the metadata of the producer's i-th kept batch, oldest
// first, i < n.
func (e *producerEntry) batch(i int) BatchMetadata {
	if i == int(e.n)-1 {
		return e.last
	}
	return e.older[i]
}

// batchList returns the kept batches, oldest first, appended to dst.
func (e *producerEntry) batchList(dst []BatchMetadata) []BatchMetadata {
	for i := range int(e.n) {
		dst = append(dst, e.batch(i))
	}
	return dst
}

func (e *producerEntry) addBatch(epoch int16, m BatchMetadata) {
	if e.epoch != epoch {
		e.epoch = epoch
		e.n = 0
	}
	if e.n > 0 {
		if e.older == nil {
			e.older = new([producerBatchesKept - 1]BatchMetadata)
		}
		if int(e.n) == producerBatchesKept {
			copy(e.older[:], e.older[1:])
			e.n--
		}
		e.older[e.n-1] = e.last
	}
	e.last = m
	e.n++
	e.lastTimestamp = m.MaxTimestamp
}

// ProducerInfo is a copy of one producer's state.
type ProducerInfo struct {
	ProducerID    int64
	Epoch         int16
	LastSequence  int32 // -1 when no batch is known
	LastTimestamp int64
	Batches       []BatchMetadata // oldest first
	// CurrentTxnFirstOffset is the first offset of the producer's open
	// transaction, -1 if none; CoordinatorEpoch the epoch of the
	// coordinator of its last marker, -1 if none (DescribeProducers).
	CurrentTxnFirstOffset int64
	CoordinatorEpoch      int32
}

// ProducerState is the idempotent-producer state of one partition. The zero
// value is not ready: use NewProducerState. It is not safe for concurrent
// use: the partition's writer owns it.
type ProducerState struct {
	producers map[int64]*producerEntry
	endOffset int64
	// txn holds the transaction fields of the producers that have any: an
	// open transaction, or the epoch of the coordinator of their last
	// marker. Idempotent producers that never used a transaction (most)
	// pay nothing for them.
	txn map[int64]txnFields
	// ongoing are the open transactions, by first offset; unreplicated
	// the completed ones whose marker is not yet below the high watermark
	// (producerstate_txn.go).
	ongoing      []OngoingTxn
	unreplicated []CompletedTxn
	// maxProducers bounds producers: a new producer past it evicts the
	// tenth of them silent the longest (evictProducers).
	maxProducers int
	updates      uint64 // count of idempotent updates: producerEntry.touched
	evicted      int64
}

// txnFields are Kafka's transaction fields of a producer's snapshot entry.
type txnFields struct {
	coordinatorEpoch int32
	txnFirstOffset   int64 // -1: no open transaction
}

// inTxn reports whether producer id has an open transaction: it is never
// expired nor evicted, as in Kafka, or the LSO would be stuck behind a
// transaction no marker could end.
func (s *ProducerState) inTxn(id int64) bool {
	t, ok := s.txn[id]
	return ok && t.txnFirstOffset >= 0
}

// noTxn is an entry's transaction fields when it has no transaction.
var noTxn = txnFields{coordinatorEpoch: -1, txnFirstOffset: -1}

func (s *ProducerState) txnOf(id int64) txnFields {
	if t, ok := s.txn[id]; ok {
		return t
	}
	return noTxn
}

// DefaultMaxProducers is how many producers a partition's state keeps at
// most. Kafka keeps every producer until producer.id.expiration.ms (a
// day); a client making up a new producer id per request would make the
// state grow without bound for that long. Past the bound the producers
// silent the longest are forgotten: one that writes again with a sequence
// other than 0 is answered ErrUnknownProducerID and starts a new epoch,
// without duplicates.
const DefaultMaxProducers = 10_000

// NewProducerState returns an empty state reflecting the log up to
// endOffset (the log start offset of an empty or fully replayed-from log).
func NewProducerState(endOffset int64) *ProducerState {
	return &ProducerState{producers: map[int64]*producerEntry{}, endOffset: endOffset, maxProducers: DefaultMaxProducers}
}

// Evicted is how many producers were forgotten since the state was made
// because the partition had DefaultMaxProducers of them.
func (s *ProducerState) Evicted() int64 { return s.evicted }

// EndOffset is the offset up to which the state reflects the log: the next
// offset of the last batch passed to Update or Replay (Kafka's map end
// offset).
func (s *ProducerState) EndOffset() int64 { return s.endOffset }

// Len is the number of producers known.
func (s *ProducerState) Len() int { return len(s.producers) }

// Producer returns a copy of the state of producer id.
func (s *ProducerState) Producer(id int64) (ProducerInfo, bool) {
	e, ok := s.producers[id]
	if !ok {
		return ProducerInfo{}, false
	}
	t := s.txnOf(id)
	return ProducerInfo{
		ProducerID:            id,
		Epoch:                 e.epoch,
		LastSequence:          e.lastSeq(),
		LastTimestamp:         e.lastTimestamp,
		Batches:               e.batchList(nil),
		CurrentTxnFirstOffset: t.txnFirstOffset,
		CoordinatorEpoch:      t.coordinatorEpoch,
	}, true
}

// Producers returns a copy of the state of every producer, by id.
func (s *ProducerState) Producers() []ProducerInfo {
	out := make([]ProducerInfo, 0, len(s.producers))
	for _, id := range slices.Sorted(maps.Keys(s.producers)) {
		info, _ := s.Producer(id)
		out = append(out, info)
	}
	return out
}

// AppendCheck is the verdict of Check on a batch that may be appended.
type AppendCheck struct {
	// Duplicate: the batch is one of the last 5 of its producer, already in
	// the log. Append nothing and answer with the offsets and timestamp it
	// got the first time, below.
	Duplicate    bool
	FirstOffset  int64
	LastOffset   int64
	MaxTimestamp int64
}

// Check decides whether batch b may be appended, as Kafka's
// findDuplicateBatch, checkProducerEpoch and checkSequence do for a client's
// batch. It changes nothing: after the batch is appended, call Update.
//
//   - No producer id: always accepted.
//   - Same epoch and the same sequence range as one of the producer's last 5
//     batches: a duplicate.
//   - An epoch older than the producer's: ErrProducerFenced.
//   - A newer epoch: accepted if it starts at sequence 0, else
//     ErrOutOfOrderSequence.
//   - The same epoch: accepted if the base sequence follows the last one
//     (math.MaxInt32 is followed by 0), else ErrOutOfOrderSequence.
//   - An unknown producer: accepted at sequence 0, else ErrUnknownProducerID.
//     Kafka brokers before 2.5 answered so (UNKNOWN_PRODUCER_ID); since
//     KIP-360 they accept any sequence from an unknown producer, trading the
//     exactly-once guarantee for availability after the state was lost.
//     Strata refuses: its state is lost only by expiration, and a refused
//     producer recovers (new epoch, sequence 0) without duplicating.
func (s *ProducerState) Check(b ProducerBatch) (AppendCheck, error) {
	_, c, err := s.check(b)
	return c, err
}

// check is Check that also returns the producer's entry (nil if none), for
// update: the append path looks a producer up once per batch.
func (s *ProducerState) check(b ProducerBatch) (*producerEntry, AppendCheck, error) {
	if !b.Idempotent() {
		return nil, AppendCheck{}, nil
	}
	if b.Epoch < 0 || b.BaseSequence < 0 || b.LastOffsetDelta < 0 {
		return nil, AppendCheck{}, fmt.Errorf("%w: producer %d epoch %d base sequence %d", ErrInvalidSequence, b.ProducerID, b.Epoch, b.BaseSequence)
	}
	e, ok := s.producers[b.ProducerID]
	if !ok || e.epoch == noProducerEpoch {
		if b.BaseSequence != 0 {
			return e, AppendCheck{}, fmt.Errorf("%w: producer %d epoch %d sends sequence %d, no state for it", ErrUnknownProducerID, b.ProducerID, b.Epoch, b.BaseSequence)
		}
		return e, AppendCheck{}, nil
	}
	if b.Epoch == e.epoch {
		last := b.LastSequence()
		for i := range int(e.n) {
			if m := e.batch(i); m.FirstSeq == b.BaseSequence && m.LastSeq == last {
				return e, AppendCheck{Duplicate: true, FirstOffset: m.FirstOffset(), LastOffset: m.LastOffset, MaxTimestamp: m.MaxTimestamp}, nil
			}
		}
	}
	switch {
	case b.Epoch < e.epoch:
		return e, AppendCheck{}, fmt.Errorf("%w: producer %d epoch %d, latest epoch %d", ErrProducerFenced, b.ProducerID, b.Epoch, e.epoch)
	case b.Epoch > e.epoch:
		if b.BaseSequence != 0 {
			return e, AppendCheck{}, fmt.Errorf("%w: producer %d new epoch %d starts at sequence %d, not 0", ErrOutOfOrderSequence, b.ProducerID, b.Epoch, b.BaseSequence)
		}
	default:
		if !inSequence(e.lastSeq(), b.BaseSequence) {
			return e, AppendCheck{}, fmt.Errorf("%w: producer %d epoch %d sends sequence %d, last appended %d", ErrOutOfOrderSequence, b.ProducerID, b.Epoch, b.BaseSequence, e.lastSeq())
		}
	}
	if !b.Transactional && s.inTxn(b.ProducerID) {
		return e, AppendCheck{}, fmt.Errorf("%w: producer %d writes outside its transaction open since offset %d", ErrInvalidTxnState, b.ProducerID, s.txn[b.ProducerID].txnFirstOffset)
	}
	return e, AppendCheck{}, nil
}

// Update records batch b, appended at firstOffset, and moves EndOffset past
// it. It does not check b: call Check first for a client's batch; recovery
// calls it (through Replay) for what is in the log, which is the truth. A
// batch without a producer id only moves EndOffset.
func (s *ProducerState) Update(b ProducerBatch, firstOffset int64) {
	var e *producerEntry
	if b.Idempotent() {
		e = s.producers[b.ProducerID]
	}
	s.update(e, b, firstOffset)
}

// update is Update with the producer's entry as check returned it (nil if
// none yet).
func (s *ProducerState) update(e *producerEntry, b ProducerBatch, firstOffset int64) {
	lastOffset := firstOffset + int64(b.LastOffsetDelta)
	s.endOffset = max(s.endOffset, lastOffset+1)
	if !b.Idempotent() {
		return
	}
	if e == nil {
		if len(s.producers) >= s.maxProducers {
			s.evictProducers()
		}
		e = &producerEntry{epoch: noProducerEpoch}
		s.producers[b.ProducerID] = e
	}
	s.updates++
	e.touched = s.updates
	e.addBatch(b.Epoch, BatchMetadata{
		FirstSeq:     b.BaseSequence,
		LastSeq:      b.LastSequence(),
		LastOffset:   lastOffset,
		OffsetDelta:  b.LastOffsetDelta,
		MaxTimestamp: b.MaxTimestamp,
	})
	if b.Transactional && !s.inTxn(b.ProducerID) {
		s.openTxn(b.ProducerID, firstOffset)
	}
}

// evictProducers forgets the tenth of the producers heard of the longest
// ago (at least one), those with an open transaction excepted:
// DefaultMaxProducers bounds the state.
func (s *ProducerState) evictProducers() {
	touched := make([]uint64, 0, len(s.producers))
	for id, e := range s.producers {
		if !s.inTxn(id) {
			touched = append(touched, e.touched)
		}
	}
	if len(touched) == 0 {
		return
	}
	slices.Sort(touched)
	below := touched[min(len(touched)-1, max(1, len(touched)/10)-1)] // evict touched <= below
	for id, e := range s.producers {
		if !s.inTxn(id) && e.touched <= below {
			delete(s.producers, id)
			delete(s.txn, id)
			s.evicted++
		}
	}
}

// Replay applies a batch header read from the log, as recovery does for the
// log after the last snapshot (Kafka's loadProducersFromRecords). A batch
// that ends at or before EndOffset is already reflected and is skipped, so
// replaying from anywhere at or before EndOffset is safe. A control batch
// only moves EndOffset here: a transaction marker is in its record, which
// ReplayBatch and ReplayBatches read.
func (s *ProducerState) Replay(h batch.Header) {
	if h.NextOffset() <= s.endOffset {
		return
	}
	b := ProducerBatchOf(h)
	if h.Control() {
		b.ProducerID = NoProducerID
	}
	s.Update(b, h.BaseOffset)
}

// ReplayBatches replays every whole batch in data, concatenated batches as a
// segment holds them, and returns how many bytes it consumed. It reads only
// the headers, checking their framing but not the CRCs: the log it reads was
// validated when appended or recovered; a transaction marker it reads
// whole (ReplayBatch). It stops without error at a batch cut short by the
// end of data (the caller reads on from the returned position); a
// malformed header or marker is ErrCorrupt.
func (s *ProducerState) ReplayBatches(data []byte) (int, error) {
	return s.ReplayBatchesTxn(data, nil)
}

// ReplayBatchesTxn is ReplayBatches calling completed, if not nil, with
// each transaction a replayed marker ended, in log order.
func (s *ProducerState) ReplayBatchesTxn(data []byte, completed func(CompletedTxn)) (int, error) {
	pos := 0
	for pos < len(data) {
		size, err := batch.PeekSize(data[pos:])
		if errors.Is(err, batch.ErrShort) || (err == nil && size > len(data)-pos) {
			return pos, nil
		}
		if err != nil {
			return pos, fmt.Errorf("log: replay producer state at byte %d: %w", pos, err)
		}
		h, err := batch.ParseHeader(data[pos:])
		if err != nil {
			return pos, fmt.Errorf("log: replay producer state at byte %d: %w", pos, err)
		}
		if h.BaseOffset < 0 || h.LastOffsetDelta < 0 {
			return pos, fmt.Errorf("log: replay producer state at byte %d: %w: offsets %d+%d", pos, ErrCorrupt, h.BaseOffset, h.LastOffsetDelta)
		}
		c, ok, err := s.ReplayBatch(data[pos:pos+size], h)
		if err != nil {
			return pos, fmt.Errorf("log: replay producer state at byte %d: %w", pos, err)
		}
		if ok && completed != nil {
			completed(c)
		}
		pos += size
	}
	return pos, nil
}

// Expire forgets the producers whose last timestamp is expiration or more
// before now (Kafka's removeExpiredProducers), and returns how many. An
// expiration <= 0 means DefaultProducerIDExpiration. A last timestamp
// ahead of now (a producer's clock, or a made-up timestamp) is brought
// back to now, so that expiration follows the clock that calls Expire:
// such a producer is forgotten once silent for expiration from then.
func (s *ProducerState) Expire(now time.Time, expiration time.Duration) int {
	if expiration <= 0 {
		expiration = DefaultProducerIDExpiration
	}
	nowMs, exp := now.UnixMilli(), expiration.Milliseconds()
	n := 0
	for id, e := range s.producers {
		if s.inTxn(id) {
			continue
		}
		e.lastTimestamp = min(e.lastTimestamp, nowMs)
		if nowMs-e.lastTimestamp >= exp {
			delete(s.producers, id)
			delete(s.txn, id)
			n++
		}
	}
	return n
}

// Clone returns a deep copy of the state, for a driver that must be able to
// go back: a follower applying batches it may have to truncate, or a test
// comparing states.
func (s *ProducerState) Clone() *ProducerState {
	c := &ProducerState{producers: maps.Clone(s.producers), endOffset: s.endOffset, txn: maps.Clone(s.txn),
		ongoing: slices.Clone(s.ongoing), unreplicated: slices.Clone(s.unreplicated),
		maxProducers: s.maxProducers, updates: s.updates, evicted: s.evicted}
	for id, e := range c.producers {
		ce := *e
		if e.older != nil {
			older := *e.older
			ce.older = &older
		}
		c.producers[id] = &ce
	}
	return c
}

// Reset forgets every producer and sets EndOffset to endOffset (Kafka's
// truncateFullyAndStartAt): for a log deleted or truncated below its
// snapshots. The state after a truncation to offset T is rebuilt from the
// newest snapshot at or below T (loadProducerStateDir) and a replay of the log
// from its offset to T; Kafka drops nothing in place either.
func (s *ProducerState) Reset(endOffset int64) {
	clear(s.producers)
	clear(s.txn)
	s.ongoing, s.unreplicated = nil, nil
	s.endOffset = endOffset
}
