package replica_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/replica"
	"github.com/strata-log/strata/replica/internal/machine"
)

// TestRandomReplication plays a leader's PartitionMachine and 2–4 followers'
// FollowerMachines against each other and against a model controller, with
// random appends (acks=all or not), fetches, follower crashes and restarts,
// the controller fencing crashed followers, AlterPartition answers delayed,
// rejected, lost, and time passing. The logs are the model: slices of record
// epochs. After every step it checks the invariants:
//
//   - the HW never decreases and is at most the leader's LEO;
//   - every member of the ISR (the controller's, and the leader's maximal
//     one) holds the leader's log up to the HW, record for record;
//   - every acknowledged acks=all produce is below the HW (and so on every
//     ISR member); none is acknowledged while the ISR is under min;
//   - the ISR always holds the leader (never empty);
//   - a follower is proposed into the ISR only when it holds the leader's log
//     up to the HW and the start of the leader's epoch;
//   - a follower's log never diverges from the leader's below its own HW,
//     and what it appends is the leader's.
//
// At the end every follower is restarted, every message delivered, and
// fetching goes on until the ISR is every replica, the HW is the leader's
// LEO and every log is the leader's.
//
// Replayable: the seed is logged; STRATA_SEED=n replays one.
func TestRandomReplication(t *testing.T) {
	seed := testSeed(t)
	runs, steps := 40, 1500
	if testing.Short() {
		runs = 8
	}
	for i := range runs {
		r := rand.New(rand.NewPCG(seed, uint64(i)))
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			h := newHarness(t, r)
			for step := range steps {
				h.step = step
				h.randomOp()
				h.check()
			}
			h.settle()
		})
	}
}

const leaderID = 1

type fnode struct {
	id     int
	log    *testLog
	hw     int64
	m      *machine.FollowerMachine
	alive  bool
	req    machine.Action // the Fetch or FetchEpochEnd outstanding
	kip320 bool
}

type harness struct {
	t    *testing.T
	r    *rand.Rand
	step int
	now  time.Time

	leader     *testLog
	m          *machine.PartitionMachine
	hw         int64 // from SetHW
	epochStart int64
	minISR     int
	replicas   []int
	followers  map[int]*fnode

	// the controller
	ctrlISR []int
	ctrlPE  int32
	// proposals sent and not answered, and metadata not delivered yet
	proposals []machine.ProposeISR
	metadata  []machine.Metadata

	stats map[string]int

	nextToken uint64
	waiting   map[uint64]int64 // token → required offset
	acked     []int64
}

// newHarness builds a partition after a failover: the old leader (epoch
// 4) left logs that agree below the HW and may differ above it; broker 1
// leads at epoch 5.
func newHarness(t *testing.T, r *rand.Rand) *harness {
	n := 2 + r.IntN(3)
	h := &harness{t: t, r: r, now: t0, followers: make(map[int]*fnode), waiting: make(map[uint64]int64), stats: make(map[string]int)}
	h.replicas = []int{leaderID}
	for i := range n {
		h.replicas = append(h.replicas, 2+i)
	}
	h.minISR = 1 + r.IntN(n+1) // at most the replica count
	// The old leader wrote epoch 3 then epoch 4 records; broker 1 has a
	// prefix of them, each follower another, possibly longer.
	a, b := int64(r.IntN(20)), int64(r.IntN(30))
	old := logOf(a+b, ep(3, 0), ep(4, a))
	if a+b == 0 {
		old = logOf(0)
	}
	l0 := int64(r.IntN(int(a+b) + 1))
	h.leader = prefix(old, l0)
	hw0 := int64(r.IntN(int(l0) + 1))
	h.ctrlISR = []int{leaderID}
	for _, id := range h.replicas[1:] {
		var end int64
		inISR := r.IntN(3) > 0
		if inISR {
			end = hw0 + int64(r.IntN(int(a+b-hw0)+1))
			h.ctrlISR = append(h.ctrlISR, id)
		} else {
			end = int64(r.IntN(int(a+b) + 1))
		}
		f := &fnode{id: id, log: prefix(old, end), hw: min(hw0, end), alive: true}
		h.followers[id] = f
	}
	h.ctrlPE = 10
	h.m = machine.NewPartitionMachine(leaderID, &h.leader.cache, machine.PartitionConfig{})
	h.hw = hw0
	acts := h.m.Step(h.now, machine.Metadata{
		Leader: leaderID, LeaderEpoch: 5, PartitionEpoch: h.ctrlPE, Replicas: h.replicas, ISR: h.ctrlISR,
		MinInSyncReplicas: h.minISR, LogEnd: h.leader.end(), HW: hw0,
	}, nil)
	h.epochStart = h.leader.end()
	h.leaderActs(acts)
	for _, f := range h.followers {
		h.restart(f)
	}
	t.Logf("replicas %v, ISR %v, min ISR %d, leader log %d, HW %d", h.replicas, h.ctrlISR, h.minISR, h.leader.end(), hw0)
	return h
}

