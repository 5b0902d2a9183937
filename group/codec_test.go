package group

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func unhex(t testing.TB, s string) []byte {
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	require.NoError(t, err)
	return b
}

// TestOffsetRecordGolden checks the bytes against Kafka's schema, written
// out field by field (OffsetCommitKey v1, OffsetCommitValue v3).
func TestOffsetRecordGolden(t *testing.T) {
	key, value := EncodeOffsetRecord("g1", TopicPartition{Topic: "orders", Partition: 2}, 42,
		time.UnixMilli(1700000000123))
	require.Equal(t, unhex(t, ""+
		"0001"+ // int16 version 1
		"0002 6731"+ // string "g1": int16 length, bytes
		"0006 6f7264657273"+ // string "orders"
		"00000002"), // int32 partition 2
		key)
	require.Equal(t, unhex(t, ""+
		"0003"+ // int16 version 3
		"000000000000002a"+ // int64 offset 42
		"ffffffff"+ // int32 leader epoch -1
		"0000"+ // string metadata ""
		"0000018bcfe5687b"), // int64 commit timestamp 1700000000123 ms
		value)

	g, tp, off, err := DecodeOffsetRecord(key, value)
	require.NoError(t, err)
	require.Equal(t, "g1", g)
	require.Equal(t, TopicPartition{Topic: "orders", Partition: 2}, tp)
	require.Equal(t, int64(42), off)
}

func TestOffsetRecordRoundTrip(t *testing.T) {
	long := strings.Repeat("x", MaxNameLen)
	for _, c := range []struct {
		group string
		tp    TopicPartition
		off   int64
	}{
		{"g", TopicPartition{Topic: "t", Partition: 0}, 0},
		{"group.with-dots_and_more", TopicPartition{Topic: "topic-1", Partition: 1<<31 - 1}, 1<<63 - 1},
		{long, TopicPartition{Topic: long, Partition: 7}, 123456789},
		{"ünïcödé", TopicPartition{Topic: "émoji-🙂", Partition: 3}, 9},
	} {
		key, value := EncodeOffsetRecord(c.group, c.tp, c.off, time.Unix(1, 0))
		g, tp, off, err := DecodeOffsetRecord(key, value)
		require.NoError(t, err)
		require.Equal(t, c.group, g)
		require.Equal(t, c.tp, tp)
		require.Equal(t, c.off, off)

		// Kafka's own reader (kmsg) sees the same fields.
		var k kmsg.OffsetCommitKey
		require.NoError(t, k.ReadFrom(key))
		require.Equal(t, kmsg.OffsetCommitKey{Version: 1, Group: c.group, Topic: c.tp.Topic, Partition: int32(c.tp.Partition)}, k)
		var v kmsg.OffsetCommitValue
		require.NoError(t, v.ReadFrom(value))
		require.Equal(t, int16(3), v.Version)
		require.Equal(t, c.off, v.Offset)
		require.Equal(t, int32(-1), v.LeaderEpoch)
		require.Equal(t, int64(1000), v.CommitTimestamp)
	}
}

func TestDecodeOffsetRecordOlderValues(t *testing.T) {
	key, _ := EncodeOffsetRecord("g", TopicPartition{Topic: "t", Partition: 1}, 0, time.Time{})
	for version := int16(0); version <= 4; version++ {
		v := kmsg.OffsetCommitValue{Version: version, Offset: 77, LeaderEpoch: 5, Metadata: "m", CommitTimestamp: 1, ExpireTimestamp: 2}
		_, _, off, err := DecodeOffsetRecord(key, v.AppendTo(nil))
		require.NoError(t, err, "version %d", version)
		require.Equal(t, int64(77), off)
	}
	// Key version 0 has the same layout as 1.
	k0 := kmsg.OffsetCommitKey{Version: 0, Group: "g", Topic: "t", Partition: 1}
	_, _, off, err := DecodeOffsetRecord(k0.AppendTo(nil), nil)
	require.NoError(t, err)
	require.Equal(t, int64(-1), off)
}

func TestDecodeOffsetRecordTombstone(t *testing.T) {
	key, _ := EncodeOffsetRecord("g", TopicPartition{Topic: "t", Partition: 1}, 5, time.Time{})
	for _, value := range [][]byte{nil, {}} {
		g, tp, off, err := DecodeOffsetRecord(key, value)
		require.NoError(t, err)
		require.Equal(t, "g", g)
		require.Equal(t, TopicPartition{Topic: "t", Partition: 1}, tp)
		require.Equal(t, int64(-1), off)
	}
}

