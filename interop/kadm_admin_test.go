package interop

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/kafka/kafkatest"
	"github.com/strata-log/strata/log"
)

// TestKadmCreatePartitions: kadm grows a topic (to a total, and by a
// number), a shrink is INVALID_PARTITIONS, and a kgo producer writes to a
// new partition, seen through Strata's own API.
func TestKadmCreatePartitions(t *testing.T) {
	c := kafkatest.New(t, kafkatest.Topic("t", 1))
	ctx := testCtx(t, 15*time.Second)
	adm := newKadm(t, c.Addr())

	resp, err := adm.UpdatePartitions(ctx, 3, "t")
	if err != nil || resp["t"].Err != nil {
		t.Fatalf("update to 3: %v, %+v", err, resp)
	}
	resp, err = adm.CreatePartitions(ctx, 1, "t")
	if err != nil || resp["t"].Err != nil {
		t.Fatalf("add 1: %v, %+v", err, resp)
	}
	if n, err := c.Broker().Partitions(context.Background(), "t"); err != nil || n != 4 {
		t.Fatalf("Strata's partitions of t: %d, %v", n, err)
	}
	resp, err = adm.UpdatePartitions(ctx, 2, "t")
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(resp["t"].Err, kerr.InvalidPartitions) {
		t.Errorf("shrink: %v, want INVALID_PARTITIONS", resp["t"].Err)
	}
	resp, err = adm.CreatePartitions(ctx, 1, "missing")
	if err == nil && !errors.Is(resp["missing"].Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("grow a missing topic: %+v", resp)
	}
	topics, err := adm.ListTopics(ctx, "t")
	if err != nil || len(topics["t"].Partitions) != 4 {
		t.Fatalf("metadata after growing: %+v, %v", topics, err)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: 3, Value: []byte("new partition")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := stored(t, c, "t")
	if len(got) != 4 || len(got[3]) != 1 || string(got[3][0].Value) != "new partition" {
		t.Fatalf("stored: %v", got)
	}
}

// TestKadmAlterDescribeTopicConfigs: kadm's AlterTopicConfigs and
// DescribeTopicConfigs round trip, with each config's source.
func TestKadmAlterDescribeTopicConfigs(t *testing.T) {
	c := kafkatest.New(t, kafkatest.Topic("t", 2))
	ctx := testCtx(t, 15*time.Second)
	adm := newKadm(t, c.Addr())
	describe := func() map[string]kadm.Config {
		t.Helper()
		rcs, err := adm.DescribeTopicConfigs(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On("t", nil)
		if err != nil || rc.Err != nil {
			t.Fatalf("describe t: %v, %v", err, rc.Err)
		}
		out := map[string]kadm.Config{}
		for _, cfg := range rc.Configs {
			out[cfg.Key] = cfg
		}
		return out
	}
	val := func(cfg kadm.Config) string {
		if cfg.Value == nil {
			return "<nil>"
		}
		return *cfg.Value
	}
	before := describe()
	if cfg := before["retention.ms"]; val(cfg) != "604800000" || cfg.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("retention.ms before: %s from %v", val(cfg), cfg.Source)
	}

	s := func(v string) *string { return &v }
	// Validate only: nothing changes.
	vr, err := adm.ValidateAlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: s("1000")}}, "t")
	if err != nil || vr[0].Err != nil {
		t.Fatalf("validate: %v, %+v", err, vr)
	}
	if got := val(describe()["retention.ms"]); got != "604800000" {
		t.Fatalf("validate only changed retention.ms to %s", got)
	}
	ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: s("1000")},
		{Op: kadm.SetConfig, Name: "cleanup.policy", Value: s("compact")},
		{Op: kadm.SetConfig, Name: "max.message.bytes", Value: s("4096")},
	}, "t")
	if err != nil || ar[0].Err != nil {
		t.Fatalf("alter: %v, %+v", err, ar)
	}
	after := describe()
	for name, want := range map[string]string{"retention.ms": "1000", "cleanup.policy": "compact", "max.message.bytes": "4096"} {
		if cfg := after[name]; val(cfg) != want || cfg.Source != kmsg.ConfigSourceDynamicTopicConfig {
			t.Errorf("%s: %s from %v, want %s from DYNAMIC_TOPIC_CONFIG", name, val(cfg), cfg.Source, want)
		}
	}
	if cfg := after["segment.bytes"]; cfg.Source != kmsg.ConfigSourceDefaultConfig || val(cfg) != val(before["segment.bytes"]) {
		t.Errorf("segment.bytes: %s from %v", val(cfg), cfg.Source)
	}
	cfg, err := c.Broker().TopicConfig("t")
	if err != nil || cfg.RetentionTime != time.Second || cfg.Cleanup != log.CleanupCompact || cfg.MaxMessageBytes != 4096 {
		t.Fatalf("Strata's config: %+v, %v", cfg, err)
	}

	ar, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.DeleteConfig, Name: "retention.ms"},
		{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: s("delete")},
	}, "t")
	if err != nil || ar[0].Err != nil {
		t.Fatalf("delete and append: %v, %+v", err, ar)
	}
	after = describe()
	if cfg := after["retention.ms"]; val(cfg) != "604800000" || cfg.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("retention.ms after delete: %s from %v", val(cfg), cfg.Source)
	}
	if got := val(after["cleanup.policy"]); got != "compact,delete" {
		t.Errorf("cleanup.policy after append: %s", got)
	}

	for _, bad := range []struct {
		op   kadm.AlterConfig
		want error
	}{
		{kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: s("soon")}, kerr.InvalidConfig},
		{kadm.AlterConfig{Op: kadm.SetConfig, Name: "no.such.config", Value: s("1")}, kerr.InvalidConfig},
		{kadm.AlterConfig{Op: kadm.AppendConfig, Name: "retention.ms", Value: s("1")}, kerr.InvalidRequest},
	} {
		ar, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{bad.op}, "t")
		if err != nil || !errors.Is(ar[0].Err, bad.want) {
			t.Errorf("%+v: %v, %+v; want %v", bad.op, err, ar, bad.want)
		}
	}
	if got := val(describe()["max.message.bytes"]); got != "4096" {
		t.Errorf("refused alterations changed max.message.bytes to %s", got)
	}
}

