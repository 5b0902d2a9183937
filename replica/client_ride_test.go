package replica_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
)

// Clients ride through the loss of the partition's leader — closed, or
// cut off from every other node as a killed process is: an idempotent
// Producer and a group Consumer, through a member or through kafka.Dial
// (seeded with every member), go on sending, polling and committing
// within their contexts. Every record sent is consumed, and the group's
// committed offset reaches the end.
func TestClientsRideThroughLeaderLoss(t *testing.T) {
	for _, how := range []string{"close", "kill"} {
		for _, via := range []string{"member", "dial"} {
			t.Run(how+"/"+via, func(t *testing.T) { testClientsRideThroughLeaderLoss(t, how, via) })
		}
	}
}

func testClientsRideThroughLeaderLoss(t *testing.T, how, via string) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, "kafka")
	c.createTopic("t", log.TopicConfig{Partitions: 1, ReplicationFactor: 3, MinInSyncReplicas: 2})
	old := c.leader("t", 0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var cl log.Client = c.any(old)
	if via == "dial" {
		var seeds []string
		for _, p := range c.peers {
			seeds = append(seeds, p.Addr)
		}
		kc, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: seeds, Dial: c.net.Node("client").Dial})
		require.NoError(t, err)
		defer kc.Close()
		cl = kc
	}
	prod, err := log.NewProducer(cl, log.ProducerConfig{Idempotent: true})
	require.NoError(t, err)
	defer prod.Close()
	cons, err := log.NewConsumer(cl, log.ConsumerConfig{Group: "g", Topics: []string{"t"}, MaxWait: 50 * time.Millisecond,
		SessionTimeout: 10 * time.Second, HeartbeatInterval: 500 * time.Millisecond})
	require.NoError(t, err)
	defer cons.Close()

	got := map[string]int{}
	send := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			_, err := prod.Send(ctx, log.Record{Topic: "t", Value: fmt.Appendf(nil, "v%d", i)})
			require.NoError(t, err, "send %d", i)
		}
	}
	consume := func(n int) {
		t.Helper()
		for len(got) < n {
			recs, err := cons.Poll(ctx)
			require.NoError(t, err, "poll after %d of %d records", len(got), n)
			for _, r := range recs {
				got[string(r.Value)]++
			}
		}
	}
	commit := func() {
		t.Helper()
		for {
			err := cons.Commit(ctx)
			if err == nil {
				return
			}
			// A member that a coordinator's move left behind is refused;
			// the next Poll rejoins and the commit goes through.
			require.True(t, errors.Is(err, log.ErrUnknownMember) || errors.Is(err, log.ErrIllegalGeneration) ||
				errors.Is(err, log.ErrRebalanceInProgress), "commit: %v", err)
			_, err = cons.Poll(ctx)
			require.NoError(t, err)
		}
	}
	send(0, 50)
	consume(50)
	commit()

	switch how {
	case "close":
		c.stop(old)
	case "kill":
		c.net.Isolate(node(old))
	}
	start := time.Now()
	send(50, 51)
	t.Logf("leader %d lost (%s): next acknowledgement after %v", old, how, time.Since(start).Round(time.Millisecond))
	send(51, 100)
	consume(100)
	commit()
	for i := range 100 {
		require.NotZero(t, got[fmt.Sprintf("v%d", i)], "v%d not consumed", i)
	}
	committed, err := cl.FetchOffsets(ctx, "g", []log.TopicPartition{{Topic: "t"}})
	require.NoError(t, err)
	require.Equal(t, map[log.TopicPartition]int64{{Topic: "t"}: 100}, committed)
}

// partitionsWatch is a Client that reports its first Partitions call that
// found no topic.
type partitionsWatch struct {
	log.Client
	unknown chan struct{} // closed at the first ErrUnknownTopic
	once    sync.Once
}

func (w *partitionsWatch) Partitions(ctx context.Context, topic string) (int, error) {
	n, err := w.Client.Partitions(ctx, topic)
	if errors.Is(err, log.ErrUnknownTopic) {
		w.once.Do(func() { close(w.unknown) })
	}
	return n, err
}

// A Send through one member (or kafka.Dial seeded with it) to a topic that
// does not exist yet waits for the topic's metadata: created through
// another member after the Send began, the record goes through.
func TestSendWaitsForTopicCreatedElsewhere(t *testing.T) {
	for _, via := range []string{"member", "dial"} {
		t.Run(via, func(t *testing.T) {
			leaktest.Check(t)
			c := startClusterOver(t, 3, "kafka")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var cl log.Client = c.member(2)
			if via == "dial" {
				kc, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{c.peers[1].Addr}, Dial: c.net.Node("client").Dial})
				require.NoError(t, err)
				defer kc.Close()
				cl = kc
			}
			w := &partitionsWatch{Client: cl, unknown: make(chan struct{})}
			prod, err := log.NewProducer(w, log.ProducerConfig{})
			require.NoError(t, err)
			defer prod.Close()
			sent := make(chan error, 1)
			go func() {
				_, err := prod.Send(ctx, log.Record{Topic: "late", Value: []byte("x")})
				sent <- err
			}()
			<-w.unknown // the Send met no topic
			require.NoError(t, c.member(1).CreateTopic(ctx, "late", log.TopicConfig{Partitions: 2, ReplicationFactor: 3}))
			require.NoError(t, <-sent)
		})
	}
}
