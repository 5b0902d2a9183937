package replica_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/strata-log/strata/replica"
	"github.com/strata-log/strata/replica/internal/machine"
	"github.com/strata-log/strata/replica/internal/machine/machinetest"
)

// TestRandomFailover plays one partition on 3–5 brokers, each with both
// machines, under a model controller that fences brokers (crashed, or cut
// off and still running: zombie leaders), elects leaders from the ISR
// (never unclean), unfences them, and answers AlterPartition; each broker
// learns the metadata late, in its own time. Records carry unique ids.
//
// Invariants, after every step:
//   - no two leaders ever have different records below their HWs (what a
//     consumer reads is never rewritten), and every member of the
//     controller's ISR holds every record that was below some leader's HW;
//   - every acknowledged acks=all record is, at its offset, in the log of
//     every member of the controller's ISR (so of every leader it elects);
//   - a broker's HW never decreases while it leads;
//   - a follower appends only to a log that is its leader's up to there,
//     and only what its leader has at those offsets.
//
// At the end, with every broker restarted and unfenced and every message
// delivered, every log is the leader's, record for record.
//
// Replayable: the seed is logged; STRATA_SEED=n replays one.
func TestRandomFailover(t *testing.T) {
	seed := testSeed(t)
	runs, steps := 40, 1500
	if testing.Short() {
		runs = 8
	}
	for i := range runs {
		r := rand.New(rand.NewPCG(seed, 1000+uint64(i)))
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			c := newCluster(t, r)
			for step := range steps {
				c.step = step
				c.randomOp()
				c.check()
			}
			c.settle()
		})
	}
}

type rec struct {
	epoch int32
	id    int
}

type clog struct {
	recs  []rec
	cache machinetest.Epochs
	hw    int64
}

func (l *clog) end() int64 { return int64(len(l.recs)) }

// lastEpoch is the latest epoch of the log's cache (Kafka's latestEpoch),
// which may be above the last record's: a leader's epoch with no records yet.
func (l *clog) lastEpoch() int32 { return l.cache.Latest() }

func (l *clog) append(rs ...rec) {
	for _, x := range rs {
		l.cache.Assign(x.epoch, l.end())
		l.recs = append(l.recs, x)
	}
	l.cache.End = l.end()
}

func (l *clog) truncate(to int64) {
	l.recs = l.recs[:to]
	l.cache.TruncateTo(to)
	l.hw = min(l.hw, to)
}

type cbroker struct {
	id     int
	alive  bool
	life   int // incarnation, to drop answers meant for an earlier one
	log    *clog
	pm     *machine.PartitionMachine
	fm     *machine.FollowerMachine
	inbox  []machine.Metadata
	req    machine.Action
	hwLead int64 // the HW since it became leader; -1 when not leading
}

type proposal struct {
	from, life int
	p          machine.ProposeISR
}

type cluster struct {
	t    *testing.T
	r    *rand.Rand
	step int
	now  time.Time

	replicas []int
	minISR   int
	// unclean: the controller elects a leader outside the ISR rather than
	// go offline; acknowledged records may then be lost, but the logs must
	// still never diverge.
	unclean bool
	brokers map[int]*cbroker

	// the controller
	leader int
	le, pe int32
	isr    []int
	fenced map[int]bool
	alters []proposal

	nextID    int
	nextToken uint64
	waiting   map[uint64][]rec // by token: the records and their offsets (id order)
	waitAt    map[uint64]int64 // by token: the offset of the first record
	acked     map[int64]rec    // offset → acknowledged record
	committed []rec            // every record that was below some leader's HW
	stats     map[string]int
}

func newCluster(t *testing.T, r *rand.Rand) *cluster {
	n := 3 + r.IntN(3)
	c := &cluster{
		t: t, r: r, now: t0, brokers: make(map[int]*cbroker), fenced: make(map[int]bool),
		waiting: make(map[uint64][]rec), waitAt: make(map[uint64]int64), acked: make(map[int64]rec), stats: make(map[string]int),
		leader: 1, le: 1, pe: 1, minISR: 1 + r.IntN(n), unclean: r.IntN(4) == 0,
	}
	for id := 1; id <= n; id++ {
		c.replicas = append(c.replicas, id)
		c.brokers[id] = &cbroker{id: id, log: &clog{}, hwLead: -1}
	}
	c.isr = slices.Clone(c.replicas)
	for _, id := range c.replicas {
		c.start(c.brokers[id])
	}
	t.Logf("replicas %v, min ISR %d, unclean %v", c.replicas, c.minISR, c.unclean)
	return c
}

