package interop

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/strata-log/strata/kafka/kafkatest"
)

// TestSaramaClusterAdmin: sarama's ClusterAdmin (its own encoders) creates,
// lists, describes and deletes topics, and sees a group's offsets that
// sarama's OffsetManager committed.
func TestSaramaClusterAdmin(t *testing.T) {
	c := kafkatest.New(t)
	ctx := testCtx(t, 15*time.Second)
	cfg := saramaConfig()
	cfg.Version = sarama.V2_1_0_0
	cfg.Consumer.Offsets.AutoCommit.Interval = 50 * time.Millisecond
	client, err := sarama.NewClient([]string{c.Addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	adm, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		t.Fatal(err)
	}

	ret := "120000"
	if err := adm.CreateTopic("sa", &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"retention.ms": &ret}}, false); err != nil {
		t.Fatal(err)
	}
	if err := adm.CreateTopic("sb", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	if err := adm.CreateTopic("sa", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		t.Errorf("create sa again: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	if cfg, err := c.Broker().TopicConfig("sa"); err != nil || cfg.Partitions != 2 || cfg.RetentionTime != 2*time.Minute {
		t.Fatalf("Strata's config of sa: %+v, %v", cfg, err)
	}
	topics, err := adm.ListTopics()
	if err != nil {
		t.Fatal(err)
	}
	if len(topics) != 2 || topics["sa"].NumPartitions != 2 || topics["sb"].NumPartitions != 1 {
		t.Fatalf("listed topics %+v", topics)
	}
	md, err := adm.DescribeTopics([]string{"sa"})
	if err != nil || len(md) != 1 || md[0].Err != sarama.ErrNoError || len(md[0].Partitions) != 2 {
		t.Fatalf("describe topics: %v %+v", err, md)
	}
	dcs, err := adm.DescribeConfigs([]*sarama.ConfigResource{
		{Type: sarama.TopicResource, Name: "sa", ConfigNames: []string{"retention.ms"}},
		{Type: sarama.TopicResource, Name: "nope"},
	}, sarama.DescribeConfigsOptions{IncludeSynonyms: true, IncludeDocumentation: true})
	if err != nil || len(dcs) != 2 {
		t.Fatalf("describe configs: %v %+v", err, dcs)
	}
	if d := dcs[0]; d.ErrorCode != sarama.ErrNoError || len(d.Configs) != 1 || d.Configs[0].Name != "retention.ms" || d.Configs[0].Value != ret {
		t.Errorf("configs of sa: %+v", d)
	}
	if d := dcs[1]; d.ErrorCode != sarama.ErrUnknownTopicOrPartition {
		t.Errorf("configs of a topic that does not exist: %+v", d)
	}
	brokers, controller, err := adm.DescribeCluster()
	if err != nil || len(brokers) != 1 || controller != brokers[0].ID() {
		t.Fatalf("describe cluster: %v, controller %d, brokers %v", err, controller, brokers)
	}

	// sarama's OffsetManager commits as a simple consumer (no members).
	kgoProduce(ctx, t, c.Addr(), "sa", makeRecs("sadm", 20))
	om, err := sarama.NewOffsetManagerFromClient("sgroup", client)
	if err != nil {
		t.Fatal(err)
	}
	pom, err := om.ManagePartition("sa", 1)
	if err != nil {
		t.Fatal(err)
	}
	pom.MarkOffset(5, "")
	om.Commit()
	if err := pom.Close(); err != nil {
		t.Fatal(err)
	}
	if err := om.Close(); err != nil {
		t.Fatal(err)
	}
	offs, err := adm.ListConsumerGroupOffsets("sgroup", map[string][]int32{"sa": {0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	if b := offs.GetBlock("sa", 1); b == nil || b.Err != sarama.ErrNoError || b.Offset != 5 {
		t.Errorf("committed offset of sa/1: %+v", b)
	}
	if b := offs.GetBlock("sa", 0); b == nil || b.Offset != -1 {
		t.Errorf("committed offset of sa/0 (none): %+v", b)
	}
	groups, err := adm.ListConsumerGroups()
	if err != nil || len(groups) != 1 {
		t.Fatalf("list groups: %v %v", err, groups)
	}
	gd, err := adm.DescribeConsumerGroups([]string{"sgroup"})
	if err != nil || len(gd) != 1 || gd[0].State != "Empty" {
		t.Fatalf("describe groups: %v %+v", err, gd)
	}
	if err := adm.DeleteConsumerGroup("sgroup"); err != nil {
		t.Fatal(err)
	}
	if err := adm.DeleteTopic("sb"); err != nil {
		t.Fatal(err)
	}
	if got := c.Broker().Topics(); !slices.Equal(got, []string{"sa"}) {
		t.Fatalf("Strata's topics: %v", got)
	}
}

// TestSaramaAdminNotServed: sarama's admin calls whose requests the server
// does not advertise fail at once with UNSUPPORTED_VERSION (sarama checks
// ApiVersions), and succeed once advertised.
func TestSaramaAdminNotServed(t *testing.T) {
	c := kafkatest.New(t, kafkatest.Topic("sa", 1))
	ctx := testCtx(t, 10*time.Second)
	cfg := saramaConfig()
	cfg.Version = sarama.V2_3_0_0 // the first with IncrementalAlterConfigs
	adm, err := sarama.NewClusterAdmin([]string{c.Addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	v := "1000"
	for _, call := range []struct {
		name string
		key  int16
		run  func() error
	}{
		{"CreatePartitions", 37, func() error { return adm.CreatePartitions("sa", 4, nil, false) }},
		{"DeleteRecords", 21, func() error { return adm.DeleteRecords("sa", map[int32]int64{0: 0}) }},
		{"IncrementalAlterConfig", 44, func() error {
			return adm.IncrementalAlterConfig(sarama.TopicResource, "sa", map[string]sarama.IncrementalAlterConfigsEntry{
				"retention.ms": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &v}}, false)
		}},
		{"DescribeLogDirs", 35, func() error { _, err := adm.DescribeLogDirs([]int32{1}); return err }},
	} {
		served := serves(ctx, t, c.Addr(), call.key)
		start := time.Now()
		err := call.run()
		switch {
		case served && err != nil:
			t.Errorf("%s is advertised and fails: %v", call.name, err)
		case !served && !errors.Is(err, sarama.ErrUnsupportedVersion):
			t.Errorf("%s is not advertised: %v, want UNSUPPORTED_VERSION", call.name, err)
		case time.Since(start) > 2*time.Second:
			t.Errorf("%s took %v", call.name, time.Since(start))
		}
	}
}
