package batch

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// markerHex is the commit marker of producer 0x1234 epoch 3, coordinator
// epoch 5, at 1700000000000 ms, laid out field by field from Kafka's
// RecordBatch v2, ControlRecordType key v0 and EndTransactionMarker value v0;
// the CRC (bytes 17-20) is checked separately against CRC-32C.
var markerHex = strings.Join([]string{
	"0000000000000000",  // base offset
	"00000042",          // batch length: 78 - 12
	"ffffffff",          // partition leader epoch -1
	"02",                // magic
	"00000000",          // crc (checked below)
	"0030",              // attributes: transactional | control
	"00000000",          // last offset delta
	"0000018bcfe56800",  // base timestamp
	"0000018bcfe56800",  // max timestamp
	"0000000000001234",  // producer id
	"0003",              // producer epoch
	"ffffffff",          // base sequence -1
	"00000001",          // one record
	"20",                // record length 16 (zigzag)
	"00",                // record attributes
	"00",                // timestamp delta 0
	"00",                // offset delta 0
	"08",                // key length 4
	"0000" + "0001",     // key: version 0, type COMMIT
	"0c",                // value length 6
	"0000" + "00000005", // value: version 0, coordinator epoch 5
	"00",                // no headers
}, "")

func TestAppendMarkerBytes(t *testing.T) {
	m := Marker{Commit: true, CoordinatorEpoch: 5, ProducerID: 0x1234, ProducerEpoch: 3, Timestamp: 1700000000000}
	got := AppendMarker([]byte("prefix"), m)
	require.Equal(t, "prefix", string(got[:6]))
	b := got[6:]
	require.Len(t, b, MarkerSize)
	want, err := hex.DecodeString(markerHex)
	require.NoError(t, err)
	require.Len(t, want, 78)
	crc := binary.BigEndian.Uint32(b[17:])
	require.Equal(t, crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)), crc)
	copy(want[17:21], b[17:21])
	require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(b))

	// The abort marker differs in the type and the CRC only.
	a := AppendMarker(nil, Marker{CoordinatorEpoch: 5, ProducerID: 0x1234, ProducerEpoch: 3, Timestamp: 1700000000000})
	require.Equal(t, byte(0), a[HeaderSize+8])
	require.Equal(t, b[:17], a[:17])
	require.Equal(t, b[21:HeaderSize+8], a[21:HeaderSize+8])
	require.Equal(t, b[HeaderSize+9:], a[HeaderSize+9:])
}