func (c *cluster) fatalf(format string, args ...any) {
	c.t.Helper()
	c.t.Fatalf("step %d: "+format, append([]any{c.step}, args...)...)
}

func (c *cluster) metadata() machine.Metadata {
	var inel []int
	for _, id := range c.replicas {
		if c.fenced[id] {
			inel = append(inel, id)
		}
	}
	return machine.Metadata{Leader: c.leader, LeaderEpoch: c.le, PartitionEpoch: c.pe, Replicas: c.replicas, ISR: slices.Clone(c.isr), MinInSyncReplicas: c.minISR, Ineligible: inel}
}

// broadcast commits the controller's state: every running broker will
// learn it, in its own time.
func (c *cluster) broadcast() {
	c.pe++
	c.tell()
}

// tell sends the metadata to every running broker; a fencing change
// without a partition change comes this way.
func (c *cluster) tell() {
	md := c.metadata()
	for _, b := range c.brokers {
		if b.alive {
			b.inbox = append(b.inbox, md)
		}
	}
}

// elect picks the first live ISR member, as the controller does (clean
// elections only), keeping the leader if it still qualifies.
func (c *cluster) elect() {
	ok := func(id int) bool { return c.brokers[id].alive && !c.fenced[id] }
	if c.leader != -1 && slices.Contains(c.isr, c.leader) && !c.fenced[c.leader] {
		return
	}
	old := c.leader
	c.leader = -1
	for _, id := range c.replicas {
		if slices.Contains(c.isr, id) && ok(id) {
			c.leader = id
			break
		}
	}
	if c.leader == -1 && c.unclean {
		for _, id := range c.replicas {
			if ok(id) {
				c.leader, c.isr = id, []int{id}
				c.stats["unclean"]++
				break
			}
		}
	}
	if c.leader != old {
		c.le++
	}
}

// fenceBroker is the controller fencing id: out of the ISR (unless it is
// the last member), and a new leader if it led.
func (c *cluster) fenceBroker(id int) {
	if c.fenced[id] {
		return
	}
	c.fenced[id] = true
	if slices.Contains(c.isr, id) {
		if len(c.isr) > 1 {
			c.isr = slices.DeleteFunc(c.isr, func(x int) bool { return x == id })
		}
		c.elect()
		c.broadcast()
		return
	}
	c.tell()
}

func (c *cluster) unfenceBroker(id int) {
	delete(c.fenced, id)
	if c.leader == -1 {
		c.elect()
		if c.leader != -1 {
			c.broadcast()
			return
		}
	}
	c.tell()
}

func (c *cluster) start(b *cbroker) {
	b.alive, b.life, b.inbox, b.req, b.hwLead = true, b.life+1, nil, nil, -1
	b.pm = machine.NewPartitionMachine(b.id, &b.log.cache, machine.PartitionConfig{})
	b.fm = machine.NewFollowerMachine(&b.log.cache)
	c.apply(b, c.metadata())
}

// apply has broker b take metadata md, as its driver does.
func (c *cluster) apply(b *cbroker, md machine.Metadata) {
	md.LogEnd, md.HW = b.log.end(), b.log.hw
	was := b.pm.Leading()
	c.leaderActs(b, b.pm.Step(c.now, md, nil))
	if b.pm.Leading() && !was {
		b.hwLead = b.pm.HW()
	}
	if !b.pm.Leading() {
		b.hwLead = -1
	}
	switch {
	case md.Leader == b.id:
		b.fm.Stop()
		b.req = nil
	case md.Leader == -1:
		b.fm.Stop()
		b.req = nil
	default:
		if _, e, ok := b.fm.Following(); ok && e == md.LeaderEpoch {
			return
		}
		b.req = nil
		c.followerActs(b, b.fm.Step(machine.BecomeFollower{
			Leader: md.Leader, LeaderEpoch: md.LeaderEpoch, TruncateOnFetch: c.r.IntN(3) > 0,
			LogEnd: b.log.end(), LastEpoch: b.log.lastEpoch(), HW: b.log.hw,
		}, nil), nil)
	}
}

func (c *cluster) live(ok func(*cbroker) bool) *cbroker {
	var cs []*cbroker
	for _, id := range c.replicas {
		if b := c.brokers[id]; ok(b) {
			cs = append(cs, b)
		}
	}
	if len(cs) == 0 {
		return nil
	}
	return cs[c.r.IntN(len(cs))]
}

