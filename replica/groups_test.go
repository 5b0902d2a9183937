package replica_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// GroupPartition is Kafka's: Utils.abs(groupId.hashCode) % n, with Java's
// String.hashCode over UTF-16 code units (the hash codes below are Java's).
func TestGroupPartition(t *testing.T) {
	for _, tc := range []struct {
		group string
		hash  int64 // Java's "group".hashCode()
		n     int
	}{
		{"", 0, 50},
		{"g", 103, 50},
		{"hello", 99162322, 50},
		{"Hello World", -862545276, 50},         // negative: abs
		{"polygenelubricants", -2147483648, 50}, // Integer.MIN_VALUE: Kafka's abs gives 0
		{"\U0001F600", 1772899, 50},             // a surrogate pair: two code units
		{"Aa", 2112, 7},
		{"BB", 2112, 7},
	} {
		want := int(max(tc.hash, -tc.hash) % int64(tc.n))
		if tc.hash == -2147483648 {
			want = 0
		}
		require.Equal(t, want, replica.GroupPartition(tc.group, tc.n), "%q", tc.group)
	}
	require.Equal(t, 0, replica.GroupPartition("g", 0))
}

// groupsOn returns, for each member that leads a partition of
// __consumer_offsets, a group whose coordinator it is now (the leader of
// the group's partition); at least two members do. (A member fenced for a
// moment under load, as the controller sees it, may lead nothing until the
// preferred leaders return.)
func groupsOn(t *testing.T, c *memberCluster) map[int]string {
	t.Helper()
	img := c.any().Image()
	ot, ok := img.Topic(log.OffsetsTopic)
	require.True(t, ok)
	out := map[int]string{}
	for i := 0; len(out) < len(c.members) && i < 1000; i++ {
		g := fmt.Sprintf("group-%d", i)
		st := ot.Partitions[replica.GroupPartition(g, len(ot.Partitions))]
		if _, ok := out[st.Leader]; !ok && st.Leader != controller.NoLeader {
			out[st.Leader] = g
		}
	}
	require.GreaterOrEqual(t, len(out), 2, "leaders of %s: %v", log.OffsetsTopic, out)
	return out
}

// createOffsetsTopic makes the first group call, which creates
// __consumer_offsets, and waits until every member has applied it.
func createOffsetsTopic(t *testing.T, c *memberCluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := c.member(1).FetchOffsets(ctx, "probe", nil)
	require.NoError(t, err)
	for _, b := range c.members {
		c.waitImage(b, log.OffsetsTopic, func(img *controller.Image) bool {
			ot, ok := img.Topic(log.OffsetsTopic)
			for _, st := range ot.Partitions {
				ok = ok && st.Leader != controller.NoLeader
			}
			return ok
		})
	}
}

// knows reports whether one of a member's coordinators knows the group.
func knows(b *replica.Broker, g string) bool {
	for _, gc := range replica.KafkaBackend(b).Coordinators() {
		if _, ok := gc.Describe(g); ok {
			return true
		}
	}
	return false
}

// Groups spread over the 50 partitions of __consumer_offsets and so over
// the members that lead them: a group's commits, made through any member,
// live at its coordinator only, and every member names that coordinator.
func TestGroupsSpreadOverLeaders(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) { testGroupsSpreadOverLeaders(t, tr) })
	}
}

