package interop

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/kafka/kafkatest"
	"github.com/strata-log/strata/log"
)

// startStrataMember runs a Strata Consumer of group over cl with the
// group protocol proto, polling and committing after each Poll, until the
// returned stop closes it. A commit refused for a rebalance (classic) or a
// newer member epoch (consumer) is left to the next Poll; any other error
// fails the test.
func startStrataMember(t *testing.T, cl log.Client, proto log.GroupProtocol, group, topic string, out chan<- log.Record) (stop func()) {
	t.Helper()
	retry := []error{log.ErrRebalanceInProgress, log.ErrIllegalGeneration, log.ErrUnknownMember}
	if proto == log.GroupProtocolConsumer {
		retry = []error{log.ErrStaleMemberEpoch, log.ErrFencedMemberEpoch, log.ErrUnknownMember}
	}
	cons, err := log.NewConsumer(cl, log.ConsumerConfig{
		Group: group, Topics: []string{topic}, Protocol: proto, MaxWait: 100 * time.Millisecond,
		SessionTimeout: 10 * time.Second, HeartbeatInterval: 100 * time.Millisecond, RebalanceTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			rs, err := cons.Poll(ctx)
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("strata poll: %v", err)
				}
				return
			}
			for _, r := range rs {
				select {
				case out <- r:
				case <-ctx.Done():
					return
				}
			}
			err = cons.Commit(ctx)
			if err != nil && ctx.Err() == nil && !slices.ContainsFunc(retry, func(e error) bool { return errors.Is(err, e) }) {
				t.Errorf("strata commit: %v", err)
			}
		}
	}()
	return func() {
		cancel()
		wg.Wait()
		if err := cons.Close(); err != nil {
			t.Errorf("close consumer: %v", err)
		}
	}
}

// groupBackend starts what a group test runs on, by name: "kfake", a
// three-broker kfake cluster, or "strata", Strata's own server (the
// fixture, nil for kfake), with topic of parts partitions; both stop
// when the test ends. It returns the seeds.
func groupBackend(t *testing.T, backend, topic string, parts int) ([]string, *kafkatest.Cluster) {
	t.Helper()
	if backend == "kfake" {
		kc, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(int32(parts), topic))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(kc.Close)
		return kc.ListenAddrs(), nil
	}
	fixture := kafkatest.New(t, kafkatest.Topic(topic, parts))
	return []string{fixture.Addr()}, fixture
}

// TestStrataClientGroup: two Strata Consumers over kafka.Dial, a kgo
// consumer with its range balancer and a sarama ConsumerGroup member with
// its range strategy share one group (Strata's consumers speak Kafka's
// classic "consumer" protocol with the "range" assignor; whichever member
// leads decodes the others' subscriptions) on a three-broker kfake cluster
// and on Strata's own server: even shares, every record, commits at the
// end offsets.
func TestStrataClientGroup(t *testing.T) {
	const topic, group, parts = "orders", "mixed", 6
	for _, backend := range []string{"kfake", "strata"} {
		t.Run(backend, func(t *testing.T) {
			ctx := testCtx(t, 30*time.Second)
			seeds, fixture := groupBackend(t, backend, topic, parts)
			cl, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: seeds})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			p, err := log.NewProducer(cl, log.ProducerConfig{})
			if err != nil {
				t.Fatal(err)
			}
			want := makeRecs("mixed-"+backend, 300)
			sent := sendAll(ctx, t, p, topic, want)
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			if fixture != nil {
				checkStored(t, fixture, topic, want, javaPartitioner)
			}
			bySpot := map[[2]int64]string{}
			for _, r := range sent {
				bySpot[[2]int64{int64(r.Partition), r.Offset}] = string(r.Value)
			}

			strata := make(chan log.Record, 64)
			stopA := startStrataMember(t, cl, log.GroupProtocolClassic, group, topic, strata)
			defer stopA()
			cl2, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: seeds})
			if err != nil {
				t.Fatal(err)
			}
			defer cl2.Close()
			stopB := startStrataMember(t, cl2, log.GroupProtocolClassic, group, topic, strata)
			defer stopB()
			kgoRecs := make(chan *kgo.Record, 64)
			m := startKgoMember(t, seeds[0], group, topic, kgoRecs, kgo.Balancers(kgo.RangeBalancer()))
			defer m.close()
			saramaMsgs := make(chan *sarama.ConsumerMessage, 64)
			stopS := startSaramaMember(t, seeds[0], group, topic, sarama.NewBalanceStrategyRange(), saramaMsgs)
			defer stopS()

			seen := map[[2]int64]bool{}
			check := func(who string, p int, off int64, v []byte) {
				spot := [2]int64{int64(p), off}
				if got, ok := bySpot[spot]; !ok || got != string(v) {
					t.Fatalf("%s consumed %d/%d %.30q, not what was produced there", who, p, off, v)
				}
				seen[spot] = true
			}
			for len(seen) < len(want) {
				select {
				case r := <-strata:
					check("strata", r.Partition, r.Offset, r.Value)
				case r := <-kgoRecs:
					check("kgo", int(r.Partition), r.Offset, r.Value)
				case m := <-saramaMsgs:
					check("sarama", int(m.Partition), m.Offset, m.Value)
				case <-ctx.Done():
					t.Fatalf("the group consumed %d records of %d", len(seen), len(want))
				}
			}
			// Members blocked on a full channel would commit no more.
			drain(ctx, strata)
			drain(ctx, kgoRecs)
			drain(ctx, saramaMsgs)
			adm := newKadm(t, seeds[0])
			dg := awaitGroup(ctx, t, adm, group, "stable with four members, 1 or 2 partitions each", func(dg kadm.DescribedGroup) bool {
				return dg.State == "Stable" && len(dg.Members) == 4 && balanced(assigned(dg, topic), parts)
			})
			if dg.ProtocolType != "consumer" || dg.Protocol != "range" {
				t.Errorf("group protocol %q %q, want consumer range", dg.ProtocolType, dg.Protocol)
			}
			ends, err := adm.ListEndOffsets(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			awaitCommitted(ctx, t, adm, group, topic, ends)
		})
	}
}
