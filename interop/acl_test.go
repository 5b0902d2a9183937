package interop

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/kafka/kafkatest"
)

// TestACLs: kadm manages ACLs as a super user (CreateAcls, DescribeAcls,
// DeleteAcls), and a kgo producer and group consumer logged in as an
// ordinary user are refused with Kafka's codes until ACLs allow them, and
// again once the ACLs are deleted.
func TestACLs(t *testing.T) {
	const topic, group = "orders", "app"
	fx := kafkatest.New(t,
		kafkatest.SASLUser("SCRAM-SHA-256", "admin", "admin-secret"),
		kafkatest.SASLUser("SCRAM-SHA-512", "alice", "alice-secret"),
		kafkatest.SuperUser("admin"),
		kafkatest.EnableACLs(),
		kafkatest.Topic(topic, 2))
	as := func(user string, opts ...kgo.Opt) *kgo.Client {
		t.Helper()
		mech := scram.Auth{User: user, Pass: user + "-secret"}.AsSha256Mechanism()
		if user == "alice" {
			mech = scram.Auth{User: user, Pass: user + "-secret"}.AsSha512Mechanism()
		}
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(fx.Addr()), kgo.SASL(mech)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	ctx := testCtx(t, 30*time.Second)
	admin := kadm.NewClient(as("admin"))
	aliceAdm := kadm.NewClient(as("alice"))
	produce := func(opts ...kgo.Opt) error {
		cl := as("alice", append([]kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RecordRetries(2)}, opts...)...)
		return cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr()
	}

	if err := produce(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice produces without ACLs: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	grant := kadm.NewACLs().Allow("User:alice").Topics(topic).Groups(group).
		Operations(kadm.OpRead, kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral)
	// alice may not grant herself anything.
	res, err := aliceAdm.CreateACLs(ctx, grant)
	if err != nil || len(res) == 0 || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice creates ACLs: %v %v, want CLUSTER_AUTHORIZATION_FAILED", res, err)
	}
	res, err = admin.CreateACLs(ctx, grant)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("admin creates %s %v: %v", r.Name, r.Operation, r.Err)
		}
	}
	desc, err := admin.DescribeACLs(ctx, grant)
	if err != nil {
		t.Fatal(err)
	}
	described := 0
	for _, d := range desc {
		if d.Err != nil {
			t.Fatalf("describe: %v", d.Err)
		}
		described += len(d.Described)
	}
	// Read and Write on the topic, Read and Write on the group, each
	// found by its filter.
	if described != 4 {
		t.Fatalf("described %d ACLs, want 4: %+v", described, desc)
	}

	if err := produce(); err != nil {
		t.Fatalf("alice produces with an ACL: %v", err)
	}
	consumer := as("alice", kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	fetches := consumer.PollRecords(ctx, 1)
	if errs := fetches.Errors(); len(errs) > 0 || fetches.NumRecords() != 1 {
		t.Fatalf("alice consumes: %d records, errors %v", fetches.NumRecords(), errs)
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("alice commits: %v", err)
	}

	del, err := admin.DeleteACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts("*").Topics(topic).Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || len(del) != 1 || len(del[0].Deleted) != 1 {
		t.Fatalf("delete: %+v %v", del, err)
	}
	// alice may still describe the topic (Read implies it), so kgo's
	// idempotent producer gets to InitProducerId, which needs Write on
	// some topic or IdempotentWrite on the cluster (Kafka 3+); without
	// idempotence, the produce itself is refused.
	if err := produce(); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice produces after the ACL is deleted: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	if err := produce(kgo.DisableIdempotentWrite()); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice produces (not idempotent) after the ACL is deleted: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}

