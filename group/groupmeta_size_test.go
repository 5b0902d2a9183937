package group

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// encodeMetadata allocates its value once: groupMetadataSize is exact.
func TestGroupMetadataSizeExact(t *testing.T) {
	g := newGroupState("g", 0)
	g.phase, g.generation, g.protocolType, g.protocol, g.leader = phaseStable, 7, "consumer", "range", "a"
	g.members["a"] = &member{id: "a", clientID: "client-a", clientHost: "/10.0.0.1", sessionTimeout: time.Minute, rebalanceTimeout: time.Hour,
		protocols: []Protocol{{Name: "sticky", Metadata: []byte("s")}, {Name: "range", Metadata: make([]byte, 300)}}, assignment: make([]byte, 70), inGeneration: true}
	g.members["b"] = &member{id: "b-long-member-id", instanceID: "static-b", sessionTimeout: time.Second,
		protocols: []Protocol{{Name: "range"}}, inGeneration: true}
	v := g.encodeMetadata(time.UnixMilli(1))
	require.Equal(t, len(v), cap(v))
	d, err := decodeGroupMetadata(v)
	require.NoError(t, err)
	require.Len(t, d.Members, 2)
	require.Len(t, d.Members[0].Subscription, 300)
}
