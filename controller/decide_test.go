package controller

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// scriptedRand returns the IntN values it was given, in order, and counts
// up from 1 for Uint64.
type scriptedRand struct {
	ints []int
	u64  uint64
}

func (r *scriptedRand) IntN(n int) int {
	v := r.ints[0]
	r.ints = r.ints[1:]
	if v >= n {
		panic(fmt.Sprintf("scripted %d not below %d", v, n))
	}
	return v
}

func (r *scriptedRand) Uint64() uint64 { r.u64++; return r.u64 }

// build applies recs to an empty image, failing the test on any error.
func build(t *testing.T, recs ...record) *Image {
	t.Helper()
	img := newImage()
	applyAll(t, img, recs)
	return img
}

func applyAll(t *testing.T, img *Image, recs []record) {
	t.Helper()
	for _, r := range recs {
		require.NoError(t, img.apply(r), "apply %#v", r)
	}
}

// liveBrokerRecords registers and unfences brokers ids, with epochs 1, 2, ...
func liveBrokerRecords(ids ...int) []record {
	var recs []record
	for i, id := range ids {
		recs = append(recs,
			registerBrokerRecord{ID: id, Epoch: int64(i + 1), Addr: fmt.Sprintf("b%d:9092", id)},
			unfenceBrokerRecord{ID: id, Epoch: int64(i + 1)})
	}
	return recs
}

var tid = TopicID{1, 2, 3}

// topicWith returns records of a topic "t" with the given partitions.
func topicWith(unclean bool, parts ...PartitionState) []record {
	recs := []record{topicRecord{Name: "t", ID: tid, MinISR: 1, Unclean: unclean}}
	for i, p := range parts {
		p.Partition = i
		recs = append(recs, partitionRecord{TopicID: tid, State: p})
	}
	return recs
}

func ps(replicas, isr []int, leader int, le, pe int32) PartitionState {
	return PartitionState{Replicas: replicas, ISR: isr, Leader: leader, LeaderEpoch: le, PartitionEpoch: pe}
}

func TestAssignReplicasMatchesKafkaExample(t *testing.T) {
	// The example in the comment of Kafka's AdminUtils.assignReplicasToBrokers:
	// 5 brokers, 10 partitions, 3 replicas, start index 0, shift 0.
	got := assignReplicas([]int{0, 1, 2, 3, 4}, 10, 3, 0, 0, nil)
	want := [][]int{
		{0, 1, 2}, {1, 2, 3}, {2, 3, 4}, {3, 4, 0}, {4, 0, 1},
		{0, 2, 3}, {1, 3, 4}, {2, 4, 0}, {3, 0, 1}, {4, 1, 2},
	}
	require.Equal(t, want, got)
}

func TestAssignReplicasRandomStart(t *testing.T) {
	// Start index 2 and shift 1 drawn from the random source.
	got := assignReplicas([]int{10, 20, 30, 40}, 5, 2, -1, 0, &scriptedRand{ints: []int{2, 1}})
	want := [][]int{
		{30, 10}, // first=(0+2)%4=2; follower (2+1+1%3)%4=0
		{40, 20}, // first=3; (3+2)%4=1
		{10, 30}, // first=0; (0+2)%4=2
		{20, 40}, // first=1; 3
		{30, 20}, // p=4 is a multiple of 4: shift=2; first=2; (2+1+2)%4=1
	}
	require.Equal(t, want, got)
}

func TestAssignReplicasSpreadsEvenly(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for n := 1; n <= 7; n++ {
		brokers := make([]int, n)
		for i := range brokers {
			brokers[i] = i + 1
		}
		for rf := 1; rf <= n; rf++ {
			for rounds := 1; rounds <= 3; rounds++ {
				p := n * rounds
				asg := assignReplicas(brokers, p, rf, -1, 0, rnd)
				require.Len(t, asg, p)
				leaders := map[int]int{}
				replicas := map[int]int{}
				for _, rs := range asg {
					require.Len(t, rs, rf)
					require.Len(t, uniq(rs), rf, "duplicate replica in %v", rs)
					leaders[rs[0]]++
					for _, r := range rs {
						replicas[r]++
					}
				}
				for _, b := range brokers {
					require.Equal(t, rounds, leaders[b], "n=%d rf=%d: leaders of broker %d", n, rf, b)
					require.Equal(t, rounds*rf, replicas[b], "n=%d rf=%d: replicas of broker %d", n, rf, b)
				}
			}
		}
	}
}