func prefix(l *testLog, end int64) *testLog {
	out := logOf(0)
	for _, e := range l.epochs[:end] {
		out.append(e, 1)
	}
	return out
}

func (h *harness) fatalf(format string, args ...any) {
	h.t.Helper()
	h.t.Fatalf("step %d: "+format, append([]any{h.step}, args...)...)
}

func (h *harness) randomOp() {
	r := h.r
	h.now = h.now.Add(time.Duration(r.IntN(2000)) * time.Millisecond)
	switch x := r.IntN(100); {
	case x < 15:
		h.produce()
	case x < 55:
		if f := h.pick(func(f *fnode) bool { return f.alive && f.req != nil }); f != nil {
			h.deliver(f)
		}
	case x < 60:
		if f := h.pick(func(f *fnode) bool { return f.alive }); f != nil && r.IntN(3) == 0 {
			f.alive, f.req, f.m = false, nil, nil
		}
	case x < 66:
		if f := h.pick(func(f *fnode) bool { return !f.alive }); f != nil {
			h.restart(f)
		}
	case x < 74:
		h.answerProposal()
	case x < 78:
		h.deliverMetadata()
	case x < 80:
		h.fence()
	case x < 90:
		if r.IntN(10) == 0 {
			h.now = h.now.Add(replica.DefaultReplicaLagTime / 2)
		}
		h.leaderActs(h.m.Step(h.now, machine.Tick{}, nil))
	case x < 93:
		for tok := range h.waiting {
			delete(h.waiting, tok)
			h.leaderActs(h.m.Step(h.now, machine.CancelProduce{Token: tok}, nil))
			break
		}
	default:
		// A burst of fetches: followers that keep up.
		for _, id := range h.replicas[1:] {
			if f := h.followers[id]; f.alive && f.req != nil {
				h.deliver(f)
			}
		}
	}
}

