package txn

import (
	"errors"
	"fmt"
	"slices"

	"github.com/strata-log/strata/tp"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The records of __transaction_state, as Kafka writes them (its
// TransactionLogKey.json and TransactionLogValue.json; kmsg's TxnMetadataKey
// and TxnMetadataValue encode them). Integers are big-endian.
//
// Key, version 0 (the only one):
//
//	version          int16   0 (Kafka 4 calls it the coordinator record type)
//	transactionalId  string  int16 length, bytes
//
// Value, version 0 (transaction.version 0) or 1 (flexible, from
// transaction.version 1):
//
//	version                   int16
//	producerId                int64
//	producerEpoch             int16
//	transactionTimeoutMs      int32
//	transactionStatus         int8    the State
//	transactionPartitions     array, null in state Empty:
//	    topic                 string
//	    partitionIds          array of int32
//	    (v1: tagged fields of the entry, none)
//	lastUpdateTimestampMs     int64
//	startTimestampMs          int64   -1 when no transaction is open
//	(v1: tagged fields)
//	    tag 0 previousProducerId        int64, omitted when -1
//	    tag 1 nextProducerId            int64, omitted when -1 (KIP-890)
//	    tag 2 clientTransactionVersion  int16, omitted when 0 (KIP-890)
//
// In version 0 a string is an int16 length and an array an int32 count (-1:
// null); in version 1 a string is a uvarint length+1, an array a uvarint
// count+1 (0: null), and the tagged fields a uvarint count then, for each in
// increasing tag order, uvarint tag, uvarint size, the field. The value of
// an expired transactional id is null: a tombstone.

// ValueVersion returns the value version Kafka writes at transaction
// version tv (its TransactionVersion.transactionLogValueVersion).
func ValueVersion(tv int16) int16 {
	if tv >= 1 {
		return 1
	}
	return 0
}

var (
	// ErrCorruptRecord: a record of __transaction_state that does not
	// decode: short, with trailing bytes, an unknown value version or
	// state, or fields out of range.
	ErrCorruptRecord = errors.New("txn: corrupt __transaction_state record")
	// ErrNotTxnRecord: a key of another version (Kafka's UnknownKeyVersion):
	// a record a newer coordinator wrote; loading skips it.
	ErrNotTxnRecord = errors.New("txn: not a transaction metadata record")
)

// EncodeKey returns the key of id's record.
func EncodeKey(id string) []byte {
	k := kmsg.TxnMetadataKey{Version: 0, TransactionalID: id}
	return k.AppendTo(nil)
}

// EncodeValue returns the value of m's record at the given version (0 or
// 1, see ValueVersion); nil for state Dead (a tombstone). Partition numbers
// must fit an int32.
func EncodeValue(m *Metadata, version int16) []byte {
	if m.State == Dead {
		return nil
	}
	v := kmsg.NewTxnMetadataValue()
	v.Version = version
	v.ProducerID = m.ProducerID
	v.ProducerEpoch = m.ProducerEpoch
	v.TimeoutMillis = m.TimeoutMs
	v.State = kmsg.TransactionState(m.State)
	if m.State != Empty {
		// Kafka writes null for Empty, and an array (maybe empty) otherwise.
		v.Topics = []kmsg.TxnMetadataValueTopic{}
		for _, p := range m.Partitions {
			if n := len(v.Topics); n == 0 || v.Topics[n-1].Topic != p.Topic {
				v.Topics = append(v.Topics, kmsg.TxnMetadataValueTopic{Topic: p.Topic})
			}
			t := &v.Topics[len(v.Topics)-1]
			t.Partitions = append(t.Partitions, int32(p.Partition))
		}
	}
	v.LastUpdateTimestamp = m.LastUpdateMs
	v.StartTimestamp = m.StartMs
	if version >= 1 {
		v.PreviousProducerID = m.PrevProducerID
		v.NextProducerID = m.NextProducerID
		v.ClientTransactionVersion = m.ClientTransactionVersion
	}
	return v.AppendTo(nil)
}

// DecodeRecord decodes a record of __transaction_state: the transactional
// id and its metadata, nil for a tombstone (a nil value). A key of another
// version is ErrNotTxnRecord; anything malformed is ErrCorruptRecord. The
// metadata's LastProducerEpoch is NoProducerEpoch (it is not stored).
func DecodeRecord(key, value []byte) (string, *Metadata, error) {
	if len(key) < 2 {
		return "", nil, fmt.Errorf("%w: key of %d bytes", ErrCorruptRecord, len(key))
	}
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(key); err != nil {
		return "", nil, fmt.Errorf("%w: key: %v", ErrCorruptRecord, err)
	}
	switch {
	case k.Version < 0:
		return "", nil, fmt.Errorf("%w: key version %d", ErrCorruptRecord, k.Version)
	case k.Version > 0:
		return "", nil, fmt.Errorf("%w: key version %d", ErrNotTxnRecord, k.Version)
	case len(key) != 2+2+len(k.TransactionalID):
		return "", nil, fmt.Errorf("%w: key of %d bytes has trailing bytes", ErrCorruptRecord, len(key))
	case k.TransactionalID == "":
		return "", nil, fmt.Errorf("%w: empty transactional id", ErrCorruptRecord)
	}
	if value == nil {
		return k.TransactionalID, nil, nil
	}
	m, err := decodeValue(value)
	if err != nil {
		return "", nil, fmt.Errorf("transactional id %q: %w", k.TransactionalID, err)
	}
	return k.TransactionalID, m, nil
}

func decodeValue(value []byte) (*Metadata, error) {
	if len(value) < 2 {
		return nil, fmt.Errorf("%w: value of %d bytes", ErrCorruptRecord, len(value))
	}
	v := kmsg.NewTxnMetadataValue()
	if err := v.ReadFrom(value); err != nil {
		return nil, fmt.Errorf("%w: value: %v", ErrCorruptRecord, err)
	}
	if v.Version < 0 || v.Version > 1 {
		return nil, fmt.Errorf("%w: value version %d", ErrCorruptRecord, v.Version)
	}
	if n := len(v.AppendTo(nil)); n != len(value) {
		// kmsg reads past nothing but does not notice bytes left over.
		return nil, fmt.Errorf("%w: value of %d bytes, its fields take %d", ErrCorruptRecord, len(value), n)
	}
	state := State(v.State)
	switch {
	case !state.Valid():
		return nil, fmt.Errorf("%w: state %d", ErrCorruptRecord, v.State)
	case v.ProducerID < 0 || v.ProducerEpoch < 0:
		return nil, fmt.Errorf("%w: producer %d epoch %d", ErrCorruptRecord, v.ProducerID, v.ProducerEpoch)
	case v.TimeoutMillis <= 0:
		return nil, fmt.Errorf("%w: transaction timeout %d ms", ErrCorruptRecord, v.TimeoutMillis)
	case state != Empty && v.Topics == nil:
		return nil, fmt.Errorf("%w: state %v without partitions", ErrCorruptRecord, state)
	}
	m := &Metadata{
		ProducerID:               v.ProducerID,
		PrevProducerID:           v.PreviousProducerID,
		NextProducerID:           v.NextProducerID,
		ProducerEpoch:            v.ProducerEpoch,
		LastProducerEpoch:        NoProducerEpoch,
		TimeoutMs:                v.TimeoutMillis,
		State:                    state,
		StartMs:                  v.StartTimestamp,
		LastUpdateMs:             v.LastUpdateTimestamp,
		ClientTransactionVersion: v.ClientTransactionVersion,
	}
	if state == Empty {
		return m, nil // Kafka ignores the partitions of an Empty record
	}
	for _, t := range v.Topics {
		if t.Topic == "" {
			return nil, fmt.Errorf("%w: empty topic name", ErrCorruptRecord)
		}
		for _, p := range t.Partitions {
			if p < 0 {
				return nil, fmt.Errorf("%w: partition %d of %q", ErrCorruptRecord, p, t.Topic)
			}
			m.Partitions = append(m.Partitions, tp.TopicPartition{Topic: t.Topic, Partition: int(p)})
		}
	}
	slices.SortFunc(m.Partitions, tp.Compare)
	m.Partitions = slices.Compact(m.Partitions)
	return m, nil
}
