package assign

import (
	"maps"
	"slices"
)

// Server-side assignors (KIP-848): the group coordinator itself computes
// the target assignment of a consumer-protocol group from its members'
// subscriptions and the topics' partitions, with the assignor the members
// name in their heartbeats ("uniform" by default, or "range").

// Names of the server-side assignors, as the members name them.
const (
	UniformName = "uniform"
	RangeName   = "range"
)

// Spec is what a server-side assignor is given: the members, each with
// its subscription and its current target assignment (for stickiness), and
// the subscribed topics' partition counts (a topic missing from Topics
// does not exist and is assigned to no one).
type Spec struct {
	Members []Member
	Topics  map[string]Topic
}

// Member is one member of a Spec.
type Member struct {
	ID         string
	InstanceID string // "" for a dynamic member
	Rack       string // "" if the member sent none
	Topics     []string
	// Current is the member's target assignment before this one: a
	// sticky assignor keeps what it can of it.
	Current Partitions
}

// Topic describes one subscribed topic.
type Topic struct {
	Partitions int
	// Racks, if not nil, holds for each partition the racks of its
	// replicas: a rack-aware assignor prefers giving a partition to a
	// member in one of them.
	Racks [][]string
}

// Partitions is an assignment: partitions by topic, each slice sorted and
// without duplicates.
type Partitions map[string][]int

// Count is the number of partitions in p.
func (p Partitions) Count() int {
	n := 0
	for _, ps := range p {
		n += len(ps)
	}
	return n
}

// Clone returns a deep copy of p.
func (p Partitions) Clone() Partitions {
	out := make(Partitions, len(p))
	for t, ps := range p {
		out[t] = slices.Clone(ps)
	}
	return out
}

// Equal reports whether p and q hold the same partitions (an empty topic
// entry counts as none).
func (p Partitions) Equal(q Partitions) bool {
	for t, ps := range p {
		if !slices.Equal(ps, q[t]) {
			return false
		}
	}
	for t, qs := range q {
		if len(qs) > 0 && len(p[t]) == 0 {
			return false
		}
	}
	return true
}

// Assignor computes target assignments on the coordinator.
type Assignor interface {
	Name() string
	// Assign returns every member's target assignment, by member id (a
	// member with nothing has an empty Partitions). It must be
	// deterministic: the same Spec gives the same result.
	Assign(Spec) map[string]Partitions
}

// ServerAssignors returns the server-side assignors a coordinator
// offers; the first, "uniform", is the default (Kafka's
// group.consumer.assignors).
func ServerAssignors() []Assignor { return []Assignor{Uniform{}, RangeServer{}} }

// ServerAssignor returns the server-side assignor named name, if any.
func ServerAssignor(name string) (Assignor, bool) {
	for _, a := range ServerAssignors() {
		if a.Name() == name {
			return a, true
		}
	}
	return nil, false
}

// subscribed returns the member's subscribed topics that exist, sorted and
// without duplicates.
func subscribed(m Member, topics map[string]Topic) []string {
	out := make([]string, 0, len(m.Topics))
	for _, t := range m.Topics {
		if tm, ok := topics[t]; ok && tm.Partitions > 0 {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
