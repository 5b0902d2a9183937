package assign

import (
	"cmp"
	"slices"
)

// Uniform is Kafka's server-side UniformAssignor ("uniform", the
// default): it spreads the partitions of the subscribed topics over the
// members as evenly as their subscriptions allow, keeping as much of each
// member's current assignment as it can.
//
// When every member subscribes to the same topics (homogeneous), each gets
// partitions/members of them, and the first partitions%members members
// (those holding the most already, then by member id) one more: a member
// keeps its current partitions up to that quota and the ones left over go
// to the members below theirs. Otherwise (heterogeneous) a member keeps the
// partitions of the topics it still subscribes to, every other partition
// goes to the least loaded of its subscribers (topics with the fewest
// subscribers first), and then partitions move, one at a time, from a
// member to a subscriber of the topic holding at least two fewer, until no
// such move remains: Kafka's test of balance.
//
// With racks (Member.Rack and Topic.Racks both set), a free partition goes
// preferably to a member in one of its replicas' racks, among those the
// balance lets take it.
type Uniform struct{}

// Name is "uniform".
func (Uniform) Name() string { return UniformName }

type uniformState struct {
	spec    Spec
	members []Member
	subs    []map[string]bool
	owned   []map[tpKey]bool
	owner   map[tpKey]int
	racks   bool // some member has a rack and some topic racks: rack matching is worth its cost
}

type tpKey struct {
	topic     string
	partition int
}

