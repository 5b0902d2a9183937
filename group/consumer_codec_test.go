package group

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group/assign"
)

// testIDs derives a topic's id from its name, as Strata's Kafka server
// does, and knows every name it derived.
type testIDs struct{ names map[[16]byte]string }

func newTestIDs() *testIDs { return &testIDs{names: map[[16]byte]string{}} }

func (ids *testIDs) ID(name string) [16]byte {
	sum := sha256.Sum256([]byte(name))
	var id [16]byte
	copy(id[:], sum[:])
	ids.names[id] = name
	return id
}

func (ids *testIDs) Name(id [16]byte) (string, bool) {
	n, ok := ids.names[id]
	return n, ok
}

// unhexIDs reads hex with spaces; "{a}" stands for the id of topic a.
func unhexIDs(t *testing.T, ids *testIDs, s string) []byte {
	var b []byte
	for _, f := range strings.Fields(s) {
		if strings.HasPrefix(f, "{") {
			id := ids.ID(strings.Trim(f, "{}"))
			b = append(b, id[:]...)
			continue
		}
		x, err := hex.DecodeString(f)
		require.NoError(t, err, f)
		b = append(b, x...)
	}
	return b
}

// TestConsumerRecordBytes checks each record against its layout in
// Kafka's JSON schemas (group-coordinator/src/main/resources/common/
// message/ConsumerGroup*.json): key version = record type, value version
// 0, flexible fields, an empty tagged field section.
func TestConsumerRecordBytes(t *testing.T) {
	ids := newTestIDs()
	sub := subscription{clientID: "c", clientHost: "h", topics: []string{"a"}, rebalanceTimeout: 5 * time.Second, assignor: "range"}
	static := subscription{instanceID: "i", rack: "r", clientID: "c", clientHost: "h", topics: []string{}, regex: "a.*", rebalanceTimeout: -1}
	cur := currentAssignment{epoch: 11, prevEpoch: 10, state: memberUnrevoked, assigned: pp("a:0,1"), revoking: pp("a:2")}
	cases := []struct {
		name       string
		rec        cgRec
		key, value string
	}{{
		"ConsumerGroupMetadata", cgRec{kind: recGroupEpoch, epoch: 10},
		"0003 0001 67", "0000 0000000a 00",
	}, {
		"ConsumerGroupPartitionMetadata", cgRec{kind: recPartitionMeta, topics: map[string]assign.Topic{"a": {Partitions: 2}, "b": {Partitions: 1, Racks: [][]string{{"r1", "r2"}}}}},
		"0004 0001 67", "0000 03 {a} 02 61 00000002 01 00 {b} 02 62 00000001 02 00000000 03 03 7231 03 7232 00 00 00",
	}, {
		"ConsumerGroupMemberMetadata", cgRec{kind: recMember, member: "m", sub: &sub},
		"0005 0001 67 0001 6d", "0000 00 00 02 63 02 68 02 02 61 00 00001388 06 72616e6765 00",
	}, {
		"ConsumerGroupMemberMetadata, static, regex", cgRec{kind: recMember, member: "m", sub: &static},
		"0005 0001 67 0001 6d", "0000 02 69 02 72 02 63 02 68 01 04 612e2a ffffffff 00 00",
	}, {
		"ConsumerGroupTargetAssignmentMetadata", cgRec{kind: recTargetMeta, epoch: 11},
		"0006 0001 67", "0000 0000000b 00",
	}, {
		"ConsumerGroupTargetAssignmentMember", cgRec{kind: recTargetMember, member: "m", partitions: pp("b:3 a:1")},
		"0007 0001 67 0001 6d", "0000 03 {a} 02 00000001 00 {b} 02 00000003 00 00",
	}, {
		"ConsumerGroupCurrentMemberAssignment", cgRec{kind: recCurrent, member: "m", current: &cur},
		"0008 0001 67 0001 6d", "0000 0000000b 0000000a 01 02 {a} 03 00000000 00000001 00 02 {a} 02 00000002 00 00",
	}, {
		"ConsumerGroupRegularExpression", cgRec{kind: recRegex, regex: "a.*", regexTopics: []string{"ab"}, version: 7, at: time.UnixMilli(1000).UTC()},
		"0010 0001 67 0003 612e2a", "0000 02 03 6162 0000000000000007 00000000000003e8 00",
	}, {
		"a member tombstone", cgRec{kind: recCurrent, member: "m", tombstone: true},
		"0008 0001 67 0001 6d", "",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, v := encodeConsumerRecord("g", tc.rec, ids)
			require.Equal(t, hex.EncodeToString(unhexIDs(t, ids, tc.key)), hex.EncodeToString(k))
			if tc.value == "" {
				require.Nil(t, v)
			} else {
				require.Equal(t, hex.EncodeToString(unhexIDs(t, ids, tc.value)), hex.EncodeToString(v))
			}
			g, back, err := decodeConsumerRecord(k, v, ids.Name)
			require.NoError(t, err)
			require.Equal(t, "g", g)
			k2, v2 := encodeConsumerRecord("g", back, ids)
			require.Equal(t, k, k2)
			require.Equal(t, v, v2, "decode then encode gives the same bytes")
		})
	}
}