func TestAssignReplicasShiftsFollowersEachRound(t *testing.T) {
	// Over n-1 rounds, the second replica of a given leader visits every
	// other broker once: the shift rule at work.
	brokers := []int{1, 2, 3, 4, 5}
	asg := assignReplicas(brokers, 5*4, 2, 0, 0, nil)
	followers := map[int][]int{}
	for _, rs := range asg {
		followers[rs[0]] = append(followers[rs[0]], rs[1])
	}
	for _, b := range brokers {
		got := slices.Sorted(slices.Values(followers[b]))
		want := slices.DeleteFunc(slices.Clone(brokers), func(x int) bool { return x == b })
		require.Equal(t, want, got, "followers of leader %d", b)
	}
}

func uniq(xs []int) []int {
	s := slices.Sorted(slices.Values(xs))
	return slices.Compact(s)
}

func TestDecideCreateTopic(t *testing.T) {
	base := append(liveBrokerRecords(1, 2, 3), registerBrokerRecord{ID: 4, Epoch: 4, Addr: "b4"}) // 4 is fenced
	idFromRand := TopicID{1, 0, 0, 0, 0, 0, 0, 0, 2}
	tests := []struct {
		name    string
		topic   string
		spec    TopicSpec
		extra   []record
		want    []record
		wantErr error
	}{
		{
			name: "defaults: one partition, one replica", topic: "a",
			want: []record{
				topicRecord{Name: "a", ID: idFromRand, MinISR: 1},
				partitionRecord{TopicID: idFromRand, State: ps([]int{2}, []int{2}, 2, 0, 0)},
			},
		},
		{
			name: "three partitions, rf 3, live brokers only", topic: "a",
			spec: TopicSpec{Partitions: 3, ReplicationFactor: 3, MinInSyncReplicas: 2, UncleanLeaderElection: true, Configs: map[string]string{"retention.ms": "1"}},
			want: []record{
				topicRecord{Name: "a", ID: idFromRand, MinISR: 2, Unclean: true, Configs: map[string]string{"retention.ms": "1"}},
				partitionRecord{TopicID: idFromRand, State: PartitionState{Partition: 0, Replicas: []int{2, 3, 1}, ISR: []int{2, 3, 1}, Leader: 2}},
				partitionRecord{TopicID: idFromRand, State: PartitionState{Partition: 1, Replicas: []int{3, 1, 2}, ISR: []int{3, 1, 2}, Leader: 3}},
				partitionRecord{TopicID: idFromRand, State: PartitionState{Partition: 2, Replicas: []int{1, 2, 3}, ISR: []int{1, 2, 3}, Leader: 1}},
			},
		},
		{name: "rf above live brokers", topic: "a", spec: TopicSpec{ReplicationFactor: 4}, wantErr: ErrInvalidReplicationFactor},
		{name: "negative rf", topic: "a", spec: TopicSpec{ReplicationFactor: -1}, wantErr: ErrInvalidReplicationFactor},
		{name: "negative partitions", topic: "a", spec: TopicSpec{Partitions: -1}, wantErr: ErrInvalidPartitions},
		{name: "too many partitions", topic: "a", spec: TopicSpec{Partitions: maxPartitions + 1}, wantErr: ErrInvalidPartitions},
		{name: "min isr above rf", topic: "a", spec: TopicSpec{ReplicationFactor: 2, MinInSyncReplicas: 3}, wantErr: ErrInvalidConfig},
		{name: "empty config key", topic: "a", spec: TopicSpec{Configs: map[string]string{"": "x"}}, wantErr: ErrInvalidConfig},
		{name: "empty name", topic: "", wantErr: ErrInvalidTopic},
		{name: "dot", topic: ".", wantErr: ErrInvalidTopic},
		{name: "illegal character", topic: "a/b", wantErr: ErrInvalidTopic},
		{name: "too long", topic: string(make([]byte, 250)), wantErr: ErrInvalidTopic},
		{name: "exists", topic: "t", extra: topicWith(false, ps([]int{1}, []int{1}, 1, 0, 0)), wantErr: ErrTopicExists},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			img := build(t, append(slices.Clone(base), tc.extra...)...)
			// IntN: start index 1, shift 0 (over brokers 1,2,3). Uint64: 1, 2.
			got, err := decideCreateTopic(img, tc.topic, tc.spec, &scriptedRand{ints: []int{1, 0}})
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.Nil(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			applyAll(t, img, got)
		})
	}
}