func testGroupsSpreadOverLeaders(t *testing.T, tr string) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, tr)
	c.createTopic("t", log.TopicConfig{Partitions: 2, ReplicationFactor: 3, MinInSyncReplicas: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The first group call creates __consumer_offsets, with Kafka's 50
	// partitions.
	createOffsetsTopic(t, c)
	n, err := c.member(2).Partitions(context.Background(), log.OffsetsTopic)
	require.NoError(t, err)
	require.Equal(t, replica.DefaultOffsetsTopicPartitions, n)
	cfg, err := c.member(3).TopicConfig(log.OffsetsTopic)
	require.NoError(t, err)
	require.Equal(t, 3, cfg.ReplicationFactor)

	groups := groupsOn(t, c)
	for coord, g := range groups {
		via := coord%3 + 1 // another member
		tp := log.TopicPartition{Topic: "t", Partition: coord % 2}
		require.NoError(t, c.member(via).CommitOffsets(ctx, g, "", -1, map[log.TopicPartition]int64{tp: int64(10 * coord)}))
		for id := 1; id <= 3; id++ {
			got, err := c.member(id).FetchOffsets(ctx, g, nil)
			require.NoError(t, err)
			require.Equal(t, map[log.TopicPartition]int64{tp: int64(10 * coord)}, got, "group %s through member %d", g, id)

			gc, node, ok := replica.KafkaBackend(c.member(id)).CoordinatorFor(ctx, g)
			require.True(t, ok)
			require.EqualValues(t, coord, node, "member %d names the coordinator of %s", id, g)
			require.Equal(t, id == coord, gc != nil, "member %d runs the coordinator of %s", id, g)
			require.Equal(t, id == coord, knows(c.member(id), g), "member %d knows group %s", id, g)
		}
	}

	// A Kafka client given one member's address finds each group's
	// coordinator (FindCoordinator) and commits there.
	dial := kafka.DialConfig{Seeds: []string{c.member(1).Addr()}}
	if tr == "kafka" {
		dial.Dial = c.net.Node("client").Dial
	}
	kc, err := kafka.Dial(ctx, dial)
	require.NoError(t, err)
	defer kc.Close()
	for coord, g := range groups {
		tp := log.TopicPartition{Topic: "t", Partition: 1 - coord%2}
		require.NoError(t, kc.CommitOffsets(ctx, g, "", -1, map[log.TopicPartition]int64{tp: 7}))
		var got map[log.TopicPartition]int64
		for _, gc := range replica.KafkaBackend(c.member(coord)).Coordinators() {
			if offs := gc.Committed(g, []log.TopicPartition{tp}); len(offs) > 0 {
				got = offs
			}
		}
		require.Equal(t, map[log.TopicPartition]int64{tp: 7}, got, "group %s at member %d", g, coord)
	}
}

// A group's coordinator is stopped while its consumers (on the other
// members) consume and commit: the group's partition gets a new leader,
// which loads the committed offsets from its replica; the consumers follow
// the coordinator there, every record is consumed and the commits survive.
func TestGroupCoordinatorFailover(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) { testGroupCoordinatorFailover(t, tr) })
	}
}

func testGroupCoordinatorFailover(t *testing.T, tr string) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, tr)
	const parts, total = 2, 200
	c.createTopic("t", log.TopicConfig{Partitions: parts, ReplicationFactor: 3, MinInSyncReplicas: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := newGroupRun(t, ctx, c, parts, total)
	r.produce(1, 0, total/2, false)
	for _, id := range r.hosts {
		cons, err := log.NewConsumer(c.member(id), log.ConsumerConfig{
			Group: r.g, Topics: []string{"t"}, MaxWait: 50 * time.Millisecond, SessionTimeout: 6 * time.Second,
		})
		require.NoError(t, err)
		// The next Poll rejoins.
		r.consume(id, cons, group.ErrRebalanceInProgress, group.ErrIllegalGeneration, group.ErrUnknownMember)
	}
	before := r.waitCommitted(1, nil)

	c.stop(r.coord)
	next := c.waitLeaderNot(c.member(r.hosts[0]), log.OffsetsTopic, replica.GroupPartition(r.g, replica.DefaultOffsetsTopicPartitions), r.coord)
	require.Contains(t, r.hosts, next)
	// The new coordinator has what the old one acknowledged.
	after, err := c.member(r.hosts[1]).FetchOffsets(ctx, r.g, r.tps)
	require.NoError(t, err)
	for tp, off := range before {
		require.GreaterOrEqual(t, after[tp], off, "%v after the failover, %v before", after, before)
	}

	r.produce(r.hosts[1], total/2, total, false)
	final := r.waitCommitted(total, nil)
	r.finish()
	for p := range parts {
		require.EqualValues(t, total/parts, final[log.TopicPartition{Topic: "t", Partition: p}])
	}
	require.True(t, knows(c.member(next), r.g), "the new coordinator, member %d, knows the group", next)
}

// groupRun is the fixture of the coordinator failover tests: the group
// whose coordinator is the member of the highest id, consumers of it on
// the two other members (hosts) that poll, keep every value seen and
// commit, and the records of topic "t" they consume. Its consumers are
// stopped and waited for before the test ends.
type groupRun struct {
	t     *testing.T
	ctx   context.Context
	c     *memberCluster
	coord int    // the member coordinating g
	g     string // a group coordinated by coord
	hosts []int  // the other members
	parts int    // of "t"
	tps   []log.TopicPartition
	vals  []string // value i goes to partition i % parts

	mu        sync.Mutex
	seen      map[string]bool
	committed chan struct{} // a consumer committed
	stop      chan struct{}
	errs      chan error // a consumer's failure
	wg        sync.WaitGroup
}

// newGroupRun creates __consumer_offsets on c (of 3 members) and picks the
// group and hosts.
func newGroupRun(t *testing.T, ctx context.Context, c *memberCluster, parts, total int) *groupRun {
	t.Helper()
	createOffsetsTopic(t, c)
	r := &groupRun{t: t, ctx: ctx, c: c, parts: parts, vals: values(total), seen: map[string]bool{},
		committed: make(chan struct{}, 64), stop: make(chan struct{})}
	for id, gid := range groupsOn(t, c) {
		if id > r.coord {
			r.coord, r.g = id, gid
		}
	}
	for id := 1; id <= 3; id++ {
		if id != r.coord {
			r.hosts = append(r.hosts, id)
		}
	}
	r.errs = make(chan error, len(r.hosts))
	for p := range parts {
		r.tps = append(r.tps, log.TopicPartition{Topic: "t", Partition: p})
	}
	t.Cleanup(r.halt)
	return r
}

// produce writes values [from, to) through member via (acks all;
// idempotent, a send that meets a leader change is not written twice).
func (r *groupRun) produce(via, from, to int, idempotent bool) {
	r.t.Helper()
	prod, err := log.NewProducer(r.c.member(via), log.ProducerConfig{Acks: log.AcksAll, Idempotent: idempotent, Timeout: 10 * time.Second})
	require.NoError(r.t, err)
	for i := from; i < to; i++ {
		_, err := prod.Send(r.ctx, log.Record{Topic: "t", Partition: i % r.parts, Value: []byte(r.vals[i])})
		require.NoError(r.t, err)
	}
	require.NoError(r.t, prod.Close())
}

// consume runs cons, on member id, until stop: it polls, keeps what it
// got and commits it. A commit error that is one of retry is left to the
// next Poll; any other error, or a failed Poll, ends it on errs.
func (r *groupRun) consume(id int, cons *log.Consumer, retry ...error) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer cons.Close()
		for {
			select {
			case <-r.stop:
				return
			default:
			}
			recs, err := cons.Poll(r.ctx)
			if err != nil {
				r.errs <- fmt.Errorf("member %d: poll: %w", id, err)
				return
			}
			r.mu.Lock()
			for _, rec := range recs {
				r.seen[string(rec.Value)] = true
			}
			r.mu.Unlock()
			if len(recs) == 0 {
				continue
			}
			err = cons.Commit(r.ctx)
			switch {
			case err == nil:
				select {
				case r.committed <- struct{}{}:
				default:
				}
			case slices.ContainsFunc(retry, func(e error) bool { return errors.Is(err, e) }):
			default:
				r.errs <- fmt.Errorf("member %d: commit: %w", id, err)
				return
			}
		}
	}()
}