// TestACLsCluster: on a three-member cluster, kadm manages ACLs as a
// super user through the client listeners (CreateAcls goes to the active
// controller from whichever member kgo asks), every member describes and
// enforces them, and a kgo producer and group consumer logged in as an
// ordinary user are refused until the ACLs allow them, and again once
// they are deleted.
func TestACLsCluster(t *testing.T) {
	const topic, group, n = "orders", "app", 50
	c, listeners := startSecuredCluster(t, map[string]string{"admin": "admin-secret", "alice": "alice-secret"})
	ctx := testCtx(t, 90*time.Second)
	admin := kadm.NewClient(c.scramClient(t, listeners, "admin", "admin-secret"))
	if _, err := admin.CreateTopic(ctx, 3, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	c.createOffsetsTopic(ctx, admin)
	produce := func(values ...string) error {
		cl := c.scramClient(t, listeners, "alice", "alice-secret", kgo.DefaultProduceTopic(topic), kgo.RecordRetries(2),
			kgo.RequiredAcks(kgo.AllISRAcks()))
		defer cl.Close()
		var rs []*kgo.Record
		for _, v := range values {
			rs = append(rs, &kgo.Record{Value: []byte(v)})
		}
		return cl.ProduceSync(ctx, rs...).FirstErr()
	}
	if err := produce("refused"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice produces without ACLs: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	grant := kadm.NewACLs().Allow("User:alice").Topics(topic).Groups(group).
		Operations(kadm.OpRead, kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral)
	aliceAdm := kadm.NewClient(c.scramClient(t, listeners, "alice", "alice-secret"))
	res, err := aliceAdm.CreateACLs(ctx, grant)
	if err != nil || len(res) == 0 || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice creates ACLs: %v %v, want CLUSTER_AUTHORIZATION_FAILED", res, err)
	}
	res, err = admin.CreateACLs(ctx, grant)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("admin creates %s %v: %v", r.Name, r.Operation, r.Err)
		}
	}
	// Read and Write on the topic and on the group.
	c.waitImage("4 ACLs", func(img *controller.Image) bool { return img.ACLs().Len() == 4 })
	for i, addr := range listeners {
		desc, err := kadm.NewClient(c.onlyMember(t, addr, "admin", "admin-secret")).DescribeACLs(ctx, grant)
		if err != nil {
			t.Fatal(err)
		}
		described := 0
		for _, d := range desc {
			if d.Err != nil {
				t.Fatalf("member %d describes: %v", i+1, d.Err)
			}
			described += len(d.Described)
		}
		if described != 4 {
			t.Fatalf("member %d describes %d ACLs, want 4", i+1, described)
		}
	}

	values := make([]string, n)
	for i := range values {
		values[i] = fmt.Sprintf("v%d", i)
	}
	if err := produce(values...); err != nil {
		t.Fatalf("alice produces with ACLs: %v", err)
	}
	consumer := c.scramClient(t, listeners, "alice", "alice-secret", kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]bool{}
	for len(got) < n {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", len(got), n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("alice consumes: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("alice commits: %v", err)
	}
	consumer.Close()

	// Deleted through another member's listener, the ACLs are gone
	// everywhere: alice is refused on every member.
	dres, err := kadm.NewClient(c.onlyMember(t, listeners[2], "admin", "admin-secret")).DeleteACLs(ctx, grant)
	if err != nil {
		t.Fatal(err)
	}
	deleted := 0
	for _, d := range dres {
		if d.Err != nil {
			t.Fatal(d.Err)
		}
		deleted += len(d.Deleted)
	}
	if deleted != 4 {
		t.Fatalf("deleted %d ACLs, want 4", deleted)
	}
	c.waitImage("no ACLs", func(img *controller.Image) bool { return img.ACLs().Len() == 0 })
	for i, addr := range listeners {
		cl := c.onlyMember(t, addr, "alice", "alice-secret", kgo.DefaultProduceTopic(topic), kgo.RecordRetries(1))
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("late")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("alice produces on member %d once the ACLs are gone: %v, want TOPIC_AUTHORIZATION_FAILED", i+1, err)
		}
	}
}
