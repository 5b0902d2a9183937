package interop

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/kafka/kafkatest"
)

// groupMember is a kgo group consumer polling in a goroutine of its own
// until stopped, sending what it polls.
type groupMember struct {
	cl   *kgo.Client
	stop context.CancelFunc
	done chan struct{}
}

func startKgoMember(t *testing.T, seed, group, topic string, out chan<- *kgo.Record, opts ...kgo.Opt) *groupMember {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seed), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.AutoCommitInterval(100 * time.Millisecond), kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	m := &groupMember{cl: cl, stop: stop, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachError(func(topic string, p int32, err error) {
				if !errors.Is(err, context.Canceled) {
					t.Errorf("%s/%d: %v", topic, p, err)
				}
			})
			for _, r := range fs.Records() {
				select {
				case out <- r:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return m
}

// drain takes what members poll, in a goroutine, until ctx is done: a
// member blocked on a full channel polls no more and so commits no more.
func drain[T any](ctx context.Context, ch <-chan T) {
	go func() {
		for {
			select {
			case <-ch:
			case <-ctx.Done():
				return
			}
		}
	}()
}

// close stops polling and closes the client, which leaves the group.
func (m *groupMember) close() {
	m.stop()
	<-m.done
	m.cl.Close()
}

// awaitGroup polls DescribeGroups, bounded by ctx, until ok accepts the
// group: rebalances give a client nothing to await.
func awaitGroup(ctx context.Context, t *testing.T, adm *kadm.Client, group string, what string, ok func(kadm.DescribedGroup) bool) kadm.DescribedGroup {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last kadm.DescribedGroup
	for {
		dg, err := adm.DescribeGroups(ctx, group)
		if err == nil {
			last = dg[group]
			if last.Err == nil && ok(last) {
				return last
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("group %s never %s: last %+v, %v", group, what, last, err)
		case <-tick.C:
		}
	}
}

// assigned returns each member's assigned partitions of topic, sorted.
func assigned(dg kadm.DescribedGroup, topic string) [][]int32 {
	var out [][]int32
	for _, m := range dg.Members {
		var ps []int32
		if ca, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range ca.Topics {
				if t.Topic == topic {
					ps = append(ps, t.Partitions...)
				}
			}
		}
		slices.Sort(ps)
		out = append(out, ps)
	}
	return out
}

// balanced reports whether members hold n partitions between them, each
// once, spread evenly.
func balanced(as [][]int32, n int) bool {
	seen := map[int32]bool{}
	for _, ps := range as {
		if len(ps) < n/len(as) || len(ps) > (n+len(as)-1)/len(as) {
			return false
		}
		for _, p := range ps {
			if seen[p] {
				return false
			}
			seen[p] = true
		}
	}
	return len(seen) == n
}

// TestKgoGroup: two kgo group consumers with kgo's default balancer
// (cooperative-sticky) share a topic's partitions, read every record,
// commit; kadm sees the group, its members and its offsets, then, once they
// leave, deletes it.
func TestKgoGroup(t *testing.T) {
	const topic, group, parts = "events", "billing", 6
	c := kafkatest.New(t, kafkatest.Topic(topic, parts))
	ctx := testCtx(t, 30*time.Second)
	want := makeRecs("group", 300)
	kgoProduce(ctx, t, c.Addr(), topic, want)
	adm := newKadm(t, c.Addr())

	recs := make(chan *kgo.Record, 64)
	a := startKgoMember(t, c.Addr(), group, topic, recs)
	defer a.close()
	b := startKgoMember(t, c.Addr(), group, topic, recs)
	defer b.close()

	seen := map[[2]int64]bool{}
	var consumed []*kgo.Record
	for len(seen) < len(want) {
		select {
		case r := <-recs:
			consumed = append(consumed, r) // repeats allowed: delivery is at least once
			seen[[2]int64{int64(r.Partition), r.Offset}] = true
		case <-ctx.Done():
			t.Fatalf("the group consumed %d records of %d", len(seen), len(want))
		}
	}
	checkKgoConsumed(t, c, topic, consumed)
	drain(ctx, recs)

	dg := awaitGroup(ctx, t, adm, group, "stable with two members holding 3 partitions each", func(dg kadm.DescribedGroup) bool {
		return dg.State == "Stable" && len(dg.Members) == 2 && balanced(assigned(dg, topic), parts)
	})
	if dg.ProtocolType != "consumer" || dg.Protocol != "cooperative-sticky" {
		t.Errorf("group protocol %q %q, want consumer cooperative-sticky", dg.ProtocolType, dg.Protocol)
	}
	for _, m := range dg.Members {
		if m.ClientID != "kgo" || !strings.Contains(m.ClientHost, "127.0.0.1") || !strings.HasPrefix(m.MemberID, "kgo-") {
			t.Errorf("member %q: client id %q host %q, want kgo's client id, its host, an id prefixed by the client id", m.MemberID, m.ClientID, m.ClientHost)
		}
		if cm, ok := m.Join.AsConsumer(); !ok || !slices.Equal(cm.Topics, []string{topic}) {
			t.Errorf("member %q: join metadata %+v", m.MemberID, cm)
		}
	}
	lg, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := lg[group]; !ok || g.State != "Stable" || g.ProtocolType != "consumer" {
		t.Errorf("listed groups %+v", lg)
	}

	// Autocommit brings every partition's committed offset to its end.
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	awaitCommitted(ctx, t, adm, group, topic, ends)
	lags, err := adm.Lag(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if l := lags[group]; l.DescribeErr != nil || l.FetchErr != nil || l.Lag.Total() != 0 || len(l.Lag[topic]) != parts {
		t.Errorf("lag of %s: %+v", group, l)
	}
	for _, ml := range lags[group].Lag[topic] {
		if ml.Member == nil || ml.Err != nil || ml.Lag != 0 {
			t.Errorf("lag of %s/%d: member %v, lag %d, %v", topic, ml.Partition, ml.Member, ml.Lag, ml.Err)
		}
	}

	// One leaves: the other takes every partition.
	a.close()
	awaitGroup(ctx, t, adm, group, "left to one member with every partition", func(dg kadm.DescribedGroup) bool {
		as := assigned(dg, topic)
		return dg.State == "Stable" && len(as) == 1 && len(as[0]) == parts
	})
	b.close()
	awaitGroup(ctx, t, adm, group, "empty", func(dg kadm.DescribedGroup) bool {
		return dg.State == "Empty" && len(dg.Members) == 0
	})
	// Offsets outlive the members.
	awaitCommitted(ctx, t, adm, group, topic, ends)

	del, err := adm.DeleteGroups(ctx, group)
	if err != nil || del[group].Err != nil {
		t.Fatalf("delete group: %v %v", err, del[group].Err)
	}
	if lg, err := adm.ListGroups(ctx); err != nil || len(lg) != 0 {
		t.Errorf("groups after delete: %v, %v", lg, err)
	}
	if os, err := adm.FetchOffsets(ctx, group); err != nil || len(os) != 0 {
		t.Errorf("offsets after delete: %v, %v", os, err)
	}
	if dg, err := adm.DescribeGroups(ctx, group); err == nil && !errors.Is(dg[group].Err, kerr.GroupIDNotFound) && dg[group].State != "Dead" {
		t.Errorf("describe a deleted group: %+v", dg[group])
	}
}

// awaitCommitted polls, bounded by ctx, until group's committed offsets of
// topic are ends (autocommit runs on its own timer).
func awaitCommitted(ctx context.Context, t *testing.T, adm *kadm.Client, group, topic string, ends kadm.ListedOffsets) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		os, err := adm.FetchOffsets(ctx, group)
		done := err == nil
		ends.Each(func(e kadm.ListedOffset) {
			o, ok := os.Lookup(topic, e.Partition)
			done = done && ok && o.Err == nil && o.At == e.Offset
		})
		if done {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("committed offsets of %s never reached the ends %v: %v, %v", group, ends, os, err)
		case <-tick.C:
		}
	}
}

// TestKadmOffsets: kadm commits offsets for a group without members (a
// simple consumer's commit) and fetches them back.
func TestKadmOffsets(t *testing.T) {
	const topic = "t"
	c := kafkatest.New(t, kafkatest.Topic(topic, 3))
	ctx := testCtx(t, 10*time.Second)
	adm := newKadm(t, c.Addr())
	kgoProduce(ctx, t, c.Addr(), topic, makeRecs("off", 30))
	os := kadm.Offsets{}
	for p := range int32(3) {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: int64(p + 1), LeaderEpoch: -1})
	}
	r, err := adm.CommitOffsets(ctx, "admin", os)
	if err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}
	got, err := adm.FetchOffsets(ctx, "admin")
	if err != nil || got.Error() != nil {
		t.Fatalf("fetch: %v %v", err, got.Error())
	}
	for p := range int32(3) {
		o, ok := got.Lookup(topic, p)
		if !ok || o.At != int64(p+1) {
			t.Errorf("partition %d: committed %+v", p, o)
		}
	}
	lg, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := lg["admin"]; !ok || g.State != "Empty" {
		t.Errorf("listed groups %+v", lg)
	}
	// A kgo group consumer starts from the committed offsets.
	recs := make(chan *kgo.Record, 64)
	m := startKgoMember(t, c.Addr(), "admin", topic, recs)
	defer m.close()
	parts := stored(t, c, topic)
	want := 0
	for _, rs := range parts {
		want += len(rs)
	}
	for n := 0; n < want-(1+2+3); n++ {
		select {
		case r := <-recs:
			if r.Offset < int64(r.Partition+1) {
				t.Fatalf("consumed %d/%d, before the committed offset %d", r.Partition, r.Offset, r.Partition+1)
			}
		case <-ctx.Done():
			t.Fatalf("consumed %d of %d", n, want-6)
		}
	}
}

