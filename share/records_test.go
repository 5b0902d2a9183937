package share

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"testing"
)

func TestRecordsRoundTrip(t *testing.T) {
	k := stateKey{group: "g1", topicID: [16]byte{1, 2, 3}, partition: 7}
	for _, kind := range []int16{recSnapshot, recUpdate} {
		v := stateValue{snapshotEpoch: 3, leaderEpoch: -1, start: 42, batches: []StateBatch{
			{First: 42, Last: 44, State: Available, DeliveryCount: 1}, {First: 45, Last: 45, State: Acknowledged, DeliveryCount: 2}, {First: 47, Last: 50, State: Archived, DeliveryCount: 5},
		}}
		if kind == recSnapshot {
			v.stateEpoch, v.createMs, v.writeMs = 1, 1700000000000, 1700000001000
		}
		gotKind, gotKey, err := decodeKey(encodeKey(kind, k))
		if err != nil || gotKind != kind || gotKey != k {
			t.Fatalf("key: %v %v %v", gotKind, gotKey, err)
		}
		got, err := decodeValue(kind, encodeValue(kind, v))
		if err != nil || !reflect.DeepEqual(got, v) {
			t.Fatalf("value %d: %+v %v, want %+v", kind, got, err, v)
		}
	}
}

// TestRecordsKafkaBytes pins the bytes against Kafka's layout of
// ShareUpdateKey/Value v0, written out by hand from the schema.
func TestRecordsKafkaBytes(t *testing.T) {
	key := encodeKey(recUpdate, stateKey{group: "g", topicID: [16]byte{15: 9}, partition: 2})
	wantKey := "0001" + "0001" + "67" + "00000000000000000000000000000009" + "00000002"
	if hex.EncodeToString(key) != wantKey {
		t.Fatalf("key %x, want %s", key, wantKey)
	}
	val := encodeValue(recUpdate, stateValue{snapshotEpoch: 1, leaderEpoch: 0, start: 10, batches: []StateBatch{{First: 10, Last: 11, State: Acknowledged, DeliveryCount: 1}}})
	wantVal := "0000" + "00000001" + "00000000" + "000000000000000a" + "02" +
		"000000000000000a" + "000000000000000b" + "02" + "0001" + "00" + "00"
	if hex.EncodeToString(val) != wantVal {
		t.Fatalf("value %x, want %s", val, wantVal)
	}
	// Kafka 4.2's DeliveryCompleteCount (tag 0, int32) is skipped.
	tagged := append(bytes.Clone(val[:len(val)-1]), 1, 0, 4, 0, 0, 0, 5)
	if v, err := decodeValue(recUpdate, tagged); err != nil || v.start != 10 || len(v.batches) != 1 {
		t.Fatalf("tagged: %+v %v", v, err)
	}
}

func TestRecordsCorrupt(t *testing.T) {
	val := encodeValue(recSnapshot, stateValue{start: 1, batches: []StateBatch{{First: 1, Last: 2, State: Archived, DeliveryCount: 1}}})
	for i := range len(val) {
		if _, err := decodeValue(recSnapshot, val[:i]); !errors.Is(err, ErrCorrupt) {
			t.Errorf("truncated at %d: %v", i, err)
		}
	}
	bad := bytes.Clone(val)
	bad[len(bad)-5] = 3 // state 3 does not exist
	if _, err := decodeValue(recSnapshot, bad); !errors.Is(err, ErrCorrupt) {
		t.Errorf("state 3: %v", err)
	}
	if _, _, err := decodeKey([]byte{0, 3, 0, 1, 'g'}); !errors.Is(err, errNotShareRecord) {
		t.Errorf("type 3: %v", err)
	}
	if _, _, err := decodeKey([]byte{0, 0, 0, 9, 'g'}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("short key: %v", err)
	}
}

func FuzzRecords(f *testing.F) {
	f.Add(encodeKey(recSnapshot, stateKey{group: "g"}), encodeValue(recSnapshot, stateValue{batches: []StateBatch{{First: 0, Last: 3}}}))
	f.Add(encodeKey(recUpdate, stateKey{group: "g"}), encodeValue(recUpdate, stateValue{start: -1}))
	f.Add(encodeKey(recUpdate, stateKey{group: "g"}), encodeValue(recUpdate, stateValue{start: 0, batches: []StateBatch{{First: 5, Last: 1 << 62, State: Archived}}}))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		kind, k, err := decodeKey(key)
		if err != nil {
			return
		}
		v, err := decodeValue(kind, value)
		if err != nil {
			return
		}
		if !bytes.Equal(encodeKey(kind, k), key) {
			t.Fatalf("key does not re-encode")
		}
		p := newPartition(PartitionConfig{}, 0)
		p.apply(max(v.start, 0), v.batches) // must not panic, nor allocate without bound
		if len(p.recs) > maxWindow {
			t.Fatalf("%d in-flight records", len(p.recs))
		}
	})
}
