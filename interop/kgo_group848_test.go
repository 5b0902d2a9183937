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

	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/kafka/kafkatest"
	"github.com/strata-log/strata/log"
)

// describe848 answers ConsumerGroupDescribe of group through cl.
func describe848(ctx context.Context, cl *kgo.Client, group string) (kmsg.ConsumerGroupDescribeResponseGroup, error) {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return kmsg.ConsumerGroupDescribeResponseGroup{}, err
	}
	return resp.Groups[0], nil
}

// await848 polls ConsumerGroupDescribe, bounded by ctx, until ok accepts
// the group.
func await848(ctx context.Context, t *testing.T, cl *kgo.Client, group, what string, ok func(kmsg.ConsumerGroupDescribeResponseGroup) bool) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last kmsg.ConsumerGroupDescribeResponseGroup
	for {
		g, err := describe848(ctx, cl, group)
		if err == nil && g.ErrorCode == 0 {
			last = g
			if ok(g) {
				return g
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("group %s never %s: last %+v, %v", group, what, last, err)
		case <-tick.C:
		}
	}
}

// held returns each member's assigned partitions of topic, sorted.
func held(g kmsg.ConsumerGroupDescribeResponseGroup, topic string) [][]int32 {
	var out [][]int32
	for _, m := range g.Members {
		out = append(out, heldBy(m, topic))
	}
	return out
}

func heldBy(m kmsg.ConsumerGroupDescribeResponseGroupMember, topic string) []int32 {
	var ps []int32
	for _, t := range m.Assignment.TopicPartitions {
		if t.Topic == topic {
			ps = append(ps, t.Partitions...)
		}
	}
	slices.Sort(ps)
	return ps
}

// TestKgo848Group: kgo consumers with kgo.ServerSideBalancer (KIP-848)
// join a Strata group: the coordinator assigns (uniform, for kgo's sticky
// balancer), they read every record and commit at their epochs; a third
// member joining takes its share; members leaving hand theirs back.
func TestKgo848Group(t *testing.T) {
	const topic, group, parts = "events848", "billing848", 6
	c := kafkatest.New(t, kafkatest.Topic(topic, parts))
	ctx := testCtx(t, 60*time.Second)
	want := makeRecs("g848", 300)
	kgoProduce(ctx, t, c.Addr(), topic, want)
	adm := newKadm(t, c.Addr())
	admCl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()

	opts := []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer())}
	recs := make(chan *kgo.Record, 64)
	a := startKgoMember(t, c.Addr(), group, topic, recs, opts...)
	defer a.close()
	b := startKgoMember(t, c.Addr(), group, topic, recs, opts...)
	defer b.close()

	seen := map[[2]int64]bool{}
	var consumed []*kgo.Record
	for len(seen) < len(want) {
		select {
		case r := <-recs:
			consumed = append(consumed, r)
			seen[[2]int64{int64(r.Partition), r.Offset}] = true
		case <-ctx.Done():
			t.Fatalf("the group consumed %d records of %d", len(seen), len(want))
		}
	}
	checkKgoConsumed(t, c, topic, consumed)
	drain(ctx, recs)

	g := await848(ctx, t, admCl, group, "stable with two members holding 3 partitions each", func(g kmsg.ConsumerGroupDescribeResponseGroup) bool {
		return g.State == "Stable" && len(g.Members) == 2 && balanced(held(g, topic), parts)
	})
	if g.AssignorName != "uniform" {
		t.Errorf("assignor %q, want uniform", g.AssignorName)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	awaitCommitted(ctx, t, adm, group, topic, ends)

	// KIP-1043: the group lists as a consumer group, not a classic one,
	// and the classic describe answers it as Kafka does.
	for _, typ := range []string{"consumer", "classic"} {
		listed, err := adm.ListGroupsByType(ctx, []string{typ}, "Stable")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := listed[group]; ok != (typ == "consumer") {
			t.Errorf("ListGroups of type %s: %v", typ, listed)
		}
	}
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if d := described[group]; !errors.Is(d.Err, kerr.GroupIDNotFound) || d.State != "Dead" || len(d.Members) != 0 {
		t.Errorf("DescribeGroups of a consumer group: %+v, want GROUP_ID_NOT_FOUND, Dead", d)
	}

	// A third member takes two partitions; the others keep two each.
	before := map[string][]int32{}
	for _, m := range g.Members {
		before[m.MemberID] = heldBy(m, topic)
	}
	x := startKgoMember(t, c.Addr(), group, topic, recs, opts...)
	defer x.close()
	g = await848(ctx, t, admCl, group, "stable with three members holding 2 partitions each", func(g kmsg.ConsumerGroupDescribeResponseGroup) bool {
		return g.State == "Stable" && len(g.Members) == 3 && balanced(held(g, topic), parts)
	})
	kept := 0
	for _, m := range g.Members {
		for _, p := range heldBy(m, topic) {
			if slices.Contains(before[m.MemberID], p) {
				kept++
			}
		}
	}
	if kept != 4 {
		t.Errorf("the first two members kept %d partitions of their 6, want 4 (only the newcomer's share moves): before %v, after %v", kept, before, held(g, topic))
	}

	a.close()
	x.close()
	await848(ctx, t, admCl, group, "left to one member with every partition", func(g kmsg.ConsumerGroupDescribeResponseGroup) bool {
		hs := held(g, topic)
		return g.State == "Stable" && len(hs) == 1 && len(hs[0]) == parts
	})
	b.close()
	await848(ctx, t, admCl, group, "empty", func(g kmsg.ConsumerGroupDescribeResponseGroup) bool {
		return g.State == "Empty" && len(g.Members) == 0
	})
	awaitCommitted(ctx, t, adm, group, topic, ends)
}

