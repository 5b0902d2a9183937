package interop

import (
	"context"
	"hash/crc32"
	"sync"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strata-log/strata/kafka/kafkatest"
)

// kafkagoMessages converts recs to kafka-go messages.
func kafkagoMessages(rs []rec) []kafkago.Message {
	out := make([]kafkago.Message, len(rs))
	for i, r := range rs {
		m := kafkago.Message{Key: r.key, Value: r.value, Time: r.ts}
		for _, h := range r.headers {
			m.Headers = append(m.Headers, kafkago.Header{Key: h.Key, Value: h.Value})
		}
		out[i] = m
	}
	return out
}

// crc32Partitioner is kafka-go's CRC32Balancer (librdkafka's "consistent").
func crc32Partitioner(key []byte, n int) int { return int(crc32.ChecksumIEEE(key) % uint32(n)) }

// TestKafkagoWriter: kafka-go's Writer with its balancers and codecs. Its
// Murmur2Balancer puts keys where the Java client (and Strata) does; its
// Hash balancer where sarama's default partitioner does.
func TestKafkagoWriter(t *testing.T) {
	for _, tc := range []struct {
		name     string
		balancer kafkago.Balancer
		codec    compress.Compression
		check    partitioner
	}{
		{"default", nil, 0, nil}, // round robin: no keyed placement
		{"murmur2-gzip", kafkago.Murmur2Balancer{}, compress.Gzip, javaPartitioner},
		{"hash-snappy", &kafkago.Hash{}, compress.Snappy, saramaHash},
		{"crc32-lz4", kafkago.CRC32Balancer{}, compress.Lz4, crc32Partitioner},
		{"leastbytes-zstd", &kafkago.LeastBytes{}, compress.Zstd, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const topic = "writer"
			c := kafkatest.New(t, kafkatest.Topic(topic, 4))
			ctx := testCtx(t, 15*time.Second)
			w := &kafkago.Writer{
				Addr:         kafkago.TCP(c.Addr()),
				Topic:        topic,
				Balancer:     tc.balancer,
				Compression:  tc.codec,
				BatchTimeout: 5 * time.Millisecond,
				RequiredAcks: kafkago.RequireAll,
				WriteTimeout: 5 * time.Second,
				ReadTimeout:  5 * time.Second,
			}
			defer w.Close()
			want := makeRecs("kafkago-"+tc.name, 120)
			msgs := kafkagoMessages(want)
			for _, m := range msgs[:20] {
				if err := w.WriteMessages(ctx, m); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.WriteMessages(ctx, msgs[20:]...); err != nil {
				t.Fatal(err)
			}
			checkStored(t, c, topic, want, tc.check)
		})
	}
}