// TestKadmDeleteRecords: kadm's DeleteRecords moves the log start offset
// (the low watermark it answers), ListStartOffsets sees it, and a kgo
// consumer reading from the start begins there.
func TestKadmDeleteRecords(t *testing.T) {
	c := kafkatest.New(t, kafkatest.Topic("t", 2))
	ctx := testCtx(t, 15*time.Second)
	adm := newKadm(t, c.Addr())
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for p := int32(0); p < 2; p++ {
		for i := 0; i < 10; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: p, Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "t", Partition: 0, At: 4})
	os.Add(kadm.Offset{Topic: "t", Partition: 1, At: 100})
	dr, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := dr.Lookup("t", 0); r.Err != nil || r.LowWatermark != 4 {
		t.Errorf("partition 0: %+v", r)
	}
	if r, _ := dr.Lookup("t", 1); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Errorf("partition 1, past the end: %+v, want OFFSET_OUT_OF_RANGE", r)
	}
	starts, err := adm.ListStartOffsets(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("t", 0); o.Offset != 4 {
		t.Errorf("start of partition 0: %+v", o)
	}
	if o, _ := starts.Lookup("t", 1); o.Offset != 0 {
		t.Errorf("start of partition 1: %+v", o)
	}
	if p, err := c.Broker().Partition("t", 0); err != nil || p.StartOffset() != 4 {
		t.Fatalf("Strata's start offset: %v", err)
	}

	consumer, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": {0: kgo.NewOffset().AtStart()}}), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	var first *kgo.Record
	for first == nil {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if first == nil {
				first = r
			}
		})
	}
	if first.Offset != 4 || string(first.Value) != "4" {
		t.Errorf("first record read from the start: offset %d value %q", first.Offset, first.Value)
	}
}

// TestKadmOffsetForLeaderEpoch: the standalone broker answers from the
// partition's leader-epoch cache.
func TestKadmOffsetForLeaderEpoch(t *testing.T) {
	c := kafkatest.New(t, kafkatest.Seed("t", log.Record{Value: []byte("a")}, log.Record{Value: []byte("b")}))
	ctx := testCtx(t, 15*time.Second)
	adm := newKadm(t, c.Addr())
	var req kadm.OffsetForLeaderEpochRequest
	req.Add("t", 0, 0)
	resp, err := adm.OffsetForLeaderEpoch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	r := resp["t"][0]
	if r.Err != nil || r.LeaderEpoch != 0 || r.EndOffset != 2 {
		t.Errorf("epoch 0: %+v, want epoch 0 ending at 2", r)
	}
}

// TestKgoCommitMetadata: a kgo group consumer's commits keep their
// metadata (kgo's default, the member id, or what a PreCommitFn sets) and
// leader epoch; kadm's FetchOffsets reads them back.
func TestKgoCommitMetadata(t *testing.T) {
	c := kafkatest.New(t, kafkatest.Topic("m", 1))
	ctx := testCtx(t, 20*time.Second)
	producer := kgoClient(t, c.Addr())
	for i := 0; i < 5; i++ {
		if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "m", Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("m"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	n := 0
	for n < 5 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatal(err)
		}
		n += fs.NumRecords()
	}
	commitCtx := kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		for i := range req.Topics {
			for j := range req.Topics[i].Partitions {
				req.Topics[i].Partitions[j].Metadata = kmsg.StringPtr("checkpoint 5")
			}
		}
		return nil
	})
	if err := cl.CommitUncommittedOffsets(commitCtx); err != nil {
		t.Fatal(err)
	}
	adm := newKadm(t, c.Addr())
	fetched := func() kadm.Offset {
		t.Helper()
		offs, err := adm.FetchOffsets(ctx, "g")
		if err != nil {
			t.Fatal(err)
		}
		o, ok := offs.Lookup("m", 0)
		if !ok || o.Err != nil {
			t.Fatalf("fetch offsets: %+v", offs)
		}
		return o.Offset
	}
	if o := fetched(); o.At != 5 || o.Metadata != "checkpoint 5" || o.LeaderEpoch != 0 {
		t.Errorf("committed: %+v, want offset 5, epoch 0, metadata %q", o, "checkpoint 5")
	}

	// kgo's own metadata (the member id), with a commit of its own.
	if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "m", Value: []byte("5")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for n < 6 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatal(err)
		}
		n += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	member, _ := cl.GroupMetadata()
	if o := fetched(); o.At != 6 || o.Metadata != member || member == "" {
		t.Errorf("committed: %+v, want offset 6 and metadata %q (the member id)", o, member)
	}
	// Strata's own view of it.
	got := c.Broker().GroupCoordinator().CommittedWithMetadata("g", nil)
	if co := got[log.TopicPartition{Topic: "m"}]; co.Offset != 6 || co.Metadata != member {
		t.Errorf("Strata's commit: %+v", co)
	}
}