// TestKgo848Regex: a kgo consumer subscribed by regex with
// kgo.ServerSideBalancer: the coordinator resolves the expression against
// the topics (kgo's Test848RegexBrokerResolves), and a matching topic
// created later is assigned too.
func TestKgo848Regex(t *testing.T) {
	const group = "regex848"
	c := kafkatest.New(t, kafkatest.Topic("re-a", 2), kafkatest.Topic("re-b", 1), kafkatest.Topic("other", 1))
	ctx := testCtx(t, 60*time.Second)
	for _, topic := range []string{"re-a", "re-b", "other"} {
		kgoProduce(ctx, t, c.Addr(), topic, makeRecs(topic, 10))
	}
	recs := make(chan *kgo.Record, 64)
	m := startKgoMember(t, c.Addr(), group, "re-.*", recs, kgo.ConsumeRegex(), kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()))
	defer m.close()
	got := map[string]int{}
	for got["re-a"]+got["re-b"] < 20 {
		select {
		case r := <-recs:
			got[r.Topic]++
		case <-ctx.Done():
			t.Fatalf("consumed %v", got)
		}
	}
	if got["other"] != 0 {
		t.Errorf("consumed %d records of a topic the regex does not match", got["other"])
	}

	adm := newKadm(t, c.Addr())
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "re-c"); err != nil {
		t.Fatal(err)
	}
	kgoProduce(ctx, t, c.Addr(), "re-c", makeRecs("re-c", 5))
	for got["re-c"] < 5 {
		select {
		case r := <-recs:
			got[r.Topic]++
		case <-ctx.Done():
			t.Fatalf("consumed %v: nothing of re-c, created after the join", got)
		}
	}
	admCl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	g, err := describe848(ctx, admCl, group)
	if err != nil || len(g.Members) != 1 || g.Members[0].SubscribedTopicRegex == nil {
		t.Fatalf("describe: %+v, %v", g, err)
	}
}

// TestStrataClient848Group: a Strata Consumer of the consumer group
// protocol (log.GroupProtocolConsumer) over kafka.Dial and a kgo consumer
// with kgo.ServerSideBalancer share one KIP-848 group, on a three-broker
// kfake cluster (random topic ids, learned from Metadata) and on Strata's
// own server: the coordinator splits the partitions between them, every
// record is read, the commits reach the end offsets.
func TestStrataClient848Group(t *testing.T) {
	const topic, group, parts = "orders", "g848", 6
	for _, backend := range []string{"kfake", "strata"} {
		t.Run(backend, func(t *testing.T) {
			ctx := testCtx(t, 60*time.Second)
			seeds, _ := groupBackend(t, backend, topic, parts)
			cl, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: seeds})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			p, err := log.NewProducer(cl, log.ProducerConfig{})
			if err != nil {
				t.Fatal(err)
			}
			want := makeRecs("g848-"+backend, 300)
			sendAll(ctx, t, p, topic, want)
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}

			strata := make(chan log.Record, 64)
			stop := startStrataMember(t, cl, log.GroupProtocolConsumer, group, topic, strata)
			defer stop()
			kgoRecs := make(chan *kgo.Record, 64)
			m := startKgoMember(t, seeds[0], group, topic, kgoRecs, kgo.ServerSideBalancer())
			defer m.close()

			seen := map[string]bool{}
			for len(seen) < len(want) {
				select {
				case r := <-strata:
					seen[string(r.Value)] = true
				case r := <-kgoRecs:
					seen[string(r.Value)] = true
				case <-ctx.Done():
					t.Fatalf("the group consumed %d records of %d", len(seen), len(want))
				}
			}
			drain(ctx, strata)
			drain(ctx, kgoRecs)
			admCl := kgoClient(t, seeds[0])
			await848(ctx, t, admCl, group, "stable with two members, 3 partitions each", func(g kmsg.ConsumerGroupDescribeResponseGroup) bool {
				// By partition alone: kfake names the topics by id only.
				var as [][]int32
				for _, m := range g.Members {
					var ps []int32
					for _, t := range m.Assignment.TopicPartitions {
						ps = append(ps, t.Partitions...)
					}
					as = append(as, ps)
				}
				return g.State == "Stable" && len(g.Members) == 2 && balanced(as, parts)
			})
			adm := kadm.NewClient(admCl)
			ends, err := adm.ListEndOffsets(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			awaitCommitted(ctx, t, adm, group, topic, ends)
		})
	}
}
