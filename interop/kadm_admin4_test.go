package interop

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/kafka/kafkatest"
	"github.com/strata-log/strata/log"
)

// TestKadmDescribeLogDirs: kadm's DescribeAllLogDirs lists the broker's
// data dir with each partition's size, as Strata measures it.
func TestKadmDescribeLogDirs(t *testing.T) {
	c := kafkatest.New(t, kafkatest.Topic("t", 2))
	ctx := testCtx(t, 15*time.Second)
	cl := kgoClient(t, c.Addr())
	adm := kadm.NewClient(cl)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("some bytes")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	all, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	dirs := all.Sorted()
	if len(dirs) != 1 || dirs[0].Err != nil {
		t.Fatalf("log dirs: %+v", dirs)
	}
	var total int64
	for p := range 2 {
		part, err := c.Broker().Partition("t", p)
		if err != nil {
			t.Fatal(err)
		}
		d, ok := dirs[0].Topics.Lookup("t", int32(p))
		if !ok || d.Size != part.Size() {
			t.Errorf("t/%d: %+v (found %v), Strata's size %d", p, d, ok, part.Size())
		}
		total += part.Size()
	}
	if total == 0 {
		t.Error("nothing produced")
	}
	some, err := adm.DescribeAllLogDirs(ctx, kadm.TopicsSet{"t": {1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	got := some.Sorted()
	if len(got) != 1 || len(got[0].Topics["t"]) != 1 {
		t.Errorf("t/1 only: %+v", got)
	}
}

// TestKadmDeleteOffsets: kadm's DeleteOffsets deletes an empty group's
// commits, and an active consumer's of the topics it consumes are kept
// (GROUP_SUBSCRIBED_TO_TOPIC).
func TestKadmDeleteOffsets(t *testing.T) {
	c := kafkatest.New(t, kafkatest.Topic("t", 2), kafkatest.Topic("u", 1))
	ctx := testCtx(t, 15*time.Second)
	adm := newKadm(t, c.Addr())
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "t", Partition: 0, At: 5, LeaderEpoch: -1})
	os.Add(kadm.Offset{Topic: "t", Partition: 1, At: 6, LeaderEpoch: -1})
	os.Add(kadm.Offset{Topic: "u", Partition: 0, At: 7, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "g", os); err != nil {
		t.Fatal(err)
	}
	resp, err := adm.DeleteOffsets(ctx, "g", kadm.TopicsSet{"t": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if err, ok := resp.Lookup("t", 0); !ok || err != nil {
		t.Errorf("delete t/0: %v (answered %v)", err, ok)
	}
	fetched, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fetched.Lookup("t", 0); ok {
		t.Error("t/0 still committed")
	}
	if o, ok := fetched.Lookup("t", 1); !ok || o.At != 6 {
		t.Errorf("t/1: %+v, %v", o, ok)
	}

	// An active consumer of u (a member joined through Strata's own
	// coordinator): u's commit stays, t's goes.
	gc := c.Broker().GroupCoordinator()
	m, err := gc.Join(ctx, group.JoinRequest{Group: "g", ClientID: "m", Topics: []string{"u"}, SessionTimeout: time.Minute, RebalanceTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Leave(context.Background(), "g", m.MemberID)
	resp, err = adm.DeleteOffsets(ctx, "g", kadm.TopicsSet{"t": {1: {}}, "u": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if err, _ := resp.Lookup("u", 0); !errors.Is(err, kerr.GroupSubscribedToTopic) {
		t.Errorf("delete u/0 of an active consumer of u: %v, want GROUP_SUBSCRIBED_TO_TOPIC", err)
	}
	if err, ok := resp.Lookup("t", 1); !ok || err != nil {
		t.Errorf("delete t/1: %v", err)
	}
	if got := gc.Committed("g", nil); len(got) != 1 || got[log.TopicPartition{Topic: "u", Partition: 0}] != 7 {
		t.Errorf("left committed: %v, want u/0 at 7", got)
	}
	if _, err := adm.DeleteOffsets(ctx, "nope", kadm.TopicsSet{"t": {0: {}}}); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Errorf("unknown group: %v, want GROUP_ID_NOT_FOUND", err)
	}
}

// TestKadmAlterConfigs: kadm's AlterBrokerConfigs (IncrementalAlterConfigs)
// and AlterBrokerConfigsState / AlterTopicConfigsState (the legacy
// AlterConfigs, the whole set replaced) change what Strata's topics use.
func TestKadmAlterConfigs(t *testing.T) {
	c := kafkatest.New(t, kafkatest.Topic("t", 1), kafkatest.Topic("u", 1))
	ctx := testCtx(t, 15*time.Second)
	adm := newKadm(t, c.Addr())
	brokers, err := adm.ListBrokers(ctx)
	if err != nil || len(brokers) != 1 {
		t.Fatalf("brokers: %+v, %v", brokers, err)
	}
	id := brokers[0].NodeID
	cfg := func(topic string) log.TopicConfig {
		t.Helper()
		cfg, err := c.Broker().TopicConfig(topic)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	str := kadm.StringPtr
	check := func(what string, rs kadm.AlterConfigsResponses, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for _, r := range rs {
			if r.Err != nil {
				t.Fatalf("%s: %s: %v %s", what, r.Name, r.Err, r.ErrMessage)
			}
		}
	}

	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.ms", Value: str("3600000")}}, id)
	check("AlterBrokerConfigs", rs, err)
	if got := cfg("t").RetentionTime; got != time.Hour {
		t.Errorf("t's retention after the broker's log.retention.ms: %v", got)
	}
	described, err := adm.DescribeBrokerConfigs(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range described {
		for _, kv := range r.Configs {
			if kv.Key == "log.retention.ms" {
				found = kv.Value != nil && *kv.Value == "3600000" && kv.Source == kmsg.ConfigSourceDynamicBrokerConfig
			}
		}
	}
	if !found {
		t.Errorf("DescribeBrokerConfigs: %+v", described)
	}

	// The legacy API replaces the cluster-wide set whole.
	rs, err = adm.AlterBrokerConfigsState(ctx, []kadm.AlterConfig{{Name: "log.segment.bytes", Value: str("1048576")}})
	check("AlterBrokerConfigsState", rs, err)
	if got := cfg("t").SegmentBytes; got != 1<<20 {
		t.Errorf("t's segment.bytes after the cluster's log.segment.bytes: %d", got)
	}
	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.dirs", Value: str("/x")}}, id)
	if err == nil && (len(rs) != 1 || !errors.Is(rs[0].Err, kerr.InvalidConfig)) {
		t.Errorf("log.dirs: %+v, want INVALID_CONFIG", rs)
	}

	rs, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "cleanup.policy", Value: str("compact")}}, "u")
	check("AlterTopicConfigs", rs, err)
	rs, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: str("60000")}}, "u")
	check("AlterTopicConfigsState", rs, err)
	if got := cfg("u"); got.RetentionTime != time.Minute || got.Cleanup != log.CleanupDelete {
		t.Errorf("u after AlterTopicConfigsState: retention %v, cleanup %v; want 1m and delete (cleanup.policy not sent: the default again)", got.RetentionTime, got.Cleanup)
	}
}

// TestDescribeTopicPartitionsKmsg pages through every topic with
// DescribeTopicPartitions (KIP-966) as kafka-topics.sh --describe does.
func TestDescribeTopicPartitionsKmsg(t *testing.T) {
	c := kafkatest.New(t, kafkatest.Topic("a", 3), kafkatest.Topic("b", 1))
	ctx := testCtx(t, 15*time.Second)
	cl := kgoClient(t, c.Addr())
	var got []string
	var cursor *kmsg.DescribeTopicPartitionsRequestCursor
	for page := 0; page < 10; page++ {
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		req.ResponsePartitionLimit, req.Cursor = 2, cursor
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		for _, tp := range resp.Topics {
			if err := kerr.ErrorForCode(tp.ErrorCode); err != nil {
				t.Fatalf("%s: %v", *tp.Topic, err)
			}
			for _, p := range tp.Partitions {
				if p.LeaderID < 0 || len(p.ISR) != 1 {
					t.Errorf("%s/%d: leader %d, ISR %v", *tp.Topic, p.Partition, p.LeaderID, p.ISR)
				}
				got = append(got, *tp.Topic+"/"+string(rune('0'+p.Partition)))
			}
		}
		if resp.NextCursor == nil {
			break
		}
		cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
	}
	if want := []string{"a/0", "a/1", "a/2", "b/0"}; !slices.Equal(got, want) {
		t.Errorf("pages: %v, want %v", got, want)
	}
}