// waitCommitted waits, commit by commit, until the group has committed
// want records in all, and returns its offsets; explain, if not nil, adds
// to the failure message.
func (r *groupRun) waitCommitted(want int64, explain func() string) map[log.TopicPartition]int64 {
	r.t.Helper()
	for {
		offs, err := r.c.member(r.hosts[0]).FetchOffsets(r.ctx, r.g, r.tps)
		require.NoError(r.t, err)
		var sum int64
		for _, o := range offs {
			sum += o
		}
		if sum >= want {
			return offs
		}
		select {
		case <-r.committed:
		case err := <-r.errs:
			r.t.Fatal(err)
		case <-r.ctx.Done():
			more := ""
			if explain != nil {
				more = "; " + explain()
			}
			r.t.Fatalf("group %s committed %v, want %d records%s", r.g, offs, want, more)
		}
	}
}

// halt stops the consumers and waits for them.
func (r *groupRun) halt() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	r.wg.Wait()
}

// finish halts the consumers and checks that none failed and that every
// value was consumed.
func (r *groupRun) finish() {
	r.t.Helper()
	r.halt()
	close(r.errs)
	for err := range r.errs {
		require.NoError(r.t, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Len(r.t, r.seen, len(r.vals), "every acknowledged record consumed")
}

// A group's metadata survives its coordinator: a member of a stable group
// on coordinator A heartbeats and commits in its generation at the new
// coordinator once A is stopped, without rejoining.
func TestGroupMembershipFailover(t *testing.T) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, "local")
	c.createTopic("t", log.TopicConfig{Partitions: 2, ReplicationFactor: 3, MinInSyncReplicas: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	createOffsetsTopic(t, c)
	coord, g := 0, ""
	for id, gid := range groupsOn(t, c) {
		if id > coord {
			coord, g = id, gid
		}
	}
	other := 1
	if coord == 1 {
		other = 2
	}
	coordinator := func(b *replica.Broker) *group.Coordinator {
		t.Helper()
		for {
			gc, _, ok := replica.KafkaBackend(b).CoordinatorFor(ctx, g)
			if ok && gc != nil {
				return gc
			}
			select {
			case <-ctx.Done():
				t.Fatalf("no coordinator of %s on member %d", g, b.ID())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	a := coordinator(c.member(coord))
	joined, err := a.Join(ctx, group.JoinRequest{Group: g, ClientID: "c", Topics: []string{"t"},
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second})
	require.NoError(t, err)
	require.Len(t, joined.Assignment, 2)
	d, _ := a.Describe(g)
	require.Equal(t, group.StateStable, d.State)

	c.stop(coord)
	next := c.waitLeaderNot(c.member(other), log.OffsetsTopic, replica.GroupPartition(g, replica.DefaultOffsetsTopicPartitions), coord)
	b := coordinator(c.member(next))
	d, ok := b.Describe(g)
	require.True(t, ok, "the new coordinator, member %d, knows the group", next)
	require.Equal(t, group.StateStable, d.State)
	require.Equal(t, joined.Generation, d.Generation)
	require.NoError(t, b.Heartbeat(ctx, g, joined.MemberID, joined.Generation))
	tp := log.TopicPartition{Topic: "t", Partition: 0}
	require.NoError(t, b.Commit(ctx, g, joined.MemberID, joined.Generation, map[log.TopicPartition]int64{tp: 3}))
	offs, err := c.member(other).FetchOffsets(ctx, g, []log.TopicPartition{tp})
	require.NoError(t, err)
	require.Equal(t, map[log.TopicPartition]int64{tp: 3}, offs)
	require.ErrorIs(t, b.Heartbeat(ctx, g, "stranger", joined.Generation), group.ErrUnknownMember)
	require.NoError(t, b.Leave(ctx, g, joined.MemberID))
}

// Commit metadata and leader epochs survive a coordinator move: a Kafka
// client commits with them (OffsetCommit v8) at the group's coordinator,
// that member is closed, and OffsetFetch answered by the new coordinator
// returns them.
func TestGroupCommitMetadataFailover(t *testing.T) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, "local")
	c.createTopic("t", log.TopicConfig{Partitions: 2, ReplicationFactor: 3, MinInSyncReplicas: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	createOffsetsTopic(t, c)
	coord, g := 0, ""
	for id, gid := range groupsOn(t, c) {
		if id > coord {
			coord, g = id, gid
		}
	}
	other := 1
	if coord == 1 {
		other = 2
	}
	// send sends req over a connection of its own to the member that
	// coordinates g now (as member other sees it) and returns its answer.
	send := func(req kmsg.Request) (kmsg.Response, error) {
		_, node, ok := replica.KafkaBackend(c.member(other)).CoordinatorFor(ctx, g)
		if !ok || node < 1 || int(node) > len(c.members) || c.members[node-1] == nil {
			return nil, fmt.Errorf("no live coordinator: node %d", node)
		}
		return kafkaRequest(c.member(int(node)).Addr(), req)
	}
	// retry sends req until the coordinator answers it (a loading one
	// says COORDINATOR_LOAD_IN_PROGRESS; one that just lost the group,
	// NOT_COORDINATOR).
	retry := func(req kmsg.Request, code func(kmsg.Response) int16) kmsg.Response {
		t.Helper()
		for {
			resp, err := send(req)
			if err == nil {
				switch cd := code(resp); cd {
				case 0:
					return resp
				case 14, 15, 16: // COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR
					err = fmt.Errorf("error code %d", cd)
				default:
					t.Fatalf("%T: error code %d", req, cd)
				}
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%T: no coordinator answered: %v", req, err)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation = 8, g, -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "t"
	for p, m := range []string{"first checkpoint", ""} {
		cp := kmsg.NewOffsetCommitRequestTopicPartition()
		cp.Partition, cp.Offset, cp.LeaderEpoch, cp.Metadata = int32(p), int64(40+p), int32(5+p), kmsg.StringPtr(m)
		ct.Partitions = append(ct.Partitions, cp)
	}
	commit.Topics = append(commit.Topics, ct)
	retry(commit, func(r kmsg.Response) int16 {
		for _, t := range r.(*kmsg.OffsetCommitResponse).Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return p.ErrorCode
				}
			}
		}
		return 0
	})

	c.stop(coord)
	next := c.waitLeaderNot(c.member(other), log.OffsetsTopic, replica.GroupPartition(g, replica.DefaultOffsetsTopicPartitions), coord)
	require.NotEqual(t, coord, next)

	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version, fetch.Group = 7, g
	ft := kmsg.NewOffsetFetchRequestTopic()
	ft.Topic, ft.Partitions = "t", []int32{0, 1}
	fetch.Topics = append(fetch.Topics, ft)
	resp := retry(fetch, func(r kmsg.Response) int16 { return r.(*kmsg.OffsetFetchResponse).ErrorCode }).(*kmsg.OffsetFetchResponse)
	require.Len(t, resp.Topics, 1)
	type got struct {
		offset   int64
		epoch    int32
		metadata string
	}
	var gots []got
	for _, p := range resp.Topics[0].Partitions {
		require.Zero(t, p.ErrorCode)
		m := ""
		if p.Metadata != nil {
			m = *p.Metadata
		}
		gots = append(gots, got{p.Offset, p.LeaderEpoch, m})
	}
	require.Equal(t, []got{{40, 5, "first checkpoint"}, {41, 6, ""}}, gots, "at the new coordinator, member %d", next)
}