func TestMarkerRoundTrip(t *testing.T) {
	for _, m := range []Marker{
		{Commit: true, CoordinatorEpoch: 0, ProducerID: 0, ProducerEpoch: 0, Timestamp: 0},
		{Commit: false, CoordinatorEpoch: 7, ProducerID: 99, ProducerEpoch: 32766, Timestamp: -1},
		{Commit: true, CoordinatorEpoch: -1, ProducerID: 1 << 62, ProducerEpoch: -1, Timestamp: 1 << 50},
	} {
		b := AppendMarker(nil, m)
		// The broker assigns the offset and leader epoch outside the CRC.
		SetBaseOffset(b, 1000)
		SetPartitionLeaderEpoch(b, 4)
		got, h, err := ParseMarker(b)
		require.NoError(t, err)
		require.Equal(t, m, got)
		require.True(t, h.Control())
		require.True(t, h.Transactional())
		require.Equal(t, int64(1000), h.BaseOffset)
		require.Equal(t, int64(1000), h.LastOffset())
		require.Equal(t, int32(4), h.PartitionLeaderEpoch)
		require.Equal(t, int32(-1), h.BaseSequence)
		require.Equal(t, 0, h.Compression())
		// The batch is an ordinary valid batch to every other reader.
		_, err = Validate(b)
		require.NoError(t, err)
		n := 0
		_, err = Decode(b, func(r *Record) error {
			n++
			typ, err := ParseControlKey(r.Key)
			require.NoError(t, err)
			require.Equal(t, m.Type(), typ)
			require.Equal(t, int64(1000), r.Offset)
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}
}

// controlBatch is a control batch with the given records.
func controlBatch(records ...[]byte) []byte {
	return rawBatch(fields{attrs: 0x30, lastDelta: int32(len(records) - 1), producerID: 1, producerEpoch: 2, baseSequence: -1, leaderEpoch: -1, count: int32(len(records))}, records...)
}

func TestParseMarkerRejects(t *testing.T) {
	key := func(version, typ uint16) []byte {
		return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, version), typ)
	}
	value := func(version uint16, epoch uint32, extra ...byte) []byte {
		return append(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, version), epoch), extra...)
	}
	good := AppendMarker(nil, Marker{Commit: true, CoordinatorEpoch: 1, ProducerID: 1, ProducerEpoch: 2})
	badCRC := clone(good)
	badCRC[HeaderSize+12] ^= 1
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"data batch", build([]rec{{Timestamp: 1, Value: []byte("v")}}), ErrNotMarker},
		{"leader change", controlBatch(encRecord(0, 0, key(0, 2), []byte{0, 0})), ErrNotMarker},
		{"unknown type", controlBatch(encRecord(0, 0, key(0, 77), value(0, 1))), ErrNotMarker},
		{"short key", controlBatch(encRecord(0, 0, []byte{0, 0, 0}, value(0, 1))), ErrCorrupt},
		{"null key", controlBatch(encRecord(0, 0, nil, value(0, 1))), ErrCorrupt},
		{"negative key version", controlBatch(encRecord(0, 0, key(0xffff, 1), value(0, 1))), ErrCorrupt},
		{"short value", controlBatch(encRecord(0, 0, key(0, 1), []byte{0, 0, 0, 0, 1})), ErrCorrupt},
		{"negative value version", controlBatch(encRecord(0, 0, key(0, 0), value(0x8000, 1))), ErrCorrupt},
		{"no record", controlBatch(), ErrCorrupt},
		{"two records", controlBatch(encRecord(0, 0, key(0, 1), value(0, 1)), encRecord(0, 1, key(0, 1), value(0, 1))), ErrCorrupt},
		{"bad crc", badCRC, ErrCorrupt},
		{"torn", good[:MarkerSize-1], ErrShort},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := ParseMarker(c.b)
			require.ErrorIs(t, err, c.want)
			if c.want == ErrNotMarker {
				require.False(t, errors.Is(err, ErrCorrupt))
			}
		})
	}
}

func TestParseMarkerNewerVersions(t *testing.T) {
	// As Kafka does, a newer key or value version is read as version 0: its
	// fields are a prefix of the newer one's.
	k := []byte{0, 1, 0, 0, 0xaa, 0xbb}             // version 1, ABORT, a new field
	v := []byte{0, 3, 0, 0, 0, 9, 0xcc, 0xdd, 0xee} // version 3, epoch 9, more fields
	b := controlBatch(encRecord(0, 0, k, v))
	m, _, err := ParseMarker(b)
	require.NoError(t, err)
	require.Equal(t, Marker{Commit: false, CoordinatorEpoch: 9, ProducerID: 1, ProducerEpoch: 2}, m)
}

func TestControlTypeString(t *testing.T) {
	require.Equal(t, "COMMIT", ControlCommit.String())
	require.Equal(t, "ABORT", ControlAbort.String())
	require.Equal(t, "KRAFT_VOTERS", ControlKRaftVoters.String())
	require.Equal(t, "UNKNOWN(9)", ControlType(9).String())
}

func FuzzParseMarker(f *testing.F) {
	f.Add(AppendMarker(nil, Marker{Commit: true, CoordinatorEpoch: 1, ProducerID: 7, ProducerEpoch: 1, Timestamp: 5}))
	f.Add(AppendMarker(nil, Marker{CoordinatorEpoch: -1}))
	f.Add(controlBatch(encRecord(0, 0, []byte{0, 0, 0, 2}, []byte{0, 0})))
	for _, s := range seedBatches(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, h, err := ParseMarker(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrShort) && !errors.Is(err, ErrNotMarker) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if !h.Control() || h.ProducerID != m.ProducerID || h.ProducerEpoch != m.ProducerEpoch {
			t.Fatalf("marker %+v from header %+v", m, h)
		}
		// Re-encoding the marker gives a batch that parses to the same marker.
		again, _, err := ParseMarker(AppendMarker(nil, m))
		if err != nil || again != m {
			t.Fatalf("round trip of %+v: %+v, %v", m, again, err)
		}
	})
}