// TestKgoStaticMembers: kgo members with instance ids (KIP-345). One that
// closes does not leave: the group keeps it, and its restart, with the same
// instance id, gets its partitions back.
func TestKgoStaticMembers(t *testing.T) {
	const topic, group, parts = "static", "sg", 4
	c := kafkatest.New(t, kafkatest.Topic(topic, parts))
	ctx := testCtx(t, 30*time.Second)
	adm := newKadm(t, c.Addr())
	recs := make(chan *kgo.Record, 64)
	drain(ctx, recs) // nothing is produced: drain anyway
	opts := func(id string) []kgo.Opt {
		return []kgo.Opt{kgo.InstanceID(id), kgo.SessionTimeout(20 * time.Second), kgo.Balancers(kgo.RangeBalancer())}
	}
	a := startKgoMember(t, c.Addr(), group, topic, recs, opts("a")...)
	b := startKgoMember(t, c.Addr(), group, topic, recs, opts("b")...)
	defer b.close()
	byInstance := func(dg kadm.DescribedGroup) map[string][]int32 {
		out := map[string][]int32{}
		as := assigned(dg, topic)
		for i, m := range dg.Members {
			if m.InstanceID != nil {
				out[*m.InstanceID] = as[i]
			}
		}
		return out
	}
	dg := awaitGroup(ctx, t, adm, group, "stable with static members a and b", func(dg kadm.DescribedGroup) bool {
		return dg.State == "Stable" && len(byInstance(dg)) == 2 && balanced(assigned(dg, topic), parts)
	})
	before := byInstance(dg)

	a.close()
	after, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if got := byInstance(after[group]); len(got) != 2 || !slices.Equal(got["a"], before["a"]) {
		t.Fatalf("after a closed: %v (state %s), want a kept with %v", got, after[group].State, before["a"])
	}
	a = startKgoMember(t, c.Addr(), group, topic, recs, opts("a")...)
	defer a.close()
	awaitGroup(ctx, t, adm, group, "stable with a back", func(dg kadm.DescribedGroup) bool {
		got := byInstance(dg)
		return dg.State == "Stable" && len(dg.Members) == 2 && len(got) == 2 && slices.Equal(got["a"], before["a"]) && slices.Equal(got["b"], before["b"])
	})
}

