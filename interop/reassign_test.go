package interop

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/log"
)

// TestKadmReassignments: kadm moves a partition of a three-member cluster
// onto the member without a replica of it (AlterPartitionAssignments),
// watches it (ListPartitionReassignments) until done, reorders its
// replicas and elects the new first one (ElectLeaders, preferred); errors
// come back with Kafka's codes; every record is still there.
func TestKadmReassignments(t *testing.T) {
	c := startCluster(t, 3)
	ctx := testCtx(t, 60*time.Second)
	const topic = "moves"
	if err := c.any().CreateTopic(ctx, topic, log.TopicConfig{Partitions: 1, ReplicationFactor: 2, MinInSyncReplicas: 1}); err != nil {
		t.Fatal(err)
	}
	cl := newClusterKgo(t, c, kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
	var want []string
	for i := range 20 {
		v := fmt.Sprintf("v%02d", i)
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		want = append(want, v)
	}
	adm := kadm.NewClient(cl)
	st, _ := c.any().Image().Partition(topic, 0)
	other := int32(6 - st.Replicas[0] - st.Replicas[1])
	target := []int32{other, int32(st.Replicas[1])}

	// Refused, each with its code.
	var bad kadm.AlterPartitionAssignmentsReq
	bad.Assign(topic, 0, []int32{1, 1})
	bad.Assign(topic, 7, []int32{1})
	bad.Assign("nope", 0, []int32{1})
	res, err := adm.AlterPartitionAssignments(ctx, bad)
	if err != nil {
		t.Fatal(err)
	}
	for tp, code := range map[[2]any]error{
		{topic, int32(0)}:  kerr.InvalidReplicaAssignment,
		{topic, int32(7)}:  kerr.UnknownTopicOrPartition,
		{"nope", int32(0)}: kerr.UnknownTopicOrPartition,
	} {
		r := res[tp[0].(string)][tp[1].(int32)]
		if !errors.Is(r.Err, code) {
			t.Fatalf("AlterPartitionAssignments %v: %v, want %v", tp, r.Err, code)
		}
	}
	var cancel kadm.AlterPartitionAssignmentsReq
	cancel.CancelAssign(topic, 0)
	if res, err := adm.AlterPartitionAssignments(ctx, cancel); err != nil || !errors.Is(res[topic][0].Err, kerr.NoReassignmentInProgress) {
		t.Fatalf("cancel without a move: %v %+v", err, res)
	}

	// The move.
	var move kadm.AlterPartitionAssignmentsReq
	move.Assign(topic, 0, target)
	res, err = adm.AlterPartitionAssignments(ctx, move)
	if err != nil || res[topic][0].Err != nil {
		t.Fatalf("AlterPartitionAssignments: %v %+v", err, res)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {0: {}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(l[topic]) == 0 {
			break
		}
		if r := l[topic][0]; !slices.Contains(r.AddingReplicas, other) {
			t.Fatalf("move in progress lists %+v, want %d adding", r, other)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the move of %s-0 to %v never completed", topic, target)
		}
		time.Sleep(50 * time.Millisecond) // the listing is what kadm offers to watch
	}
	c.waitImage("the move done", func(img *controller.Image) bool {
		st, _ := img.Partition(topic, 0)
		return slices.Equal(st.Replicas, []int{int(target[0]), int(target[1])})
	})

	// Reorder: done at once, leadership where it was; a preferred
	// election then gives it to the new first replica.
	first := target[1]
	var reorder kadm.AlterPartitionAssignmentsReq
	reorder.Assign(topic, 0, []int32{first, other})
	if res, err := adm.AlterPartitionAssignments(ctx, reorder); err != nil || res[topic][0].Err != nil {
		t.Fatalf("reorder: %v %+v", err, res)
	}
	c.waitImage("the reorder", func(img *controller.Image) bool {
		st, _ := img.Partition(topic, 0)
		return st.Replicas[0] == int(first)
	})
	if st, _ := c.any().Image().Partition(topic, 0); st.Leader != int(first) {
		el, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}}})
		if err != nil || el[topic][0].Err != nil {
			t.Fatalf("ElectLeaders: %v %+v", err, el)
		}
	}
	c.waitImage("the preferred leader", func(img *controller.Image) bool {
		l, _ := img.Leader(topic, 0)
		return l == int(first)
	})
	el, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}}})
	if err != nil || !errors.Is(el[topic][0].Err, kerr.ElectionNotNeeded) {
		t.Fatalf("ElectLeaders of a partition its preferred replica leads: %v %+v", err, el)
	}

	cons := newClusterKgo(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < len(want) {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll after %d records: %v", len(got), err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if !slices.Equal(got, want) {
		t.Fatalf("consumed %v after the moves, want %v", got, want)
	}
}