func (c *cluster) randomOp() {
	r := c.r
	c.now = c.now.Add(time.Duration(r.IntN(2000)) * time.Millisecond)
	switch x := r.IntN(100); {
	case x < 15:
		if b := c.live(func(b *cbroker) bool { return b.alive && b.pm.Leading() }); b != nil {
			c.produce(b)
		}
	case x < 50:
		if b := c.live(func(b *cbroker) bool { return b.alive && b.req != nil }); b != nil {
			c.deliver(b)
		}
	case x < 60:
		if b := c.live(func(b *cbroker) bool { return b.alive && len(b.inbox) > 0 }); b != nil {
			md := b.inbox[0]
			b.inbox = b.inbox[1:]
			c.apply(b, md)
		}
	case x < 62:
		// A crash: the session expires later (a fence op).
		if b := c.live(func(b *cbroker) bool { return b.alive }); b != nil {
			b.alive, b.pm, b.fm, b.req, b.inbox = false, nil, nil, nil, nil
			c.stats["crash"]++
		}
	case x < 65:
		// Restart: the broker registers (fenced), reads the metadata.
		if b := c.live(func(b *cbroker) bool { return !b.alive }); b != nil {
			c.fenceBroker(b.id)
			c.start(b)
		}
	case x < 68:
		// Session expiry: a crashed broker, or a running one cut off from
		// the controller (it goes on as it was: a zombie).
		if b := c.live(func(b *cbroker) bool { return !c.fenced[b.id] }); b != nil && (!b.alive || r.IntN(4) == 0) {
			c.fenceBroker(b.id)
			c.stats["fence"]++
		}
	case x < 71:
		if b := c.live(func(b *cbroker) bool { return b.alive && c.fenced[b.id] }); b != nil {
			c.unfenceBroker(b.id)
		}
	case x < 78:
		c.answerAlter()
	case x < 80:
		// A leader moves (preferred leader election, controlled shutdown).
		if c.leader != -1 && len(c.isr) > 1 {
			cands := slices.DeleteFunc(slices.Clone(c.isr), func(id int) bool { return id == c.leader || c.fenced[id] || !c.brokers[id].alive })
			if len(cands) > 0 {
				c.leader = cands[r.IntN(len(cands))]
				c.le++
				c.broadcast()
				c.stats["move"]++
			}
		}
	case x < 92:
		if r.IntN(8) == 0 {
			c.now = c.now.Add(replica.DefaultReplicaLagTime / 2)
		}
		for _, id := range c.replicas {
			if b := c.brokers[id]; b.alive {
				c.leaderActs(b, b.pm.Step(c.now, machine.Tick{}, nil))
			}
		}
	default:
		for _, id := range c.replicas {
			if b := c.brokers[id]; b.alive && b.req != nil {
				c.deliver(b)
			}
		}
	}
}

func (c *cluster) produce(b *cbroker) {
	acksAll := c.r.IntN(4) > 0
	if acksAll && b.pm.CheckProduce() != nil {
		c.stats["refused"]++
		return
	}
	var rs []rec
	for range 1 + c.r.IntN(3) {
		c.nextID++
		rs = append(rs, rec{epoch: b.pm.LeaderEpoch(), id: c.nextID})
	}
	at := b.log.end()
	b.log.append(rs...)
	c.leaderActs(b, b.pm.Step(c.now, machine.Appended{LogEnd: b.log.end()}, nil))
	if acksAll {
		c.nextToken++
		c.waiting[c.nextToken], c.waitAt[c.nextToken] = rs, at
		c.leaderActs(b, b.pm.Step(c.now, machine.AwaitProduce{Token: c.nextToken, Required: b.log.end()}, nil))
	}
}

func (c *cluster) deliver(b *cbroker) {
	req := b.req
	switch a := req.(type) {
	case machine.Fetch:
		ld := c.brokers[a.Leader]
		if !ld.alive {
			return // refused; retried later
		}
		b.req = nil
		ans := c.leaderActs(ld, ld.pm.Step(c.now, machine.FollowerFetch{
			Replica: b.id, LeaderEpoch: a.LeaderEpoch, FetchOffset: a.Offset, LastFetchedEpoch: a.LastFetchedEpoch,
		}, nil))
		resp := machine.FetchResponse{LeaderEpoch: a.LeaderEpoch, Err: ans.Err, Diverging: ans.Diverging, HW: ans.HW, LogStart: ans.LogStart, LogEnd: ans.LogEnd}
		var rs []rec
		if ans.Err == nil && ans.Diverging == nil {
			rs = ld.log.recs[a.Offset:min(ld.log.end(), a.Offset+int64(1+c.r.IntN(8)))]
			resp.Records = len(rs) > 0
		}
		acts := b.fm.Step(resp, nil)
		if ans.Err != nil && len(acts) == 0 {
			b.req = req
			return
		}
		c.followerActs(b, acts, slices.Clone(rs))
	case machine.FetchEpochEnd:
		ld := c.brokers[a.Leader]
		if !ld.alive {
			return
		}
		if !ld.pm.Leading() || ld.pm.LeaderEpoch() != a.LeaderEpoch {
			return // NOT_LEADER / FENCED / UNKNOWN epoch: retried later
		}
		b.req = nil
		e, end := ld.log.cache.EndOffsetFor(a.Epoch)
		c.followerActs(b, b.fm.Step(machine.EpochEndResponse{LeaderEpoch: a.LeaderEpoch, End: machine.EpochEnd{Epoch: e, EndOffset: end}}, nil), nil)
	}
}