func TestNewTopicIDSkipsUsedAndZero(t *testing.T) {
	used := TopicID{1, 0, 0, 0, 0, 0, 0, 0, 2}
	img := build(t, topicRecord{Name: "x", ID: used})
	// Uint64 yields 1,2 (the used ID), then 3,4.
	id := newTopicID(img, &scriptedRand{})
	require.Equal(t, TopicID{3, 0, 0, 0, 0, 0, 0, 0, 4}, id)
}

func TestDecideCreatePartitions(t *testing.T) {
	// Partition 0's first replica is 2; live brokers 1,2,3 → start index 1.
	base := append(liveBrokerRecords(1, 2, 3), topicWith(false,
		ps([]int{2, 3}, []int{2, 3}, 2, 0, 0),
		ps([]int{3, 1}, []int{3, 1}, 3, 0, 0))...)
	img := build(t, base...)
	got, err := decideCreatePartitions(img, "t", 4)
	require.NoError(t, err)
	// start=1, shift=1, partitions 2 and 3: p=2 first=(2+1)%3=0 → 1, follower (0+1+1%2)%3=2 → 3;
	// p=3 (multiple of 3: shift 2) first=(3+1)%3=1 → 2, follower (1+1+2%2)%3=2 → 3.
	require.Equal(t, []record{
		partitionRecord{TopicID: tid, State: PartitionState{Partition: 2, Replicas: []int{1, 3}, ISR: []int{1, 3}, Leader: 1}},
		partitionRecord{TopicID: tid, State: PartitionState{Partition: 3, Replicas: []int{2, 3}, ISR: []int{2, 3}, Leader: 2}},
	}, got)
	applyAll(t, img, got)

	for _, tc := range []struct {
		topic string
		total int
		err   error
	}{
		{"nope", 5, ErrUnknownTopic},
		{"t", 4, ErrInvalidPartitions},
		{"t", 3, ErrInvalidPartitions},
		{"t", maxPartitions + 1, ErrInvalidPartitions},
	} {
		_, err := decideCreatePartitions(img, tc.topic, tc.total)
		require.ErrorIs(t, err, tc.err, "%s to %d", tc.topic, tc.total)
	}
	// Not enough live brokers for the topic's replication factor.
	applyAll(t, img, fenceBroker(img, 3))
	applyAll(t, img, fenceBroker(img, 2))
	_, err = decideCreatePartitions(img, "t", 5)
	require.ErrorIs(t, err, ErrInvalidReplicationFactor)
}

func TestDecideDeleteTopic(t *testing.T) {
	img := build(t, append(liveBrokerRecords(1), topicWith(false, ps([]int{1}, []int{1}, 1, 0, 0))...)...)
	got, err := decideDeleteTopic(img, "t")
	require.NoError(t, err)
	require.Equal(t, []record{removeTopicRecord{TopicID: tid}}, got)
	applyAll(t, img, got)
	_, ok := img.Topic("t")
	require.False(t, ok)
	_, ok = img.TopicByID(tid)
	require.False(t, ok)
	_, err = decideDeleteTopic(img, "t")
	require.ErrorIs(t, err, ErrUnknownTopic)
}

