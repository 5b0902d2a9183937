package txn

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/strata-log/strata/tp"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func unhex(t testing.TB, parts ...string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(parts, ""))
	require.NoError(t, err)
	return b
}

// ongoing is the metadata of the byte layouts below: producer 0x1234 epoch
// 3, 60 s timeout, Ongoing over t-0, t-2 and u-1, updated at
// 1700000000000 ms, started a second before.
func ongoing() Metadata {
	return Metadata{
		ProducerID: 0x1234, PrevProducerID: 0x1233, NextProducerID: NoProducerID,
		ProducerEpoch: 3, LastProducerEpoch: NoProducerEpoch, TimeoutMs: 60000, State: Ongoing,
		Partitions: []tp.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 2}, {Topic: "u", Partition: 1}},
		StartMs:    1699999999000, LastUpdateMs: 1700000000000, ClientTransactionVersion: 2,
	}
}

// The layouts, field by field from Kafka's TransactionLogKey.json and
// TransactionLogValue.json.
var (
	keyHex = []string{"0000", "0003", "74786e"} // version 0, "txn"
	v0Hex  = []string{
		"0000",                                           // version 0
		"0000000000001234",                               // producer id
		"0003",                                           // producer epoch
		"0000ea60",                                       // timeout 60000
		"01",                                             // Ongoing
		"00000002",                                       // two topics
		"0001", "74", "00000002", "00000000", "00000002", // "t": [0, 2]
		"0001", "75", "00000001", "00000001", // "u": [1]
		"0000018bcfe56800", // last update
		"0000018bcfe56418", // start
	}
	v1Hex = []string{
		"0001",                                         // version 1
		"0000000000001234",                             // producer id
		"0003",                                         // producer epoch
		"0000ea60",                                     // timeout
		"01",                                           // Ongoing
		"03",                                           // compact array: 2 topics
		"02", "74", "03", "00000000", "00000002", "00", // "t": [0, 2], no tags
		"02", "75", "02", "00000001", "00", // "u": [1], no tags
		"0000018bcfe56800",             // last update
		"0000018bcfe56418",             // start
		"02",                           // two tagged fields
		"00", "08", "0000000000001233", // tag 0: previous producer id
		"02", "02", "0002", // tag 2: client transaction version 2
	}
	emptyV0Hex = []string{
		"0000", "0000000000001234", "0004", "0000ea60",
		"00",               // Empty
		"ffffffff",         // null partitions
		"0000018bcfe56800", // last update
		"ffffffffffffffff", // start -1
	}
	emptyV1Hex = []string{
		"0001", "0000000000001234", "0004", "0000ea60",
		"00",                                 // Empty
		"00",                                 // null partitions
		"0000018bcfe56800",                   // last update
		"ffffffffffffffff",                   // start -1
		"01", "00", "08", "0000000000001234", // previous producer id
	}
)

func TestRecordBytes(t *testing.T) {
	require.Equal(t, unhex(t, keyHex...), EncodeKey("txn"))
	m := ongoing()
	require.Equal(t, hex.EncodeToString(unhex(t, v1Hex...)), hex.EncodeToString(EncodeValue(&m, 1)))
	v0 := m
	v0.PrevProducerID, v0.ClientTransactionVersion = NoProducerID, 0 // not in version 0
	require.Equal(t, hex.EncodeToString(unhex(t, v0Hex...)), hex.EncodeToString(EncodeValue(&m, 0)))

	empty := Metadata{ProducerID: 0x1234, PrevProducerID: 0x1234, NextProducerID: NoProducerID, ProducerEpoch: 4,
		LastProducerEpoch: NoProducerEpoch, TimeoutMs: 60000, State: Empty, StartMs: -1, LastUpdateMs: 1700000000000}
	require.Equal(t, unhex(t, emptyV0Hex...), EncodeValue(&empty, 0))
	require.Equal(t, unhex(t, emptyV1Hex...), EncodeValue(&empty, 1))
	dead := empty
	dead.State = Dead
	require.Nil(t, EncodeValue(&dead, 1), "a tombstone")

	for _, c := range []struct {
		value []byte
		want  Metadata
	}{
		{unhex(t, v1Hex...), m},
		{unhex(t, v0Hex...), v0},
		{unhex(t, emptyV1Hex...), empty},
		{unhex(t, emptyV0Hex...), withPrev(empty, NoProducerID)},
	} {
		id, got, err := DecodeRecord(unhex(t, keyHex...), c.value)
		require.NoError(t, err)
		require.Equal(t, "txn", id)
		require.Equal(t, c.want, *got)
	}
	id, got, err := DecodeRecord(EncodeKey("txn"), nil)
	require.NoError(t, err)
	require.Equal(t, "txn", id)
	require.Nil(t, got)
}