func (h *harness) pick(ok func(*fnode) bool) *fnode {
	var c []*fnode
	for _, id := range h.replicas[1:] {
		if f := h.followers[id]; ok(f) {
			c = append(c, f)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[h.r.IntN(len(c))]
}

func effMin(minISR, replicas int) int { return max(1, min(minISR, replicas)) }

func (h *harness) produce() {
	acksAll := h.r.IntN(4) > 0
	if acksAll {
		err := h.m.CheckProduce()
		under := len(h.m.ISR()) < effMin(h.minISR, len(h.replicas))
		if under != (err != nil) {
			h.fatalf("CheckProduce = %v with ISR %v, min %d", err, h.m.ISR(), h.minISR)
		}
		if err != nil {
			return
		}
	}
	h.leader.append(5, 1+int64(h.r.IntN(4)))
	h.leaderActs(h.m.Step(h.now, machine.Appended{LogEnd: h.leader.end()}, nil))
	if acksAll {
		h.nextToken++
		h.waiting[h.nextToken] = h.leader.end()
		h.leaderActs(h.m.Step(h.now, machine.AwaitProduce{Token: h.nextToken, Required: h.leader.end()}, nil))
	}
}

func (h *harness) restart(f *fnode) {
	f.alive, f.req = true, nil
	f.kip320 = h.r.IntN(3) > 0
	f.m = machine.NewFollowerMachine(&f.log.cache)
	h.followerActs(f, f.m.Step(machine.BecomeFollower{
		Leader: leaderID, LeaderEpoch: 5, TruncateOnFetch: f.kip320,
		LogEnd: f.log.end(), LastEpoch: f.log.lastEpoch(), HW: f.hw,
	}, nil), nil)
}

// deliver sends f's outstanding request to the leader and its answer back.
func (h *harness) deliver(f *fnode) {
	req := f.req
	f.req = nil
	switch a := req.(type) {
	case machine.Fetch:
		ans := h.leaderActs(h.m.Step(h.now, machine.FollowerFetch{
			Replica: f.id, LeaderEpoch: a.LeaderEpoch, FetchOffset: a.Offset, LastFetchedEpoch: a.LastFetchedEpoch,
		}, nil))
		if ans == nil {
			h.fatalf("no fetch answer")
		}
		resp := machine.FetchResponse{LeaderEpoch: a.LeaderEpoch, Err: ans.Err, Diverging: ans.Diverging, HW: ans.HW, LogStart: ans.LogStart, LogEnd: ans.LogEnd}
		var recs []int32
		if ans.Err == nil && ans.Diverging == nil {
			end := min(h.leader.end(), a.Offset+int64(1+h.r.IntN(8)))
			recs = h.leader.epochs[a.Offset:end]
			resp.Records = len(recs) > 0
		}
		acts := f.m.Step(resp, nil)
		if ans.Err != nil && len(acts) == 0 {
			f.req = req // the driver retries
			return
		}
		h.followerActs(f, acts, recs)
	case machine.FetchEpochEnd:
		e, end := h.leader.cache.EndOffsetFor(a.Epoch)
		h.followerActs(f, f.m.Step(machine.EpochEndResponse{LeaderEpoch: a.LeaderEpoch, End: machine.EpochEnd{Epoch: e, EndOffset: end}}, nil), nil)
	default:
		h.fatalf("follower %d: outstanding %#v", f.id, req)
	}
}

func (h *harness) followerActs(f *fnode, acts []machine.Action, recs []int32) {
	for len(acts) > 0 {
		a := acts[0]
		acts = acts[1:]
		switch a := a.(type) {
		case machine.Truncate:
			if a.To > f.log.end() {
				h.fatalf("follower %d truncates to %d, its log ends at %d", f.id, a.To, f.log.end())
			}
			if a.To < h.hw && slices.Contains(h.ctrlISR, f.id) {
				h.fatalf("follower %d in ISR %v truncates to %d below the HW %d", f.id, h.ctrlISR, a.To, h.hw)
			}
			h.stats["truncate"]++
			f.log.truncate(a.To)
			f.hw = min(f.hw, a.To)
			acts = append(acts, f.m.Step(machine.Truncated{LogEnd: f.log.end(), LastEpoch: f.log.lastEpoch()}, nil)...)
		case machine.AppendRecords:
			start := f.log.end()
			for _, e := range recs {
				f.log.append(e, 1)
			}
			if !slices.Equal(f.log.epochs[:f.log.end()], h.leader.epochs[:f.log.end()]) {
				h.fatalf("follower %d appended at %d and diverges from the leader", f.id, start)
			}
			acts = append(acts, f.m.Step(machine.FollowerAppended{LogEnd: f.log.end(), LastEpoch: f.log.lastEpoch()}, nil)...)
		case machine.SetFollowerHW:
			if a.HW > f.log.end() || a.HW > h.hw {
				h.fatalf("follower %d HW %d: log end %d, leader HW %d", f.id, a.HW, f.log.end(), h.hw)
			}
			f.hw = a.HW
		case machine.SetLogStart:
		case machine.Fetch, machine.FetchEpochEnd:
			if f.req != nil || len(acts) > 0 {
				h.fatalf("follower %d: two requests out", f.id)
			}
			f.req = a
		default:
			h.fatalf("follower %d: unexpected action %#v", f.id, a)
		}
	}
}

func (h *harness) leaderActs(acts []machine.Action) *machine.FetchAnswer {
	var ans *machine.FetchAnswer
	for _, a := range acts {
		switch a := a.(type) {
		case machine.SetHW:
			if a.HW <= h.hw || a.HW > h.leader.end() {
				h.fatalf("HW %d after %d, leader LEO %d", a.HW, h.hw, h.leader.end())
			}
			if len(h.m.ISR()) < effMin(h.minISR, len(h.replicas)) {
				h.fatalf("HW moved to %d with ISR %v under min %d", a.HW, h.m.ISR(), h.minISR)
			}
			h.hw = a.HW
		case machine.StartEpoch:
			if a.Epoch != 5 || a.StartOffset != h.leader.end() {
				h.fatalf("StartEpoch %+v", a)
			}
			h.leader.cache.Assign(a.Epoch, a.StartOffset)
		case machine.ProposeISR:
			h.checkProposal(a)
			if len(a.ISR) > len(h.m.ISR()) {
				h.stats["expand"]++
			} else {
				h.stats["shrink"]++
			}
			h.proposals = append(h.proposals, a)
		case machine.CompleteProduce:
			req, ok := h.waiting[a.Token]
			if !ok {
				h.fatalf("completed unknown produce %d", a.Token)
			}
			delete(h.waiting, a.Token)
			if a.Err == nil {
				if req > h.hw {
					h.fatalf("produce up to %d acknowledged with HW %d", req, h.hw)
				}
				h.acked = append(h.acked, req)
			}
			h.stats[fmt.Sprint("produce ", a.Err)]++
		case machine.FetchAnswer:
			ans = &a
		default:
			h.fatalf("leader: unexpected action %#v", a)
		}
	}
	return ans
}

func (h *harness) checkProposal(p machine.ProposeISR) {
	if !slices.Contains(p.ISR, leaderID) {
		h.fatalf("proposed ISR %v without the leader", p.ISR)
	}
	for _, q := range h.proposals {
		if q.PartitionEpoch == p.PartitionEpoch && q.LeaderEpoch == p.LeaderEpoch {
			h.fatalf("proposal %v while %v is in flight", p, q)
		}
	}
	for _, id := range p.ISR {
		if id == leaderID || slices.Contains(h.m.ISR(), id) {
			continue
		}
		f := h.followers[id]
		view, _ := h.m.FollowerLogEnd(id)
		if view < h.hw || view < h.epochStart || view > f.log.end() ||
			!slices.Equal(f.log.epochs[:view], h.leader.epochs[:view]) {
			h.fatalf("follower %d proposed into the ISR at %d: HW %d, epoch start %d, log end %d", id, view, h.hw, h.epochStart, f.log.end())
		}
	}
}

// answerProposal has the controller answer the oldest proposal.
func (h *harness) answerProposal() {
	if len(h.proposals) == 0 {
		return
	}
	p := h.proposals[0]
	h.proposals = h.proposals[1:]
	ans := machine.AlterPartitionAnswer{LeaderEpoch: p.LeaderEpoch, BasedOn: p.PartitionEpoch}
	if p.PartitionEpoch != h.ctrlPE {
		ans.Result = machine.AlterStale
		h.leaderActs(h.m.Step(h.now, ans, nil))
		return
	}
	switch x := h.r.IntN(100); {
	case x < 70:
		h.ctrlApply(p.ISR)
		ans.Result, ans.ISR, ans.PartitionEpoch = machine.AlterAccepted, slices.Clone(h.ctrlISR), h.ctrlPE
	case x < 85:
		ans.Result = machine.AlterRejected
	default:
		// Applied, but the answer is lost: the metadata tells.
		h.ctrlApply(p.ISR)
		return
	}
	h.leaderActs(h.m.Step(h.now, ans, nil))
}

func (h *harness) ctrlApply(isr []int) {
	h.ctrlISR = nil
	for _, id := range h.replicas {
		if slices.Contains(isr, id) {
			h.ctrlISR = append(h.ctrlISR, id)
		}
	}
	h.ctrlPE++
	h.metadata = append(h.metadata, h.ctrlMetadata())
}

func (h *harness) ctrlMetadata() machine.Metadata {
	return machine.Metadata{
		Leader: leaderID, LeaderEpoch: 5, PartitionEpoch: h.ctrlPE, Replicas: h.replicas,
		ISR: slices.Clone(h.ctrlISR), MinInSyncReplicas: h.minISR,
	}
}

func (h *harness) deliverMetadata() {
	if len(h.metadata) == 0 {
		return
	}
	md := h.metadata[0]
	h.metadata = h.metadata[1:]
	h.leaderActs(h.m.Step(h.now, md, nil))
}

// fence has the controller drop a crashed follower from the ISR, as it does
// for a broker whose session expired.
func (h *harness) fence() {
	f := h.pick(func(f *fnode) bool { return !f.alive && slices.Contains(h.ctrlISR, f.id) })
	if f == nil {
		return
	}
	isr := slices.DeleteFunc(slices.Clone(h.ctrlISR), func(id int) bool { return id == f.id })
	h.ctrlApply(isr)
}

func (h *harness) check() {
	if got := h.m.HW(); got != h.hw {
		h.fatalf("HW %d, last SetHW %d", got, h.hw)
	}
	if !slices.Contains(h.m.ISR(), leaderID) || !slices.Contains(h.ctrlISR, leaderID) {
		h.fatalf("ISR %v / controller's %v without the leader", h.m.ISR(), h.ctrlISR)
	}
	members := h.m.MaximalISR()
	for _, id := range h.ctrlISR {
		if !slices.Contains(members, id) {
			members = append(members, id)
		}
	}
	for _, id := range members {
		if id == leaderID {
			continue
		}
		f := h.followers[id]
		if f.log.end() < h.hw || !slices.Equal(f.log.epochs[:h.hw], h.leader.epochs[:h.hw]) {
			h.fatalf("ISR member %d (ISR %v, controller's %v) does not hold the leader's log up to the HW %d (its end %d)",
				id, h.m.ISR(), h.ctrlISR, h.hw, f.log.end())
		}
	}
	for _, id := range h.replicas[1:] {
		f := h.followers[id]
		if f.hw > f.log.end() || !slices.Equal(f.log.epochs[:f.hw], h.leader.epochs[:f.hw]) {
			h.fatalf("follower %d diverges below its HW %d", id, f.hw)
		}
	}
	for _, req := range h.acked {
		if req > h.hw {
			h.fatalf("acknowledged %d above the HW %d", req, h.hw)
		}
	}
}

// settle restarts every follower, delivers everything, and fetches until
// the partition is fully replicated.
func (h *harness) settle() {
	for _, id := range h.replicas[1:] {
		if f := h.followers[id]; !f.alive {
			h.restart(f)
		}
	}
	for range 500 {
		h.step++
		h.now = h.now.Add(time.Second)
		for len(h.metadata) > 0 {
			h.deliverMetadata()
		}
		for len(h.proposals) > 0 {
			p := h.proposals[0]
			h.proposals = h.proposals[1:]
			ans := machine.AlterPartitionAnswer{LeaderEpoch: p.LeaderEpoch, BasedOn: p.PartitionEpoch, Result: machine.AlterStale}
			if p.PartitionEpoch == h.ctrlPE {
				h.ctrlApply(p.ISR)
				h.metadata = h.metadata[:len(h.metadata)-1]
				ans.Result, ans.ISR, ans.PartitionEpoch = machine.AlterAccepted, slices.Clone(h.ctrlISR), h.ctrlPE
			}
			h.leaderActs(h.m.Step(h.now, ans, nil))
		}
		for _, id := range h.replicas[1:] {
			if f := h.followers[id]; f.req != nil {
				h.deliver(f)
			}
		}
		h.leaderActs(h.m.Step(h.now, machine.Tick{}, nil))
		h.check()
		if slices.Equal(h.m.ISR(), h.replicas) && slices.Equal(h.ctrlISR, h.replicas) && h.hw == h.leader.end() && h.allEqual() {
			h.t.Logf("settled at HW %d: %v", h.hw, h.stats)
			if len(h.waiting) != 0 {
				h.fatalf("produces still waiting with the HW at the log end: %v", h.waiting)
			}
			return
		}
	}
	h.fatalf("did not settle: ISR %v (controller's %v), HW %d, leader LEO %d, pending proposals %v", h.m.ISR(), h.ctrlISR, h.hw, h.leader.end(), h.proposals)
}

func (h *harness) allEqual() bool {
	for _, id := range h.replicas[1:] {
		if !slices.Equal(h.followers[id].log.epochs, h.leader.epochs) {
			return false
		}
	}
	return true
}

// testSeed is a random test's seed: STRATA_SEED if set, else a fresh one,
// logged either way so that a failure can be replayed.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	seed := rand.Uint64()
	if s := os.Getenv("STRATA_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
	}
	t.Logf("seed %d (STRATA_SEED=%d to replay)", seed, seed)
	return seed
}