func TestElectLeader(t *testing.T) {
	liveSet := func(ids ...int) func(int) bool { return func(r int) bool { return slices.Contains(ids, r) } }
	tests := []struct {
		name       string
		replicas   []int
		isr        []int
		current    int
		acceptable func(int) bool
		unclean    bool
		wantLeader int
		wantISR    []int
	}{
		{"current leader stays", []int{1, 2, 3}, []int{1, 2, 3}, 2, liveSet(1, 2, 3), false, 2, []int{1, 2, 3}},
		{"first live isr replica in assignment order", []int{3, 1, 2}, []int{1, 2}, 3, liveSet(1, 2), false, 1, []int{1, 2}},
		{"skips dead isr member", []int{1, 2, 3}, []int{2, 3}, 1, liveSet(3), false, 3, []int{2, 3}},
		{"no live isr member: offline", []int{1, 2, 3}, []int{2}, 1, liveSet(3), false, NoLeader, []int{2}},
		{"unclean: first live replica, isr reset", []int{1, 2, 3}, []int{2}, 1, liveSet(3), true, 3, []int{3}},
		{"unclean not needed", []int{1, 2, 3}, []int{2, 3}, 1, liveSet(2, 3), true, 2, []int{2, 3}},
		{"unclean but nobody alive", []int{1, 2}, []int{1}, 1, liveSet(), true, NoLeader, []int{1}},
		{"leaderless partition gets one", []int{1, 2}, []int{2}, NoLeader, liveSet(2), false, 2, []int{2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leader, isr := electLeader(tc.replicas, tc.isr, tc.current, tc.acceptable, tc.unclean)
			require.Equal(t, tc.wantLeader, leader)
			require.Equal(t, tc.wantISR, isr)
		})
	}
}

func TestFenceBroker(t *testing.T) {
	tests := []struct {
		name    string
		unclean bool
		part    PartitionState
		want    []record // partition changes, before the fence record
	}{
		{
			name: "leader moves to next live isr replica in assignment order",
			part: ps([]int{2, 3, 1}, []int{2, 3, 1}, 2, 4, 7),
			want: []record{partitionChangeRecord{TopicID: tid, Partition: 0, Leader: 3, ISR: []int{3, 1}, LeaderEpoch: 5, PartitionEpoch: 8}},
		},
		{
			name: "follower leaves the isr, leader epoch unchanged",
			part: ps([]int{1, 2, 3}, []int{1, 2, 3}, 1, 4, 7),
			want: []record{partitionChangeRecord{TopicID: tid, Partition: 0, Leader: 1, ISR: []int{1, 3}, LeaderEpoch: 4, PartitionEpoch: 8}},
		},
		{
			name: "last isr member: offline, isr kept",
			part: ps([]int{2, 1}, []int{2}, 2, 4, 7),
			want: []record{partitionChangeRecord{TopicID: tid, Partition: 0, Leader: NoLeader, ISR: []int{2}, LeaderEpoch: 5, PartitionEpoch: 8}},
		},
		{
			name: "last isr member with unclean election: out-of-sync replica leads",
			part: ps([]int{2, 1}, []int{2}, 2, 4, 7), unclean: true,
			want: []record{partitionChangeRecord{TopicID: tid, Partition: 0, Leader: 1, ISR: []int{1}, LeaderEpoch: 5, PartitionEpoch: 8}},
		},
		{
			name: "not in isr: nothing changes",
			part: ps([]int{1, 2}, []int{1}, 1, 4, 7),
		},
		{
			name: "other isr member dead too: offline",
			part: ps([]int{2, 4, 1}, []int{2, 4}, 2, 0, 0),
			want: []record{partitionChangeRecord{TopicID: tid, Partition: 0, Leader: NoLeader, ISR: []int{4}, LeaderEpoch: 1, PartitionEpoch: 1}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			recs := append(liveBrokerRecords(1, 2, 3), registerBrokerRecord{ID: 4, Epoch: 4, Addr: "b4"})
			img := build(t, append(recs, topicWith(tc.unclean, tc.part)...)...)
			got := fenceBroker(img, 2)
			want := append(tc.want, fenceBrokerRecord{ID: 2, Epoch: 2})
			require.Equal(t, want, got)
			before := encodeSnapshot(nil, img)
			applyAll(t, img.cloneShared(), got) // applies cleanly
			require.Equal(t, before, encodeSnapshot(nil, img), "decision modified the image")
		})
	}
}