func TestConsumerRecordCorrupt(t *testing.T) {
	ids := newTestIDs()
	cur := currentAssignment{epoch: 11, prevEpoch: 10, state: memberStable, assigned: pp("a:0,1"), revoking: assign.Partitions{}}
	k, v := encodeConsumerRecord("g", cgRec{kind: recCurrent, member: "m", current: &cur}, ids)

	// Every strict prefix of the value and of the key is corrupt.
	for i := range v {
		_, _, err := decodeConsumerRecord(k, v[:i], ids.Name)
		require.ErrorIs(t, err, ErrCorruptOffsetRecord, "value prefix of %d bytes", i)
	}
	for i := range k {
		_, _, err := decodeConsumerRecord(k[:i], v, ids.Name)
		require.ErrorIs(t, err, ErrCorruptOffsetRecord, "key prefix of %d bytes", i)
	}
	_, _, err := decodeConsumerRecord(k, append(bytes.Clone(v), 0), ids.Name)
	require.ErrorIs(t, err, ErrCorruptOffsetRecord, "trailing byte")
	_, _, err = decodeConsumerRecord(append(bytes.Clone(k), 0), v, ids.Name)
	require.ErrorIs(t, err, ErrCorruptOffsetRecord, "trailing key byte")
	bad := bytes.Clone(v)
	bad[1] = 1
	_, _, err = decodeConsumerRecord(k, bad, ids.Name)
	require.ErrorIs(t, err, ErrCorruptOffsetRecord, "value version 1")
	_, _, err = decodeConsumerRecord(k, v, func([16]byte) (string, bool) { return "", false })
	require.ErrorIs(t, err, ErrCorruptOffsetRecord, "unknown topic id")
	neg := bytes.Clone(v)
	copy(neg[len(neg)-10:], []byte{0xff, 0xff, 0xff, 0xff})
	_, _, err = decodeConsumerRecord(k, neg, ids.Name)
	require.ErrorIs(t, err, ErrCorruptOffsetRecord, "negative partition")

	// Other records of __consumer_offsets are not consumer group records.
	for _, key := range [][]byte{EncodeGroupMetadataKey("g"), {0, 1, 0, 1, 'g', 0, 1, 't', 0, 0, 0, 0}, {0, 9, 0, 1, 'g'}} {
		_, _, err := decodeConsumerRecord(key, nil, ids.Name)
		require.ErrorIs(t, err, errNotConsumerRecord)
	}
}

// TestConsumerRecordsReplay runs random groups (TestConsumerRandom's
// clients) and replays the bytes of every record they wrote: the groups
// come back as they were.
func TestConsumerRecordsReplay(t *testing.T) {
	for run := range 10 {
		h := newCGHarness(t, consumerConfig{}, newImage(map[string]int{"a": 4, "b": 3, "logs-1": 2}))
		c := newClientModel(h)
		c.join("m1", "a", "b")
		c.join("m2", "a")
		re := "logs-.*"
		ev := cgHeartbeat{member: "m3", rebalanceTimeout: time.Second, regex: &re, owned: pp(""), instanceID: "i3", rack: "r"}
		resp, err := h.hb(ev)
		require.NoError(t, err)
		c.answer("m3", resp)
		for range run {
			c.settle()
			h.image.set("logs-2", 1+run)
			require.NoError(t, c.beat("m1"))
		}
		ids := newTestIDs()
		replay := newConsumerReplay(consumerConfig{}, ids)
		for _, r := range h.records {
			k, v := encodeConsumerRecord("g", r, ids)
			require.NoError(t, replay.add(k, v))
		}
		require.Equal(t, snapshotCG(h.g), snapshotCG(replay.groups["g"]), "run %d", run)

		// A coordinator that knows none of the ids learns them from the
		// partition metadata records, which precede their use.
		blind := newConsumerReplay(consumerConfig{}, newTestIDs())
		for _, r := range h.records {
			k, v := encodeConsumerRecord("g", r, ids)
			require.NoError(t, blind.add(k, v))
		}
		require.Equal(t, snapshotCG(h.g), snapshotCG(blind.groups["g"]), "run %d", run)
	}
}

func FuzzDecodeConsumerRecord(f *testing.F) {
	ids := newTestIDs()
	sub := subscription{instanceID: "i", clientID: "c", clientHost: "h", topics: []string{"a", "b"}, regex: "x", rebalanceTimeout: time.Second, assignor: "uniform"}
	cur := currentAssignment{epoch: 3, prevEpoch: 2, state: memberUnreleased, assigned: pp("a:0,1 b:2"), revoking: pp("a:5")}
	for _, r := range []cgRec{
		{kind: recGroupEpoch, epoch: 4},
		{kind: recPartitionMeta, topics: map[string]assign.Topic{"a": {Partitions: 6, Racks: [][]string{{"r"}}}}},
		{kind: recMember, member: "m", sub: &sub},
		{kind: recTargetMeta, epoch: 4},
		{kind: recTargetMember, member: "m", partitions: pp("a:1 b:0")},
		{kind: recCurrent, member: "m", current: &cur},
		{kind: recRegex, regex: "x", regexTopics: []string{"xa"}, version: 1, at: time.UnixMilli(5).UTC()},
		{kind: recMember, member: "m", tombstone: true},
	} {
		k, v := encodeConsumerRecord("g", r, ids)
		f.Add(k, v)
	}
	f.Fuzz(func(t *testing.T, key, value []byte) {
		g, r, err := decodeConsumerRecord(key, value, ids.Name)
		if err != nil {
			return
		}
		// What decodes encodes to bytes that decode to the same record.
		k2, v2 := encodeConsumerRecord(g, r, ids)
		g2, r2, err := decodeConsumerRecord(k2, v2, ids.Name)
		require.NoError(t, err)
		require.Equal(t, g, g2)
		k3, v3 := encodeConsumerRecord(g2, r2, ids)
		require.Equal(t, k2, k3)
		require.Equal(t, v2, v3)
		// And applying it to a group never panics.
		newConsumerGroup(g, consumerConfig{}).apply(r)
	})
}