func (c *cluster) followerActs(b *cbroker, acts []machine.Action, rs []rec) {
	for len(acts) > 0 {
		a := acts[0]
		acts = acts[1:]
		switch a := a.(type) {
		case machine.Truncate:
			if a.To > b.log.end() {
				c.fatalf("broker %d truncates to %d, its log ends at %d", b.id, a.To, b.log.end())
			}
			c.stats["truncate"]++
			b.log.truncate(a.To)
			acts = append(acts, b.fm.Step(machine.Truncated{LogEnd: b.log.end(), LastEpoch: b.log.lastEpoch()}, nil)...)
		case machine.AppendRecords:
			leader, _, _ := b.fm.Following()
			ld := c.brokers[leader]
			at := b.log.end()
			if at > ld.log.end() || !slices.Equal(b.log.recs, ld.log.recs[:at]) {
				d := 0
				for d < len(b.log.recs) && d < len(ld.log.recs) && b.log.recs[d] == ld.log.recs[d] {
					d++
				}
				c.fatalf("broker %d appends at %d to a log that is not its leader %d's: first difference at %d\nfollower %v %v\nleader %v %v", b.id, at, leader, d,
					b.log.recs[max(0, d-3):], b.log.cache.Entries, ld.log.recs[max(0, d-3):min(len(ld.log.recs), d+10)], ld.log.cache.Entries)
			}
			for i, x := range rs {
				if o := at + int64(i); o >= ld.log.end() || ld.log.recs[o] != x {
					c.fatalf("broker %d appends %v at %d, not its leader %d's", b.id, x, o, leader)
				}
			}
			b.log.append(rs...)
			acts = append(acts, b.fm.Step(machine.FollowerAppended{LogEnd: b.log.end(), LastEpoch: b.log.lastEpoch()}, nil)...)
		case machine.SetFollowerHW:
			if a.HW > b.log.end() {
				c.fatalf("broker %d HW %d past its end %d", b.id, a.HW, b.log.end())
			}
			b.log.hw = a.HW
		case machine.SetLogStart:
		case machine.Fetch, machine.FetchEpochEnd:
			b.req = a
		case machine.TruncateFully:
			c.fatalf("broker %d: TruncateFully without retention", b.id)
		default:
			c.fatalf("broker %d: unexpected follower action %#v", b.id, a)
		}
	}
}

func (c *cluster) leaderActs(b *cbroker, acts []machine.Action) machine.FetchAnswer {
	var ans machine.FetchAnswer
	for _, a := range acts {
		switch a := a.(type) {
		case machine.SetHW:
			if b.hwLead >= 0 && a.HW <= b.hwLead {
				c.fatalf("leader %d HW %d after %d", b.id, a.HW, b.hwLead)
			}
			b.hwLead = a.HW
			b.log.hw = a.HW
			if !c.unclean {
				c.commit(b, a.HW)
			}
		case machine.StartEpoch:
			b.log.cache.Assign(a.Epoch, a.StartOffset)
		case machine.ProposeISR:
			c.alters = append(c.alters, proposal{from: b.id, life: b.life, p: a})
		case machine.CompleteProduce:
			rs, ok := c.waiting[a.Token]
			if !ok {
				c.fatalf("completed unknown produce %d", a.Token)
			}
			at := c.waitAt[a.Token]
			delete(c.waiting, a.Token)
			c.stats[fmt.Sprint("produce ", a.Err)]++
			if a.Err == nil {
				for i, x := range rs {
					c.acked[at+int64(i)] = x
				}
			}
		case machine.FetchAnswer:
			ans = a
		default:
			c.fatalf("broker %d: unexpected leader action %#v", b.id, a)
		}
	}
	return ans
}

