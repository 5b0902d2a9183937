package batch

import "encoding/binary"

// SetProducer writes the producer id, epoch and base sequence into the header
// of the whole batch b and recomputes its CRC, which covers those fields. An
// idempotent producer calls it to give a batch it has already built a new
// sequence (after an epoch bump, Kafka's ProducerBatch.resetProducerState).
// It panics if len(b) < HeaderSize.
func SetProducer(b []byte, id int64, epoch int16, baseSequence int32) {
	_ = b[HeaderSize-1]
	be := binary.BigEndian
	be.PutUint64(b[offProducerID:], uint64(id))
	be.PutUint16(b[offProducerEpoch:], uint16(epoch))
	be.PutUint32(b[offBaseSequence:], uint32(baseSequence))
	SetCRC(b)
}