func TestRecordMatchesKmsg(t *testing.T) {
	// Kafka's reader (kmsg) sees the same fields in our bytes.
	var v kmsg.TxnMetadataValue
	require.NoError(t, v.ReadFrom(unhex(t, v1Hex...)))
	require.Equal(t, int64(0x1233), v.PreviousProducerID)
	require.Equal(t, int64(-1), v.NextProducerID)
	require.Equal(t, int16(2), v.ClientTransactionVersion)
	require.Equal(t, kmsg.TransactionState(Ongoing), v.State)
	require.Len(t, v.Topics, 2)
	// A KIP-890 NextProducerID and a tag we do not know are read (the
	// unknown one ignored, as Kafka does).
	v.NextProducerID = 77
	v.UnknownTags.Set(9, []byte{1, 2, 3})
	_, got, err := DecodeRecord(EncodeKey("x"), v.AppendTo(nil))
	require.NoError(t, err)
	require.Equal(t, int64(77), got.NextProducerID)
}

func TestRecordRoundTrip(t *testing.T) {
	for s := Empty; s <= PrepareEpochFence; s++ {
		if s == Dead {
			continue
		}
		for _, version := range []int16{0, 1} {
			m := ongoing()
			m.State = s
			if s == Empty {
				m.Partitions = nil
			}
			if version == 0 {
				m.PrevProducerID, m.NextProducerID, m.ClientTransactionVersion = NoProducerID, NoProducerID, 0
			} else {
				m.NextProducerID = 99
			}
			_, got, err := DecodeRecord(EncodeKey("id"), EncodeValue(&m, version))
			require.NoError(t, err)
			require.Equal(t, m, *got, "%v v%d", s, version)
		}
	}
	require.Equal(t, int16(0), ValueVersion(0))
	require.Equal(t, int16(1), ValueVersion(1))
	require.Equal(t, int16(1), ValueVersion(TV2))
}

func TestDecodeRecordRejects(t *testing.T) {
	m := ongoing()
	good := EncodeValue(&m, 1)
	badState := EncodeValue(&m, 1)
	badState[16] = 9
	noParts := unhex(t, emptyV1Hex...)
	noParts[16] = byte(Ongoing)
	key := EncodeKey("txn")
	cases := []struct {
		name       string
		key, value []byte
		want       error
	}{
		{"key version 1", unhex(t, "0001", "0003", "74786e"), good, ErrNotTxnRecord},
		{"key version -1", unhex(t, "ffff", "0003", "74786e"), good, ErrCorruptRecord},
		{"short key", []byte{0}, good, ErrCorruptRecord},
		{"key cut", key[:5], good, ErrCorruptRecord},
		{"key trailing", append(EncodeKey("txn"), 0), good, ErrCorruptRecord},
		{"empty id", EncodeKey(""), good, ErrCorruptRecord},
		{"value version 2", key, append([]byte{0, 2}, good[2:]...), ErrCorruptRecord},
		{"value version -1", key, append([]byte{0xff, 0xff}, good[2:]...), ErrCorruptRecord},
		{"value cut", key, good[:len(good)-1], ErrCorruptRecord},
		{"value trailing", key, append(EncodeValue(&m, 1), 0), ErrCorruptRecord},
		{"value empty", key, []byte{}, ErrCorruptRecord},
		{"unknown state", key, badState, ErrCorruptRecord},
		{"Ongoing without partitions", key, noParts, ErrCorruptRecord},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, got, err := DecodeRecord(c.key, c.value)
			require.ErrorIs(t, err, c.want)
			require.Nil(t, got)
			if c.want == ErrNotTxnRecord {
				require.False(t, errors.Is(err, ErrCorruptRecord))
			}
		})
	}
}

func FuzzDecodeRecord(f *testing.F) {
	m := ongoing()
	f.Add(EncodeKey("txn"), EncodeValue(&m, 0))
	f.Add(EncodeKey("txn"), EncodeValue(&m, 1))
	f.Add(EncodeKey("t"), []byte(nil))
	f.Add(unhex(f, keyHex...), unhex(f, emptyV1Hex...))
	f.Add([]byte{0, 1}, []byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		id, got, err := DecodeRecord(key, value)
		if err != nil {
			if !errors.Is(err, ErrCorruptRecord) && !errors.Is(err, ErrNotTxnRecord) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if got == nil {
			return
		}
		// What decodes re-encodes to a record that decodes the same.
		for _, version := range []int16{0, 1} {
			w := *got
			if version == 0 {
				w.PrevProducerID, w.NextProducerID, w.ClientTransactionVersion = NoProducerID, NoProducerID, 0
			}
			id2, again, err := DecodeRecord(EncodeKey(id), EncodeValue(&w, version))
			if err != nil || id2 != id {
				t.Fatalf("re-encoded v%d: %v", version, err)
			}
			require.Equal(t, w, *again)
		}
	})
}