// Assign implements Assignor.
func (Uniform) Assign(s Spec) map[string]Partitions {
	u := &uniformState{spec: s, members: slices.Clone(s.Members), owner: map[tpKey]int{}}
	slices.SortFunc(u.members, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	for _, m := range u.members {
		u.racks = u.racks || m.Rack != ""
	}
	if u.racks {
		u.racks = false
		for _, t := range s.Topics {
			u.racks = u.racks || len(t.Racks) > 0
		}
	}
	homogeneous := true
	var first []string
	for i, m := range u.members {
		sub := subscribed(m, s.Topics)
		if i == 0 {
			first = sub
		} else if !slices.Equal(sub, first) {
			homogeneous = false
		}
		set := make(map[string]bool, len(sub))
		for _, t := range sub {
			set[t] = true
		}
		u.subs = append(u.subs, set)
		u.owned = append(u.owned, map[tpKey]bool{})
	}
	// Keep the current assignment where it is still valid: subscribed,
	// existing, and not claimed by a member sorting earlier.
	for i, m := range u.members {
		for _, t := range sortedKeys(m.Current) {
			if !u.subs[i][t] {
				continue
			}
			for _, p := range m.Current[t] {
				k := tpKey{t, p}
				if _, taken := u.owner[k]; taken || p < 0 || p >= s.Topics[t].Partitions {
					continue
				}
				u.give(k, i)
			}
		}
	}
	if homogeneous {
		u.homogeneous(first)
	} else {
		u.heterogeneous()
	}
	out := make(map[string]Partitions, len(u.members))
	for i, m := range u.members {
		a := Partitions{}
		for k := range u.owned[i] {
			a[k.topic] = append(a[k.topic], k.partition)
		}
		for _, ps := range a {
			slices.Sort(ps)
		}
		out[m.ID] = a
	}
	return out
}

func (u *uniformState) give(k tpKey, i int) {
	u.owner[k] = i
	u.owned[i][k] = true
}

func (u *uniformState) take(k tpKey) {
	delete(u.owned[u.owner[k]], k)
	delete(u.owner, k)
}

// rackMatch reports whether member i is in a rack of a replica of k.
func (u *uniformState) rackMatch(k tpKey, i int) bool {
	if !u.racks {
		return false
	}
	rack := u.members[i].Rack
	racks := u.spec.Topics[k.topic].Racks
	if rack == "" || k.partition >= len(racks) {
		return false
	}
	return slices.Contains(racks[k.partition], rack)
}

// unassigned lists the partitions of topics that nobody owns, topics with
// the fewest subscribers first (then by name), partitions in order.
func (u *uniformState) unassigned() []tpKey {
	subscribers := map[string]int{}
	for _, sub := range u.subs {
		for t := range sub {
			subscribers[t]++
		}
	}
	topics := sortedKeys(subscribers)
	slices.SortStableFunc(topics, func(a, b string) int { return cmp.Compare(subscribers[a], subscribers[b]) })
	var out []tpKey
	for _, t := range topics {
		for p := range u.spec.Topics[t].Partitions {
			if _, ok := u.owner[tpKey{t, p}]; !ok {
				out = append(out, tpKey{t, p})
			}
		}
	}
	return out
}

func (u *uniformState) homogeneous(topics []string) {
	n := len(u.members)
	if n == 0 || len(topics) == 0 {
		return
	}
	total := 0
	for _, t := range topics {
		total += u.spec.Topics[t].Partitions
	}
	// The extra partitions go to the members holding the most already, so
	// that as few as possible give one up.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(len(u.owned[b]), len(u.owned[a])) })
	quota := make([]int, n)
	for rank, i := range order {
		quota[i] = total / n
		if rank < total%n {
			quota[i]++
		}
	}
	// Revoke what exceeds a quota: the last partitions in topic, partition
	// order.
	for i := range u.members {
		if extra := len(u.owned[i]) - quota[i]; extra > 0 {
			keys := u.sortedOwned(i)
			for _, k := range keys[len(keys)-extra:] {
				u.take(k)
			}
		}
	}
	free := u.unassigned()
	// Racks first: a partition to a member of its racks with room, the
	// least loaded of them.
	rest := free
	if u.racks {
		rest = u.rackFirst(free, quota)
	}
	i := 0
	for _, k := range rest {
		for len(u.owned[i]) >= quota[i] {
			i++ // never past the last member: the quotas add up to total
		}
		u.give(k, i)
	}
}

// rackFirst gives each free partition to the least loaded member with
// room in one of its racks, and returns those it could not place.
func (u *uniformState) rackFirst(free []tpKey, quota []int) []tpKey {
	rest := free[:0:0]
	for _, k := range free {
		best := -1
		for i := range u.members {
			if len(u.owned[i]) < quota[i] && u.rackMatch(k, i) && (best < 0 || len(u.owned[i]) < len(u.owned[best])) {
				best = i
			}
		}
		if best >= 0 {
			u.give(k, best)
		} else {
			rest = append(rest, k)
		}
	}
	return rest
}

func (u *uniformState) heterogeneous() {
	subscribers := map[string][]int{}
	for i, sub := range u.subs {
		for t := range sub {
			subscribers[t] = append(subscribers[t], i)
		}
	}
	free := u.unassigned()
	for len(free) > 0 {
		t := free[0].topic
		n := 1
		for n < len(free) && free[n].topic == t {
			n++
		}
		if u.racks {
			for _, k := range free[:n] {
				u.give(k, u.leastLoaded(k, subscribers[t]))
			}
		} else {
			// The least loaded subscriber, by (count, index), from a heap.
			h := &loadHeap{u: u, items: slices.Clone(subscribers[t])}
			h.init()
			for _, k := range free[:n] {
				u.give(k, h.items[0])
				h.down(0)
			}
		}
		free = free[n:]
	}
	u.balance(subscribers)
}

// loadHeap is a min-heap of member indices by (partitions held, index).
type loadHeap struct {
	u     *uniformState
	items []int
}

func (h *loadHeap) less(a, b int) bool {
	x, y := h.items[a], h.items[b]
	nx, ny := len(h.u.owned[x]), len(h.u.owned[y])
	return nx < ny || nx == ny && x < y
}

func (h *loadHeap) init() {
	for i := len(h.items)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *loadHeap) down(i int) {
	for {
		l, small := 2*i+1, i
		if l < len(h.items) && h.less(l, small) {
			small = l
		}
		if r := l + 1; r < len(h.items) && h.less(r, small) {
			small = r
		}
		if small == i {
			return
		}
		h.items[i], h.items[small] = h.items[small], h.items[i]
		i = small
	}
}

// leastLoaded is the subscriber holding the fewest partitions, one in a
// rack of k's replicas first among equals, then the first by member id.
func (u *uniformState) leastLoaded(k tpKey, subs []int) int {
	best := -1
	for _, i := range subs {
		if best < 0 || len(u.owned[i]) < len(u.owned[best]) ||
			len(u.owned[i]) == len(u.owned[best]) && u.rackMatch(k, i) && !u.rackMatch(k, best) {
			best = i
		}
	}
	return best
}

// balance moves partitions, one at a time, from a member to a subscriber
// of the partition's topic holding at least two fewer, until none can
// move: topic by topic, the most loaded holder of one of its partitions
// gives its last one to the least loaded subscriber, and passes repeat
// until one moves nothing. Each move lowers the sum of the squared counts,
// so this ends.
func (u *uniformState) balance(subscribers map[string][]int) {
	topics := sortedKeys(subscribers)
	held := make([]map[string][]int, len(u.members)) // member → topic → partitions, sorted
	for i := range u.members {
		held[i] = map[string][]int{}
		for k := range u.owned[i] {
			held[i][k.topic] = append(held[i][k.topic], k.partition)
		}
		for _, ps := range held[i] {
			slices.Sort(ps)
		}
	}
	for {
		moved := false
		for _, t := range topics {
			subs := subscribers[t]
			for {
				from, to := -1, -1
				for _, i := range subs {
					n := len(u.owned[i])
					if len(held[i][t]) > 0 && (from < 0 || n > len(u.owned[from])) {
						from = i
					}
					if to < 0 || n < len(u.owned[to]) {
						to = i
					}
				}
				if from < 0 || len(u.owned[from])-len(u.owned[to]) < 2 {
					break
				}
				ps := held[from][t]
				k := tpKey{t, ps[len(ps)-1]}
				held[from][t] = ps[:len(ps)-1]
				u.take(k)
				u.give(k, to)
				held[to][t] = append(held[to][t], k.partition)
				slices.Sort(held[to][t])
				moved = true
			}
		}
		if !moved {
			return
		}
	}
}

func (u *uniformState) sortedOwned(i int) []tpKey {
	keys := make([]tpKey, 0, len(u.owned[i]))
	for k := range u.owned[i] {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b tpKey) int {
		if c := cmp.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return cmp.Compare(a.partition, b.partition)
	})
	return keys
}