func TestDecodeOffsetRecordRejects(t *testing.T) {
	key, value := EncodeOffsetRecord("g", TopicPartition{Topic: "t", Partition: 1}, 5, time.Time{})
	groupMeta := (&kmsg.GroupMetadataKey{Version: 2, Group: "g"}).AppendTo(nil)
	negPart := (&kmsg.OffsetCommitKey{Version: 1, Group: "g", Topic: "t", Partition: -1}).AppendTo(nil)
	emptyGroup := (&kmsg.OffsetCommitKey{Version: 1, Group: "", Topic: "t", Partition: 0}).AppendTo(nil)
	negOffset := (&kmsg.OffsetCommitValue{Version: 3, Offset: -1}).AppendTo(nil)
	for _, c := range []struct {
		name       string
		key, value []byte
		want       error
	}{
		{"empty key", nil, value, ErrCorruptOffsetRecord},
		{"one-byte key", key[:1], value, ErrCorruptOffsetRecord},
		{"negative key version", unhex(t, "ffff 0001 67 0001 74 00000001"), value, ErrCorruptOffsetRecord},
		{"group metadata key", groupMeta, nil, ErrNotOffsetRecord},
		{"truncated key", key[:len(key)-1], value, ErrCorruptOffsetRecord},
		{"key with trailing byte", append(key[:len(key):len(key)], 0), value, ErrCorruptOffsetRecord},
		{"null group string", unhex(t, "0001 ffff 0001 74 00000001"), value, ErrCorruptOffsetRecord},
		{"empty group", emptyGroup, value, ErrCorruptOffsetRecord},
		{"negative partition", negPart, value, ErrCorruptOffsetRecord},
		{"one-byte value", key, value[:1], ErrCorruptOffsetRecord},
		{"truncated value", key, value[:len(value)-1], ErrCorruptOffsetRecord},
		{"value with trailing byte", key, append(value[:len(value):len(value)], 0), ErrCorruptOffsetRecord},
		{"value version 5", key, append([]byte{0, 5}, value[2:]...), ErrCorruptOffsetRecord},
		{"negative value version", key, append([]byte{0xff, 0xff}, value[2:]...), ErrCorruptOffsetRecord},
		{"negative offset", key, negOffset, ErrCorruptOffsetRecord},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, tp, off, err := DecodeOffsetRecord(c.key, c.value)
			require.ErrorIs(t, err, c.want)
			require.Zero(t, g)
			require.Zero(t, tp)
			require.Zero(t, off)
		})
	}
}

// FuzzDecodeOffsetRecord: no input panics; whatever decodes is valid, and
// encodes back to the same key (and, for a version 3 value, the same value
// but for the fields Strata does not keep).
func FuzzDecodeOffsetRecord(f *testing.F) {
	key, value := EncodeOffsetRecord("g1", TopicPartition{Topic: "orders", Partition: 2}, 42, time.UnixMilli(1700000000123))
	f.Add(key, value)
	f.Add(key, []byte(nil))
	f.Add(key[:5], value)
	f.Add(key, value[:9])
	f.Add((&kmsg.GroupMetadataKey{Version: 2, Group: "g"}).AppendTo(nil), []byte{0, 3})
	f.Add(key, (&kmsg.OffsetCommitValue{Version: 4, Offset: 1, Metadata: "x"}).AppendTo(nil))
	f.Add(key, (&kmsg.OffsetCommitValue{Version: 1, Offset: 1, ExpireTimestamp: 5}).AppendTo(nil))
	f.Add([]byte{0, 1, 0x7f, 0xff}, []byte{0, 3, 0xff})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		g, tp, off, err := DecodeOffsetRecord(key, value)
		if err != nil {
			if !errors.Is(err, ErrCorruptOffsetRecord) && !errors.Is(err, ErrNotOffsetRecord) {
				t.Fatalf("error %v is neither sentinel", err)
			}
			return
		}
		if g == "" || tp.Topic == "" || len(g) > MaxNameLen || len(tp.Topic) > MaxNameLen || tp.Partition < 0 || off < -1 {
			t.Fatalf("decoded invalid %q %v %d", g, tp, off)
		}
		if (off == -1) != (len(value) == 0) {
			t.Fatalf("offset %d from a value of %d bytes", off, len(value))
		}
		k2, v2 := EncodeOffsetRecord(g, tp, max(off, 0), time.UnixMilli(0))
		if string(k2[2:]) != string(key[2:]) { // the version may be 0
			t.Fatalf("key %x re-encodes as %x", key, k2)
		}
		if len(value) > 0 && value[0] == 0 && value[1] == 3 && string(v2[2:10]) != string(value[2:10]) {
			t.Fatalf("offset of value %x re-encodes as %x", value, v2)
		}
	})
}