// TestKgoGroupChurn: kgo members (cooperative-sticky) join and leave while
// another client produces: every record is read at least once, and at the
// end the survivors' commits reach the end offsets.
func TestKgoGroupChurn(t *testing.T) {
	const topic, group, parts = "churn", "churn", 6
	c := kafkatest.New(t, kafkatest.Topic(topic, parts))
	ctx := testCtx(t, 40*time.Second)
	adm := newKadm(t, c.Addr())
	want := makeRecs("churn", 3000)
	produced := make(chan error, 1)
	go func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.ProducerLinger(time.Millisecond))
		if err != nil {
			produced <- err
			return
		}
		defer cl.Close()
		for i := 0; i < len(want); i += 100 {
			if err := cl.ProduceSync(ctx, kgoRecords(topic, want[i:i+100])...).FirstErr(); err != nil {
				produced <- err
				return
			}
		}
		produced <- nil
	}()

	recs := make(chan *kgo.Record, 256)
	members := []*groupMember{startKgoMember(t, c.Addr(), group, topic, recs)}
	defer func() {
		for _, m := range members {
			if m != nil {
				m.close()
			}
		}
	}()
	seen := map[string]bool{}
	steps := map[int]func(){
		500:  func() { members = append(members, startKgoMember(t, c.Addr(), group, topic, recs)) },
		1200: func() { members = append(members, startKgoMember(t, c.Addr(), group, topic, recs)) },
		2000: func() { members[0].close(); members[0] = nil },
	}
	for len(seen) < len(want) {
		select {
		case r := <-recs:
			seen[string(r.Value)] = true
			if step, ok := steps[len(seen)]; ok {
				delete(steps, len(seen))
				step()
			}
		case err := <-produced:
			if err != nil {
				t.Fatal(err)
			}
		case <-ctx.Done():
			t.Fatalf("the group read %d records of %d", len(seen), len(want))
		}
	}
	// Members that took over the leaver's partitions read again from its
	// last commits: keep taking what they poll.
	drain(ctx, recs)
	awaitGroup(ctx, t, adm, group, "stable with the two members left", func(dg kadm.DescribedGroup) bool {
		return dg.State == "Stable" && len(dg.Members) == 2 && balanced(assigned(dg, topic), parts)
	})
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	awaitCommitted(ctx, t, adm, group, topic, ends)
	checkStored(t, c, topic, want, javaPartitioner)
}
