package controller

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// The reassignment types (internal/reassign, also the kafka package's):
// a target's form on the forwarding RPC is what it was, and a
// reassignment's Target drops the removing replicas.
func TestReassignTypes(t *testing.T) {
	b, err := json.Marshal(ReassignTarget{Topic: "t", Partition: 1, Replicas: []int{2, 3}})
	require.NoError(t, err)
	require.Equal(t, `{"topic":"t","partition":1,"replicas":[2,3]}`, string(b))
	b, err = json.Marshal(ReassignTarget{Topic: "t", KeepReplicationFactor: true})
	require.NoError(t, err)
	require.Equal(t, `{"topic":"t","partition":0,"replicas":null,"keep_rf":true}`, string(b))
	require.Equal(t, []int{4, 2}, Reassignment{Replicas: []int{4, 2, 1}, RemovingReplicas: []int{1}}.Target())
}
