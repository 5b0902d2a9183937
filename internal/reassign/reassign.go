// Package reassign holds the types of a partition reassignment (Kafka's
// AlterPartitionReassignments and ListPartitionReassignments, KIP-455)
// that the controller decides and the Kafka server answers: one
// definition, which controller and kafka name as their own (aliases), so
// that a member passes them from one to the other as they are.
package reassign

import "slices"

// Target is one partition's new replicas; Replicas nil cancels the
// reassignment in progress. KeepReplicationFactor refuses a target whose
// replica count is not the partition's replication factor now
// (Kafka's AllowReplicationFactorChange false, KIP-860).
type Target struct {
	Topic                 string `json:"topic"`
	Partition             int    `json:"partition"`
	Replicas              []int  `json:"replicas"` // nil: cancel
	KeepReplicationFactor bool   `json:"keep_rf,omitzero"`
}

// Result is one partition's outcome: Err nil when the reassignment was
// recorded (or cancelled, or completed at once).
type Result struct {
	Topic     string
	Partition int
	Err       error
}

// Reassignment is a reassignment in progress (Kafka's
// OngoingPartitionReassignment): Replicas is the full replica set now, the
// target followed by the removing replicas.
type Reassignment struct {
	Topic            string
	Partition        int
	Replicas         []int
	AddingReplicas   []int
	RemovingReplicas []int
}

// Target returns the replicas the partition will have once the
// reassignment completes.
func (r Reassignment) Target() []int {
	return slices.DeleteFunc(slices.Clone(r.Replicas), func(x int) bool { return slices.Contains(r.RemovingReplicas, x) })
}
