package interop

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strata-log/strata/kafka/kafkatest"
)

// saramaHandler passes every claimed message on and marks it.
type saramaHandler struct {
	out chan<- *sarama.ConsumerMessage
}

func (saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for {
		select {
		case m, ok := <-c.Messages():
			if !ok {
				return nil
			}
			select {
			case h.out <- m:
			case <-s.Context().Done():
				return nil
			}
			s.MarkMessage(m, "")
		case <-s.Context().Done():
			return nil
		}
	}
}

// startSaramaMember runs a sarama ConsumerGroup member until the returned
// stop is called (which closes it: it leaves the group).
func startSaramaMember(t *testing.T, seed, group, topic string, strategy sarama.BalanceStrategy, out chan<- *sarama.ConsumerMessage) (stop func()) {
	t.Helper()
	cfg := saramaConfig()
	cfg.Version = sarama.V2_1_0_0
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Interval = 50 * time.Millisecond
	cfg.Consumer.Group.Heartbeat.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{strategy}
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 50 * time.Millisecond
	cfg.Consumer.MaxWaitTime = 100 * time.Millisecond
	cfg.Consumer.Return.Errors = true
	g, err := sarama.NewConsumerGroup([]string{seed}, group, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() {
		defer func() { done <- struct{}{} }()
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{topic}, saramaHandler{out}); err != nil {
				if !errors.Is(err, sarama.ErrClosedConsumerGroup) {
					t.Errorf("sarama consume: %v", err)
				}
				return
			}
		}
	}()
	go func() {
		defer func() { done <- struct{}{} }()
		for err := range g.Errors() {
			t.Errorf("sarama group: %v", err)
		}
	}()
	return func() {
		cancel()
		if err := g.Close(); err != nil {
			t.Errorf("close sarama group: %v", err)
		}
		<-done
		<-done
	}
}

// TestSaramaConsumerGroup: two members of a sarama ConsumerGroup, with each
// of its balance strategies, share a topic's partitions evenly, read every
// record and commit their positions; one leaving hands its partitions over.
func TestSaramaConsumerGroup(t *testing.T) {
	for _, s := range []struct {
		name     string
		strategy sarama.BalanceStrategy
	}{
		{"range", sarama.NewBalanceStrategyRange()},
		{"roundrobin", sarama.NewBalanceStrategyRoundRobin()},
		{"sticky", sarama.NewBalanceStrategySticky()},
	} {
		t.Run(s.name, func(t *testing.T) {
			const topic, group, parts = "orders", "g", 6
			c := kafkatest.New(t, kafkatest.Topic(topic, parts))
			ctx := testCtx(t, 30*time.Second)
			want := makeRecs("sg-"+s.name, 240)
			kgoProduce(ctx, t, c.Addr(), topic, want)
			have := stored(t, c, topic)
			adm := newKadm(t, c.Addr())

			msgs := make(chan *sarama.ConsumerMessage, 64)
			stopA := startSaramaMember(t, c.Addr(), group, topic, s.strategy, msgs)
			stopB := startSaramaMember(t, c.Addr(), group, topic, s.strategy, msgs)
			defer func() {
				if stopB != nil {
					stopB()
				}
			}()
			seen := map[[2]int64]bool{}
			for len(seen) < len(want) {
				select {
				case m := <-msgs:
					if int(m.Partition) >= parts || m.Offset >= int64(len(have[m.Partition])) ||
						string(have[m.Partition][m.Offset].Value) != string(m.Value) {
						t.Fatalf("sarama consumed %d/%d %.30q: not what Strata stored", m.Partition, m.Offset, m.Value)
					}
					seen[[2]int64{int64(m.Partition), m.Offset}] = true
				case <-ctx.Done():
					t.Fatalf("the group consumed %d records of %d", len(seen), len(want))
				}
			}
			drain(ctx, msgs) // members blocked on a full channel would commit no more
			dg := awaitGroup(ctx, t, adm, group, "stable with two members, 3 partitions each", func(dg kadm.DescribedGroup) bool {
				return dg.State == "Stable" && len(dg.Members) == 2 && balanced(assigned(dg, topic), parts)
			})
			if dg.Protocol != s.strategy.Name() {
				t.Errorf("group protocol %q, want %q", dg.Protocol, s.strategy.Name())
			}
			ends, err := adm.ListEndOffsets(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			awaitCommitted(ctx, t, adm, group, topic, ends)

			stopA()
			awaitGroup(ctx, t, adm, group, "left to one member with every partition", func(dg kadm.DescribedGroup) bool {
				as := assigned(dg, topic)
				return dg.State == "Stable" && len(as) == 1 && len(as[0]) == parts
			})
			stopB()
			stopB = nil
			awaitGroup(ctx, t, adm, group, "empty", func(dg kadm.DescribedGroup) bool { return dg.State == "Empty" })
		})
	}
}
