package replica

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

// stateKey is a key of a ShareSnapshot (kind 0) or ShareUpdate (1)
// record of group's share-partition of topic id byte id, partition p.
func stateKeyOf(kind uint16, group string, id byte, p uint32) []byte {
	k := binary.BigEndian.AppendUint16(nil, kind)
	k = binary.BigEndian.AppendUint16(k, uint16(len(group)))
	k = append(k, group...)
	var tid [16]byte
	tid[0] = id
	k = append(k, tid[:]...)
	return binary.BigEndian.AppendUint32(k, p)
}

// What a partition of __share_group_state still needs: the latest
// snapshot of each live share-partition (and what follows it), the latest
// record of each config; not loads' barriers, nor deleted share-partitions
// or configs.
func TestShareStateNeeds(t *testing.T) {
	snapA, updA := stateKeyOf(0, "g", 1, 0), stateKeyOf(1, "g", 1, 0)
	snapB, updB := stateKeyOf(0, "g", 1, 1), stateKeyOf(1, "g", 1, 1)
	snapC := stateKeyOf(0, "h", 1, 0)
	cfg := shareConfigKey("g")
	v := []byte("v")
	type rec struct {
		key, value []byte
	}
	for _, tc := range []struct {
		name string
		recs []rec // at offsets 0, 1, ...
		want int64 // lowest needed, of end 100
	}{
		{name: "empty", want: 100},
		{name: "barriers only", recs: []rec{{shareBarrierKey, nil}, {shareBarrierKey, nil}}, want: 100},
		{
			name: "each share-partition from its latest snapshot",
			recs: []rec{{snapA, v}, {updA, v}, {snapB, v}, {snapA, v}, {updA, v}, {updB, v}, {snapB, v}},
			want: 3, // A's latest snapshot (B's is at 6)
		},
		{
			name: "an update without a snapshot cannot be loaded",
			recs: []rec{{updA, v}, {snapB, v}},
			want: 1,
		},
		{
			name: "a deleted share-partition needs nothing",
			recs: []rec{{snapA, v}, {snapB, v}, {updA, v}, {snapA, nil}, {updA, nil}},
			want: 1,
		},
		{
			name: "recreated after its deletion",
			recs: []rec{{snapA, v}, {snapA, nil}, {snapB, v}, {snapA, v}},
			want: 2,
		},
		{
			name: "a group's latest config",
			recs: []rec{{cfg, v}, {snapA, v}, {cfg, v}, {snapA, v}},
			want: 2,
		},
		{
			name: "a deleted config",
			recs: []rec{{cfg, v}, {snapC, v}, {cfg, nil}},
			want: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n shareStateNeeds
			for i, r := range tc.recs {
				n.add(int64(i), r.key, r.value)
			}
			require.Equal(t, tc.want, n.lowest(100))
		})
	}
}