func TestUnfenceBrokerElectsLeaderlessPartitions(t *testing.T) {
	recs := append(liveBrokerRecords(1, 2, 3), topicWith(false,
		ps([]int{2, 1}, []int{2}, 2, 4, 7),    // becomes leaderless when 2 is fenced
		ps([]int{1, 2}, []int{1, 2}, 1, 0, 0), // 2 leaves the ISR
		ps([]int{3, 1}, []int{3, 1}, 3, 0, 0), // untouched
	)...)
	img := build(t, recs...)
	applyAll(t, img, fenceBroker(img, 2))
	p0, _ := img.Partition("t", 0)
	require.Equal(t, ps([]int{2, 1}, []int{2}, NoLeader, 5, 8), PartitionState{Replicas: p0.Replicas, ISR: p0.ISR, Leader: p0.Leader, LeaderEpoch: p0.LeaderEpoch, PartitionEpoch: p0.PartitionEpoch})

	got := unfenceBroker(img, 2)
	require.Equal(t, []record{
		unfenceBrokerRecord{ID: 2, Epoch: 2},
		partitionChangeRecord{TopicID: tid, Partition: 0, Leader: 2, ISR: []int{2}, LeaderEpoch: 6, PartitionEpoch: 9},
	}, got)
	applyAll(t, img, got)
	b, _ := img.Broker(2)
	require.False(t, b.Fenced)
}

func TestDecideRegisterBroker(t *testing.T) {
	img := build(t, append(liveBrokerRecords(1, 2), topicWith(false, ps([]int{1, 2}, []int{1, 2}, 1, 0, 0))...)...)

	got, err := decideRegisterBroker(img, BrokerRegistration{ID: 3, Addr: "b3"})
	require.NoError(t, err)
	require.Equal(t, []record{registerBrokerRecord{ID: 3, Epoch: 3, Addr: "b3"}}, got)
	applyAll(t, img, got)
	b, _ := img.Broker(3)
	require.Equal(t, BrokerInfo{ID: 3, Addr: "b3", Epoch: 3, Fenced: true}, b)

	// Broker 1 restarts while unfenced: fenced first (leaves the ISR, loses
	// leadership), then registered with a new epoch.
	got, err = decideRegisterBroker(img, BrokerRegistration{ID: 1, Addr: "b1-new"})
	require.NoError(t, err)
	require.Equal(t, []record{
		partitionChangeRecord{TopicID: tid, Partition: 0, Leader: 2, ISR: []int{2}, LeaderEpoch: 1, PartitionEpoch: 1},
		fenceBrokerRecord{ID: 1, Epoch: 1},
		registerBrokerRecord{ID: 1, Epoch: 4, Addr: "b1-new"},
	}, got)
	applyAll(t, img, got)

	for _, reg := range []BrokerRegistration{{ID: 0, Addr: "x"}, {ID: -2, Addr: "x"}, {ID: 5}} {
		_, err := decideRegisterBroker(img, reg)
		require.ErrorIs(t, err, ErrInvalidRequest, "%+v", reg)
	}
}