// TestKafkagoReader: kafka-go's Reader (one partition, no group) reads what
// Strata stored, with keys, values, headers and timestamps.
func TestKafkagoReader(t *testing.T) {
	const topic = "reader"
	c := kafkatest.New(t, kafkatest.Topic(topic, 2))
	ctx := testCtx(t, 15*time.Second)
	want := makeRecs("kgr", 60)
	kgoProduce(ctx, t, c.Addr(), topic, want)
	parts := stored(t, c, topic)
	for p, rs := range parts {
		r := kafkago.NewReader(kafkago.ReaderConfig{
			Brokers:   []string{c.Addr()},
			Topic:     topic,
			Partition: p,
			MaxWait:   100 * time.Millisecond,
		})
		for _, s := range rs {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatalf("partition %d: %v", p, err)
			}
			if m.Offset != s.Offset || string(m.Key) != string(s.Key) || string(m.Value) != string(s.Value) ||
				!m.Time.Equal(s.Timestamp) || len(m.Headers) != len(s.Headers) {
				t.Fatalf("partition %d: read offset %d key %q ts %d headers %d; stored offset %d key %q ts %d headers %d",
					p, m.Offset, m.Key, m.Time.UnixMilli(), len(m.Headers), s.Offset, s.Key, s.Timestamp.UnixMilli(), len(s.Headers))
			}
			for i, h := range m.Headers {
				if h.Key != s.Headers[i].Key || string(h.Value) != string(s.Headers[i].Value) {
					t.Fatalf("partition %d offset %d: header %d %q=%q, stored %q=%q", p, m.Offset, i, h.Key, h.Value, s.Headers[i].Key, s.Headers[i].Value)
				}
			}
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKafkagoGroupReader: two kafka-go Readers in a group share a topic's
// partitions evenly (its default range balancer), read every record and
// commit; kadm sees the group and its offsets.
func TestKafkagoGroupReader(t *testing.T) {
	const topic, group, parts = "orders", "kg", 4
	c := kafkatest.New(t, kafkatest.Topic(topic, parts))
	ctx := testCtx(t, 30*time.Second)
	want := makeRecs("kgroup", 120)
	kgoProduce(ctx, t, c.Addr(), topic, want)
	have := stored(t, c, topic)
	adm := newKadm(t, c.Addr())

	msgs := make(chan kafkago.Message, 64)
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var readers []*kafkago.Reader
	for range 2 {
		r := kafkago.NewReader(kafkago.ReaderConfig{
			Brokers:           []string{c.Addr()},
			GroupID:           group,
			Topic:             topic,
			StartOffset:       kafkago.FirstOffset,
			MaxWait:           100 * time.Millisecond,
			HeartbeatInterval: 100 * time.Millisecond,
			CommitInterval:    50 * time.Millisecond,
			JoinGroupBackoff:  50 * time.Millisecond,
			ReadBackoffMin:    10 * time.Millisecond,
			ReadBackoffMax:    50 * time.Millisecond,
		})
		readers = append(readers, r)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m, err := r.ReadMessage(rctx)
				if err != nil {
					if rctx.Err() == nil {
						t.Errorf("kafka-go read: %v", err)
					}
					return
				}
				select {
				case msgs <- m:
				case <-rctx.Done():
					return
				}
			}
		}()
	}
	defer func() {
		stop()
		wg.Wait()
		for _, r := range readers {
			if err := r.Close(); err != nil {
				t.Errorf("close reader: %v", err)
			}
		}
	}()

	seen := map[[2]int64]bool{}
	for len(seen) < len(want) {
		select {
		case m := <-msgs:
			if m.Partition >= parts || m.Offset >= int64(len(have[m.Partition])) ||
				string(have[m.Partition][m.Offset].Value) != string(m.Value) || !have[m.Partition][m.Offset].Timestamp.Equal(m.Time) {
				t.Fatalf("kafka-go consumed %d/%d %.30q: not what Strata stored", m.Partition, m.Offset, m.Value)
			}
			seen[[2]int64{int64(m.Partition), m.Offset}] = true
		case <-ctx.Done():
			t.Fatalf("the group consumed %d records of %d", len(seen), len(want))
		}
	}
	drain(ctx, msgs) // readers blocked on a full channel would commit no more
	awaitGroup(ctx, t, adm, group, "stable with two members, 2 partitions each", func(dg kadm.DescribedGroup) bool {
		return dg.State == "Stable" && len(dg.Members) == 2 && balanced(assigned(dg, topic), parts)
	})
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	awaitCommitted(ctx, t, adm, group, topic, ends)
}