// answerAlter has the controller decide the oldest AlterPartition, as
// decideAlterPartition does.
func (c *cluster) answerAlter() {
	if len(c.alters) == 0 {
		return
	}
	pr := c.alters[0]
	c.alters = c.alters[1:]
	b := c.brokers[pr.from]
	reply := func(ans machine.AlterPartitionAnswer) {
		if b.alive && b.life == pr.life {
			c.leaderActs(b, b.pm.Step(c.now, ans, nil))
		}
	}
	ans := machine.AlterPartitionAnswer{LeaderEpoch: pr.p.LeaderEpoch, BasedOn: pr.p.PartitionEpoch}
	if pr.from != c.leader || pr.p.LeaderEpoch != c.le || pr.p.PartitionEpoch != c.pe {
		ans.Result = machine.AlterStale
		reply(ans)
		return
	}
	for _, id := range pr.p.ISR {
		if c.fenced[id] {
			ans.Result = machine.AlterRejected
			reply(ans)
			return
		}
	}
	c.isr = nil
	for _, id := range c.replicas {
		if slices.Contains(pr.p.ISR, id) {
			c.isr = append(c.isr, id)
		}
	}
	c.broadcast()
	if c.r.IntN(6) == 0 {
		return // the answer is lost; the metadata tells
	}
	ans.Result, ans.ISR, ans.PartitionEpoch = machine.AlterAccepted, slices.Clone(c.isr), c.pe
	reply(ans)
}

func (c *cluster) check() {
	if len(c.isr) == 0 {
		c.fatalf("empty ISR")
	}
	for _, id := range c.isr {
		if c.unclean {
			break
		}
		l := c.brokers[id].log
		if len(l.recs) < len(c.committed) || !slices.Equal(l.recs[:len(c.committed)], c.committed) {
			c.fatalf("ISR member %d (ISR %v) does not hold the %d records committed so far", id, c.isr, len(c.committed))
		}
		for off, x := range c.acked {
			if off >= l.end() || l.recs[off] != x {
				c.fatalf("acknowledged %v at %d is not on ISR member %d (ISR %v, leader %d epoch %d)", x, off, id, c.isr, c.leader, c.le)
			}
		}
	}
}

// settle restarts and unfences everyone, delivers everything, and runs
// until all logs are the leader's.
func (c *cluster) settle() {
	for _, id := range c.replicas {
		if b := c.brokers[id]; !b.alive {
			c.fenceBroker(id)
			c.start(b)
		}
	}
	for _, id := range c.replicas {
		if c.fenced[id] {
			c.unfenceBroker(id)
		}
	}
	for range 500 {
		c.step++
		c.now = c.now.Add(time.Second)
		for _, id := range c.replicas {
			b := c.brokers[id]
			for len(b.inbox) > 0 {
				md := b.inbox[0]
				b.inbox = b.inbox[1:]
				c.apply(b, md)
			}
		}
		for len(c.alters) > 0 {
			c.answerAlter()
		}
		for _, id := range c.replicas {
			if b := c.brokers[id]; b.req != nil {
				c.deliver(b)
			}
		}
		for _, id := range c.replicas {
			c.leaderActs(c.brokers[id], c.brokers[id].pm.Step(c.now, machine.Tick{}, nil))
		}
		c.check()
		if c.leader == -1 {
			c.fatalf("no leader with everyone up: ISR %v", c.isr)
		}
		ld := c.brokers[c.leader]
		done := slices.Equal(c.isr, c.replicas) && ld.pm.Leading() && ld.pm.HW() == ld.log.end()
		for _, id := range c.replicas {
			done = done && slices.Equal(c.brokers[id].log.recs, ld.log.recs)
		}
		if done {
			c.t.Logf("settled: leader %d epoch %d, log %d, %d acked: %v", c.leader, c.le, ld.log.end(), len(c.acked), c.stats)
			return
		}
	}
	c.fatalf("did not settle: leader %d, ISR %v", c.leader, c.isr)
}

// commit records that leader b's log is committed up to hw.
func (c *cluster) commit(b *cbroker, hw int64) {
	for off, x := range b.log.recs[:hw] {
		if off < len(c.committed) && c.committed[off] != x {
			c.fatalf("leader %d commits %v at %d where %v was committed", b.id, x, off, c.committed[off])
		}
	}
	if int(hw) > len(c.committed) {
		c.committed = append(c.committed, b.log.recs[len(c.committed):hw]...)
	}
}