func TestDecideHeartbeat(t *testing.T) {
	base := append(liveBrokerRecords(1, 2), registerBrokerRecord{ID: 3, Epoch: 3, Addr: "b3"})
	base = append(base, topicWith(false, ps([]int{1, 2}, []int{1, 2}, 1, 0, 0))...)
	tests := []struct {
		name     string
		hb       HeartbeatRequest
		want     []record
		wantResp HeartbeatResponse
		wantErr  error
	}{
		{name: "unknown broker", hb: HeartbeatRequest{BrokerID: 9, BrokerEpoch: 1}, wantErr: ErrUnknownBroker},
		{name: "stale epoch", hb: HeartbeatRequest{BrokerID: 1, BrokerEpoch: 7}, wantErr: ErrStaleBrokerEpoch},
		{name: "alive stays alive", hb: HeartbeatRequest{BrokerID: 1, BrokerEpoch: 1}, wantResp: HeartbeatResponse{Fenced: false}},
		{name: "fenced and wants to stay fenced", hb: HeartbeatRequest{BrokerID: 3, BrokerEpoch: 3, WantFence: true}, wantResp: HeartbeatResponse{Fenced: true}},
		{
			name: "fenced broker is unfenced", hb: HeartbeatRequest{BrokerID: 3, BrokerEpoch: 3},
			want: []record{unfenceBrokerRecord{ID: 3, Epoch: 3}}, wantResp: HeartbeatResponse{Fenced: false},
		},
		{
			name: "controlled shutdown fences", hb: HeartbeatRequest{BrokerID: 1, BrokerEpoch: 1, WantFence: true},
			want: []record{
				partitionChangeRecord{TopicID: tid, Partition: 0, Leader: 2, ISR: []int{2}, LeaderEpoch: 1, PartitionEpoch: 1},
				fenceBrokerRecord{ID: 1, Epoch: 1},
			},
			wantResp: HeartbeatResponse{Fenced: true},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			img := build(t, base...)
			got, resp, err := decideHeartbeat(img, tc.hb)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.wantResp, resp)
			applyAll(t, img, got)
			b, _ := img.Broker(tc.hb.BrokerID)
			require.Equal(t, resp.Fenced, b.Fenced)
		})
	}
}

func TestDecideFenceExpired(t *testing.T) {
	img := build(t, append(liveBrokerRecords(1, 2, 3), topicWith(false, ps([]int{1, 2, 3}, []int{1, 2, 3}, 1, 0, 0))...)...)
	t0 := time.Unix(1000, 0)
	deadlines := map[int]time.Time{1: t0, 2: t0.Add(-time.Second), 3: t0.Add(time.Nanosecond)}

	require.Empty(t, decideFenceExpired(img, deadlines, t0.Add(-2*time.Second)))

	// 1 and 2 expire together; the second fence builds on the first, so the
	// partition ends up led by 3 with the ISR [3].
	got := decideFenceExpired(img, deadlines, t0)
	require.Equal(t, []record{
		partitionChangeRecord{TopicID: tid, Partition: 0, Leader: 2, ISR: []int{2, 3}, LeaderEpoch: 1, PartitionEpoch: 1},
		fenceBrokerRecord{ID: 1, Epoch: 1},
		partitionChangeRecord{TopicID: tid, Partition: 0, Leader: 3, ISR: []int{3}, LeaderEpoch: 2, PartitionEpoch: 2},
		fenceBrokerRecord{ID: 2, Epoch: 2},
	}, got)
	applyAll(t, img, got)
	require.Empty(t, decideFenceExpired(img, deadlines, t0), "fenced brokers are not fenced again")
}

