package interop

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/kafka/kafkatest"
)

func newKadm(t *testing.T, seed string) *kadm.Client {
	t.Helper()
	return kadm.NewClient(kgoClient(t, seed))
}

// kgoClient is a kgo client of seed, closed at the end of the test.
func kgoClient(t *testing.T, seed string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seed))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestKadmTopics: kadm creates, lists, describes and deletes topics, and
// lists offsets; each change is seen through Strata's own API.
func TestKadmTopics(t *testing.T) {
	c := kafkatest.New(t)
	ctx := testCtx(t, 15*time.Second)
	adm := newKadm(t, c.Addr())

	hour := "3600000"
	created, err := adm.CreateTopics(ctx, 3, 1, map[string]*string{"retention.ms": &hour}, "alpha", "beta")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"alpha", "beta"} {
		if r, ok := created[name]; !ok || r.Err != nil || r.NumPartitions != 3 {
			t.Fatalf("create %s: %+v", name, r)
		}
	}
	if got := c.Broker().Topics(); !slices.Equal(got, []string{"alpha", "beta"}) {
		t.Fatalf("Strata's topics: %v", got)
	}
	if cfg, err := c.Broker().TopicConfig("alpha"); err != nil || cfg.RetentionTime != time.Hour || cfg.Partitions != 3 {
		t.Fatalf("Strata's config of alpha: %+v, %v", cfg, err)
	}

	again, err := adm.CreateTopics(ctx, 1, 1, nil, "alpha", "bad/name")
	if err != nil {
		t.Fatal(err)
	}
	if err := again["alpha"].Err; !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Errorf("create alpha again: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	if err := again["bad/name"].Err; !errors.Is(err, kerr.InvalidTopicException) {
		t.Errorf("create bad/name: %v, want INVALID_TOPIC_EXCEPTION", err)
	}

	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := topics.Names(); !slices.Equal(names, []string{"alpha", "beta"}) {
		t.Fatalf("listed topics %v", names)
	}
	for _, td := range topics {
		if td.Err != nil || len(td.Partitions) != 3 {
			t.Fatalf("topic %s: %d partitions, %v", td.Topic, len(td.Partitions), td.Err)
		}
		for _, pd := range td.Partitions {
			if pd.Err != nil || pd.Leader < 0 || !slices.Equal(pd.Replicas, []int32{pd.Leader}) || !slices.Equal(pd.ISR, []int32{pd.Leader}) {
				t.Fatalf("partition %s/%d: %+v", td.Topic, pd.Partition, pd)
			}
		}
	}

	rcs, err := adm.DescribeTopicConfigs(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("alpha", nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe alpha: %v %v", err, rc.Err)
	}
	got := map[string]string{}
	for _, cf := range rc.Configs {
		if cf.Value != nil {
			got[cf.Key] = *cf.Value
		}
	}
	for k, v := range map[string]string{"retention.ms": hour, "cleanup.policy": "delete", "max.message.bytes": "1048588"} {
		if got[k] != v {
			t.Errorf("config %s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	if rcs, err := adm.DescribeTopicConfigs(ctx, "nope"); err == nil {
		if rc, _ := rcs.On("nope", nil); !errors.Is(rc.Err, kerr.UnknownTopicOrPartition) {
			t.Errorf("describe configs of a topic that does not exist: %v", rc.Err)
		}
	}

	// Offsets: start, end and by time, against what Strata stored.
	want := makeRecs("kadm", 60)
	kgoProduce(ctx, t, c.Addr(), "alpha", want)
	parts := stored(t, c, "alpha")
	starts, err := adm.ListStartOffsets(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	cut := want[30].ts
	after, err := adm.ListOffsetsAfterMilli(ctx, cut.UnixMilli(), "alpha")
	if err != nil {
		t.Fatal(err)
	}
	for p, rs := range parts {
		s, _ := starts.Lookup("alpha", int32(p))
		e, _ := ends.Lookup("alpha", int32(p))
		a, _ := after.Lookup("alpha", int32(p))
		wantAfter := int64(len(rs)) // kadm: the end offset when no record is that recent
		for _, r := range rs {
			if !r.Timestamp.Before(cut) {
				wantAfter = r.Offset
				break
			}
		}
		if s.Err != nil || s.Offset != 0 || e.Err != nil || e.Offset != int64(len(rs)) || a.Err != nil || a.Offset != wantAfter {
			t.Errorf("partition %d: start %d (%v) end %d (%v) after %d (%v); want 0, %d, %d", p, s.Offset, s.Err, e.Offset, e.Err, a.Offset, a.Err, len(rs), wantAfter)
		}
	}

	// After every record: kadm answers the end offsets, having been told
	// -1 on the wire, as Kafka tells it.
	lateMs := want[len(want)-1].ts.UnixMilli() + 1
	late, err := adm.ListOffsetsAfterMilli(ctx, lateMs, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	late.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset != int64(len(parts[o.Partition])) {
			t.Errorf("partition %d: kadm's offset after every record %d (%v), want the end %d", o.Partition, o.Offset, o.Err, len(parts[o.Partition]))
		}
	})
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "alpha"
	for p := range int32(3) {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, lateMs
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	lresp, err := req.RequestWith(ctx, kgoClient(t, c.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range lresp.Topics[0].Partitions {
		if p.ErrorCode != 0 || p.Offset != -1 || p.Timestamp != -1 {
			t.Errorf("partition %d: ListOffsets after every record: offset %d timestamp %d code %d, want -1, -1 as Kafka answers", p.Partition, p.Offset, p.Timestamp, p.ErrorCode)
		}
	}

	deleted, err := adm.DeleteTopics(ctx, "beta")
	if err != nil || deleted["beta"].Err != nil {
		t.Fatalf("delete beta: %v %v", err, deleted["beta"].Err)
	}
	if got := c.Broker().Topics(); !slices.Equal(got, []string{"alpha"}) {
		t.Fatalf("Strata's topics after delete: %v", got)
	}
	if gone, err := adm.DeleteTopics(ctx, "beta"); err != nil || !errors.Is(gone["beta"].Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("delete beta again: %v %v", err, gone["beta"].Err)
	}
	brokers, err := adm.ListBrokers(ctx)
	if err != nil || len(brokers) != 1 {
		t.Fatalf("brokers %v, %v", brokers, err)
	}
}

// TestKadmNotServed: each kadm call whose request the server does not
// advertise fails at once with an error, and does not hang; one it
// advertises works.
func TestKadmNotServed(t *testing.T) {
	const topic = "t"
	c := kafkatest.New(t, kafkatest.Topic(topic, 2))
	ctx := testCtx(t, 20*time.Second)
	adm := newKadm(t, c.Addr())
	kgoProduce(ctx, t, c.Addr(), topic, makeRecs("ns", 10))
	for _, call := range []struct {
		name string
		keys []int16 // the requests it needs
		run  func(context.Context) error
	}{
		{"CreatePartitions", []int16{37}, func(ctx context.Context) error {
			r, err := adm.CreatePartitions(ctx, 1, topic)
			return firstErr(err, r.Error())
		}},
		{"AlterTopicConfigs", []int16{44}, func(ctx context.Context) error {
			v := "1000"
			r, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: &v}}, topic)
			if err != nil {
				return err
			}
			for _, x := range r {
				if x.Err != nil {
					return x.Err
				}
			}
			return nil
		}},
		{"DeleteRecords", []int16{21}, func(ctx context.Context) error {
			os := kadm.Offsets{}
			os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 1})
			r, err := adm.DeleteRecords(ctx, os)
			return firstErr(err, r.Error())
		}},
		{"OffsetForLeaderEpoch", []int16{23}, func(ctx context.Context) error {
			var req kadm.OffsetForLeaderEpochRequest
			req.Add(topic, 0, 0)
			r, err := adm.OffsetForLeaderEpoch(ctx, req)
			if err != nil {
				return err
			}
			for _, ps := range r {
				for _, p := range ps {
					if p.Err != nil {
						return p.Err
					}
				}
			}
			return nil
		}},
		{"DescribeLogDirs", []int16{35}, func(ctx context.Context) error {
			r, err := adm.DescribeAllLogDirs(ctx, nil)
			if err != nil {
				return err
			}
			for _, ds := range r {
				if err := ds.Error(); err != nil {
					return err
				}
			}
			return nil
		}},
		{"DeleteOffsets", []int16{10, 47}, func(ctx context.Context) error {
			// Kafka answers GROUP_ID_NOT_FOUND for a group with no commits:
			// give "g" one (an empty group, as kadm commits) to delete.
			var o kadm.Offsets
			o.Add(kadm.Offset{Topic: topic, Partition: 0, At: 1, LeaderEpoch: -1})
			if err := adm.CommitAllOffsets(ctx, "g", o); err != nil {
				return err
			}
			r, err := adm.DeleteOffsets(ctx, "g", kadm.TopicsSet{topic: {0: {}}})
			return firstErr(err, r.Error())
		}},
		{"DescribeACLs", []int16{29}, func(ctx context.Context) error {
			// Pattern ANY: a filter with an UNKNOWN pattern (kadm's zero value) is
			// INVALID_REQUEST, as Kafka's DescribeAclsRequest validation says.
			b := kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Allow().AllowHosts().Operations(kadm.OpAny)
			r, err := adm.DescribeACLs(ctx, b)
			if err != nil {
				return err
			}
			for _, x := range r {
				if x.Err != nil {
					return x.Err
				}
			}
			return nil
		}},
		{"DescribeProducers", []int16{61}, func(ctx context.Context) error {
			r, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
			if err != nil {
				return err
			}
			for _, ps := range r {
				for _, p := range ps.Partitions {
					if p.Err != nil {
						return p.Err
					}
				}
			}
			return nil
		}},
	} {
		t.Run(call.name, func(t *testing.T) {
			served := true
			for _, k := range call.keys {
				served = served && serves(ctx, t, c.Addr(), k)
			}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			start := time.Now()
			err := call.run(cctx)
			switch {
			case cctx.Err() != nil:
				t.Fatalf("%s (served %v) hung: %v after %v", call.name, served, err, time.Since(start))
			case served && err != nil:
				t.Fatalf("%s is advertised and fails: %v", call.name, err)
			case !served && err == nil:
				t.Fatalf("%s is not advertised and succeeds", call.name)
			case !served:
				t.Logf("%s not served: %v", call.name, err)
			}
		})
	}
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// TestKadmCreateTopicErrors: Kafka's error code for each bad CreateTopics,
// and the broker's defaults for partitions and replication factor -1
// (CreateTopics v4+).
func TestKadmCreateTopicErrors(t *testing.T) {
	c := kafkatest.New(t)
	ctx := testCtx(t, 10*time.Second)
	adm := newKadm(t, c.Addr())
	bad := "abc"
	for _, tc := range []struct {
		name    string
		parts   int32
		rf      int16
		configs map[string]*string
		want    error
	}{
		{"zero-partitions", 0, 1, nil, kerr.InvalidPartitions},
		{"bad-retention", 1, 1, map[string]*string{"retention.ms": &bad}, kerr.InvalidConfig},
		{"unknown-config", 1, 1, map[string]*string{"no.such.config": &bad}, kerr.InvalidConfig},
		{"defaults", -1, -1, nil, nil},
	} {
		r, err := adm.CreateTopics(ctx, tc.parts, tc.rf, tc.configs, tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if got := r[tc.name].Err; !errors.Is(got, tc.want) && got != tc.want {
			t.Errorf("create %s: %v, want %v", tc.name, got, tc.want)
		}
	}
	// validate_only checks and creates nothing.
	v, err := adm.ValidateCreateTopics(ctx, 4, 1, nil, "dry", "defaults")
	if err != nil {
		t.Fatal(err)
	}
	if v["dry"].Err != nil || v["dry"].NumPartitions != 4 || !errors.Is(v["defaults"].Err, kerr.TopicAlreadyExists) {
		t.Errorf("validate only: %+v", v)
	}
	if got := c.Broker().Topics(); !slices.Equal(got, []string{"defaults"}) {
		t.Fatalf("Strata's topics: %v", got)
	}
	if n, err := c.Broker().Partitions(context.Background(), "defaults"); err != nil || n != 1 {
		t.Errorf("partitions of a topic created with -1: %d, %v", n, err)
	}
}

// TestDescribeCluster: DescribeCluster and Metadata, through kgo, agree on
// the cluster id, the controller and the one broker, at the address clients
// dialed.
func TestDescribeCluster(t *testing.T) {
	c := kafkatest.New(t)
	ctx := testCtx(t, 10*time.Second)
	cl := kgoClient(t, c.Addr())
	dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
	if err != nil || dc.ErrorCode != 0 {
		t.Fatalf("describe cluster: %v, code %d", err, dc.ErrorCode)
	}
	md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(dc.Brokers) != 1 || len(md.Brokers) != 1 || dc.ClusterID != md.Cluster || dc.ControllerID != md.Controller ||
		dc.Brokers[0].NodeID != md.Brokers[0].NodeID || dc.ControllerID != dc.Brokers[0].NodeID {
		t.Fatalf("describe cluster %+v; metadata %+v", dc, md)
	}
	if addr := net.JoinHostPort(md.Brokers[0].Host, strconv.Itoa(int(md.Brokers[0].Port))); addr != c.Addr() {
		t.Fatalf("broker advertised at %s, dialed at %s", addr, c.Addr())
	}
}
