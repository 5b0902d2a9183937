package controller

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Kafka's UnregisterBroker, with Strata's rule that a broker still listed
// as a replica stays.
func TestDecideUnregisterBroker(t *testing.T) {
	base := append(liveBrokerRecords(1, 2, 3, 4),
		topicWith(false, PartitionState{Partition: 0, Replicas: []int{1, 2}, ISR: []int{1, 2}, Leader: 1})...)
	for _, tc := range []struct {
		name    string
		id      int
		wantErr error
	}{
		{name: "holds no replica", id: 4},
		{name: "fenced, no replica", id: 3},
		{name: "replica of a partition", id: 2, wantErr: ErrBrokerHasReplicas},
		{name: "leader of a partition", id: 1, wantErr: ErrBrokerHasReplicas},
		{name: "unknown", id: 9, wantErr: ErrUnknownBroker},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := build(t, base...)
			if tc.id == 3 {
				applyAll(t, img, []record{fenceBrokerRecord{ID: 3, Epoch: 3}})
			}
			v := img.version
			recs, err := decideUnregisterBroker(img, tc.id)
			require.Equal(t, v, img.version)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.Empty(t, recs)
				return
			}
			require.NoError(t, err)
			epoch := img.brokers[tc.id].Epoch
			require.Equal(t, []record{unregisterBrokerRecord{ID: tc.id, Epoch: epoch}}, recs)
			applyAll(t, img, recs)
			_, ok := img.Broker(tc.id)
			require.False(t, ok)
			require.Equal(t, int64(4), img.lastBrokerEpoch, "an unregistered broker's epoch is never reused")
			// Applying it twice is rejected: the broker is gone.
			require.ErrorIs(t, img.apply(recs[0]), errInapplicable)
			// It encodes and decodes.
			got, err := decodeEntry(encodeEntry(nil, recs))
			require.NoError(t, err)
			require.Equal(t, recs, got)
		})
	}
}