func TestDecideAlterPartition(t *testing.T) {
	base := append(liveBrokerRecords(1, 2, 3), registerBrokerRecord{ID: 4, Epoch: 4, Addr: "b4"})
	base = append(base, topicWith(false, ps([]int{1, 2, 3, 4}, []int{1, 2}, 1, 5, 9))...)
	ok := AlterPartitionRequest{BrokerID: 1, BrokerEpoch: 1, Topic: "t", Partition: 0, LeaderEpoch: 5, PartitionEpoch: 9}
	with := func(f func(*AlterPartitionRequest)) AlterPartitionRequest {
		r := ok
		f(&r)
		return r
	}
	tests := []struct {
		name    string
		req     AlterPartitionRequest
		want    []record
		wantErr error
	}{
		{name: "expand, stored in assignment order", req: with(func(r *AlterPartitionRequest) { r.ISR = []int{3, 2, 1} }),
			want: []record{partitionChangeRecord{TopicID: tid, Partition: 0, Leader: 1, ISR: []int{1, 2, 3}, LeaderEpoch: 5, PartitionEpoch: 10}}},
		{name: "shrink", req: with(func(r *AlterPartitionRequest) { r.ISR = []int{1} }),
			want: []record{partitionChangeRecord{TopicID: tid, Partition: 0, Leader: 1, ISR: []int{1}, LeaderEpoch: 5, PartitionEpoch: 10}}},
		{name: "same isr: no change", req: with(func(r *AlterPartitionRequest) { r.ISR = []int{2, 1} })},
		{name: "unknown broker", req: with(func(r *AlterPartitionRequest) { r.BrokerID = 9; r.ISR = []int{1} }), wantErr: ErrUnknownBroker},
		{name: "stale broker epoch", req: with(func(r *AlterPartitionRequest) { r.BrokerEpoch = 0; r.ISR = []int{1} }), wantErr: ErrStaleBrokerEpoch},
		{name: "unknown topic", req: with(func(r *AlterPartitionRequest) { r.Topic = "x"; r.ISR = []int{1} }), wantErr: ErrUnknownTopic},
		{name: "unknown partition", req: with(func(r *AlterPartitionRequest) { r.Partition = 1; r.ISR = []int{1} }), wantErr: ErrUnknownPartition},
		{name: "not the leader", req: with(func(r *AlterPartitionRequest) { r.BrokerID = 2; r.BrokerEpoch = 2; r.ISR = []int{2} }), wantErr: ErrNotPartitionLeader},
		{name: "old leader epoch", req: with(func(r *AlterPartitionRequest) { r.LeaderEpoch = 4; r.ISR = []int{1} }), wantErr: ErrFencedLeaderEpoch},
		{name: "stale partition epoch", req: with(func(r *AlterPartitionRequest) { r.PartitionEpoch = 8; r.ISR = []int{1} }), wantErr: ErrStalePartitionEpoch},
		{name: "future partition epoch", req: with(func(r *AlterPartitionRequest) { r.PartitionEpoch = 10; r.ISR = []int{1} }), wantErr: ErrStalePartitionEpoch},
		{name: "empty isr", req: with(func(r *AlterPartitionRequest) { r.ISR = nil }), wantErr: ErrInvalidISR},
		{name: "leader left out", req: with(func(r *AlterPartitionRequest) { r.ISR = []int{2, 3} }), wantErr: ErrInvalidISR},
		{name: "duplicate", req: with(func(r *AlterPartitionRequest) { r.ISR = []int{1, 2, 2} }), wantErr: ErrInvalidISR},
		{name: "not a replica", req: with(func(r *AlterPartitionRequest) { r.ISR = []int{1, 5} }), wantErr: ErrInvalidISR},
		{name: "fenced replica", req: with(func(r *AlterPartitionRequest) { r.ISR = []int{1, 4} }), wantErr: ErrIneligibleReplica},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			img := build(t, base...)
			got, err := decideAlterPartition(img, tc.req)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.Nil(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			applyAll(t, img, got)
		})
	}
}

func TestStaleAlterPartitionAfterFailover(t *testing.T) {
	// The leader proposes an ISR change, then loses leadership to a fence:
	// its proposal, carrying the old epochs, is rejected.
	img := build(t, append(liveBrokerRecords(1, 2, 3), topicWith(false, ps([]int{1, 2, 3}, []int{1, 2, 3}, 1, 0, 0))...)...)
	applyAll(t, img, fenceBroker(img, 1))
	_, err := decideAlterPartition(img, AlterPartitionRequest{BrokerID: 1, BrokerEpoch: 1, Topic: "t", LeaderEpoch: 0, PartitionEpoch: 0, ISR: []int{1, 2}})
	require.ErrorIs(t, err, ErrNotPartitionLeader)
	// The new leader (2) with the new epochs succeeds, once.
	p, _ := img.Partition("t", 0)
	require.Equal(t, 2, p.Leader)
	req := AlterPartitionRequest{BrokerID: 2, BrokerEpoch: 2, Topic: "t", LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: []int{2}}
	recs, err := decideAlterPartition(img, req)
	require.NoError(t, err)
	applyAll(t, img, recs)
	_, err = decideAlterPartition(img, req)
	require.ErrorIs(t, err, ErrStalePartitionEpoch)
}