// TestKafkagoClient: kafka-go's Client, whose protocol encoding is its own
// (not kmsg's), for admin and offset requests against Strata's server.
func TestKafkagoClient(t *testing.T) {
	c := kafkatest.New(t)
	ctx := testCtx(t, 15*time.Second)
	cl := &kafkago.Client{Addr: kafkago.TCP(c.Addr()), Timeout: 5 * time.Second}

	ct, err := cl.CreateTopics(ctx, &kafkago.CreateTopicsRequest{Topics: []kafkago.TopicConfig{
		{Topic: "kg", NumPartitions: 3, ReplicationFactor: 1, ConfigEntries: []kafkago.ConfigEntry{{ConfigName: "retention.ms", ConfigValue: "60000"}}},
		{Topic: "gone", NumPartitions: 1, ReplicationFactor: 1},
	}})
	if err != nil || ct.Errors["kg"] != nil || ct.Errors["gone"] != nil {
		t.Fatalf("create topics: %v %v", err, ct)
	}
	if cfg, err := c.Broker().TopicConfig("kg"); err != nil || cfg.Partitions != 3 || cfg.RetentionTime != time.Minute {
		t.Fatalf("Strata's config of kg: %+v, %v", cfg, err)
	}
	md, err := cl.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{"kg"}})
	if err != nil || len(md.Topics) != 1 || md.Topics[0].Error != nil || len(md.Topics[0].Partitions) != 3 || len(md.Brokers) != 1 {
		t.Fatalf("metadata: %v %+v", err, md)
	}

	want := makeRecs("kgc", 30)
	kgoProduce(ctx, t, c.Addr(), "kg", want)
	have := stored(t, c, "kg")
	lo, err := cl.ListOffsets(ctx, &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{
		"kg": {kafkago.FirstOffsetOf(0), kafkago.LastOffsetOf(0), kafkago.FirstOffsetOf(1), kafkago.LastOffsetOf(1), kafkago.FirstOffsetOf(2), kafkago.LastOffsetOf(2)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, po := range lo.Topics["kg"] {
		if po.Error != nil || po.FirstOffset != 0 || po.LastOffset != int64(len(have[po.Partition])) {
			t.Errorf("partition %d: offsets %d..%d (%v), want 0..%d", po.Partition, po.FirstOffset, po.LastOffset, po.Error, len(have[po.Partition]))
		}
	}

	dc, err := cl.DescribeConfigs(ctx, &kafkago.DescribeConfigsRequest{Resources: []kafkago.DescribeConfigRequestResource{
		{ResourceType: kafkago.ResourceTypeTopic, ResourceName: "kg", ConfigNames: []string{"retention.ms"}},
	}})
	if err != nil || len(dc.Resources) != 1 || dc.Resources[0].Error != nil {
		t.Fatalf("describe configs: %v %+v", err, dc)
	}
	if es := dc.Resources[0].ConfigEntries; len(es) != 1 || es[0].ConfigName != "retention.ms" || es[0].ConfigValue != "60000" {
		t.Errorf("described configs %+v", es)
	}

	// Offsets committed (by kadm, a group without members) as kafka-go sees them.
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "kg", Partition: 1, At: 2, LeaderEpoch: -1})
	if r, err := newKadm(t, c.Addr()).CommitOffsets(ctx, "kgc", os); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}
	of, err := cl.OffsetFetch(ctx, &kafkago.OffsetFetchRequest{GroupID: "kgc", Topics: map[string][]int{"kg": {0, 1}}})
	if err != nil || of.Error != nil {
		t.Fatalf("offset fetch: %v %+v", err, of)
	}
	got := map[int]int64{}
	for _, p := range of.Topics["kg"] {
		if p.Error != nil {
			t.Fatalf("offset fetch of kg/%d: %v", p.Partition, p.Error)
		}
		got[p.Partition] = p.CommittedOffset
	}
	if got[0] != -1 || got[1] != 2 {
		t.Errorf("committed offsets %v, want 0: -1 (none), 1: 2", got)
	}
	lg, err := cl.ListGroups(ctx, &kafkago.ListGroupsRequest{})
	if err != nil || lg.Error != nil || len(lg.Groups) != 1 || lg.Groups[0].GroupID != "kgc" {
		t.Fatalf("list groups: %v %+v", err, lg)
	}
	dg, err := cl.DescribeGroups(ctx, &kafkago.DescribeGroupsRequest{GroupIDs: []string{"kgc"}})
	if err != nil || len(dg.Groups) != 1 || dg.Groups[0].Error != nil || dg.Groups[0].GroupState != "Empty" {
		t.Fatalf("describe groups: %v %+v", err, dg)
	}
	dgr, err := cl.DeleteGroups(ctx, &kafkago.DeleteGroupsRequest{GroupIDs: []string{"kgc"}})
	if err != nil || dgr.Errors["kgc"] != nil {
		t.Fatalf("delete groups: %v %+v", err, dgr)
	}
	dt, err := cl.DeleteTopics(ctx, &kafkago.DeleteTopicsRequest{Topics: []string{"gone"}})
	if err != nil || dt.Errors["gone"] != nil {
		t.Fatalf("delete topics: %v %+v", err, dt)
	}
	if got := c.Broker().Topics(); len(got) != 1 || got[0] != "kg" {
		t.Fatalf("Strata's topics: %v", got)
	}
}

// TestKafkagoWriterDefaults: kafka-go's Writer as most programs make it —
// nothing but an address and a topic: acks=0 (RequireNone), round robin.
// Nothing answers an acks=0 produce, so the test waits, the Writer still
// open, for the records to be stored.
func TestKafkagoWriterDefaults(t *testing.T) {
	const topic = "defaults"
	c := kafkatest.New(t, kafkatest.Topic(topic, 3))
	ctx := testCtx(t, 15*time.Second)
	w := &kafkago.Writer{Addr: kafkago.TCP(c.Addr()), Topic: topic, BatchTimeout: 5 * time.Millisecond}
	defer w.Close()
	want := makeRecs("kgdef", 60)
	if err := w.WriteMessages(ctx, kafkagoMessages(want)...); err != nil {
		t.Fatal(err)
	}
	awaitStored(ctx, t, c, topic, len(want))
	checkStored(t, c, topic, want, nil)
}
