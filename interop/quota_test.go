package interop

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/kafka/kafkatest"
)

// throttleHook counts the throttles kgo is told of (throttle_time_ms of a
// response, KIP-219).
type throttleHook struct{ n, ms atomic.Int64 }

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.n.Add(1)
		h.ms.Add(d.Milliseconds())
	}
}

var _ kgo.HookBrokerThrottle = (*throttleHook)(nil)

// TestClientQuotas: kadm sets a client quota (AlterClientQuotas) and reads
// it back (DescribeClientQuotas), an unknown key is INVALID_REQUEST; a kgo
// producer of that client id producing as fast as it can is throttled
// (throttle_time_ms, the connection muted) and gets at most what the
// quota lets through: its byte rate over the least measured span of 10 s
// plus what it had in flight. Bounded from above only, so it holds on a
// loaded machine; the rate itself is checked in virtual time in package
// kafka (TestQuotaProducerThrottledToItsRate).
func TestClientQuotas(t *testing.T) {
	const topic, quota = "q", 32 << 10
	fx := kafkatest.New(t, kafkatest.Topic(topic, 1))
	ctx := testCtx(t, 60*time.Second)
	admCl, err := kgo.NewClient(kgo.SeedBrokers(fx.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	testQuotaAdmin(ctx, t, adm, "throttled", quota, func() {})
	testProducerOverQuota(ctx, t, []string{fx.Addr()}, nil, topic, "throttled", quota)
}

// testQuotaAdmin sets producer_byte_rate of clientID through adm and
// checks it is described (once applied() returns: on a cluster, every
// member has it), and that an invalid alteration is refused.
func testQuotaAdmin(ctx context.Context, t *testing.T, adm *kadm.Client, clientID string, quota float64, applied func()) {
	t.Helper()
	entity := kadm.ClientQuotaEntity{{Type: "client-id", Name: &clientID}}
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: entity, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: quota}},
	}})
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("alter client quotas: %v %+v", err, res)
	}
	applied()
	desc, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchName: &clientID, MatchType: 0}})
	if err != nil {
		t.Fatal(err)
	}
	if len(desc) != 1 || len(desc[0].Values) != 1 || desc[0].Values[0].Key != "producer_byte_rate" || desc[0].Values[0].Value != quota {
		t.Fatalf("described %+v, want producer_byte_rate=%v", desc, quota)
	}
	res, err = adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: entity, Ops: []kadm.AlterClientQuotaOp{{Key: "request_percentage_bogus", Value: 1}},
	}})
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, kerr.InvalidRequest) {
		t.Fatalf("alter with an unknown key: %v %+v, want INVALID_REQUEST", err, res)
	}
}

// testProducerOverQuota produces as clientID for a few seconds, as fast as
// kgo goes, and checks the throttling.
func testProducerOverQuota(ctx context.Context, t *testing.T, seeds []string, dial func(ctx context.Context, network, host string) (net.Conn, error), topic, clientID string, quota float64) {
	t.Helper()
	var hook throttleHook
	const batchMax = 64 << 10
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID(clientID), kgo.DefaultProduceTopic(topic),
		kgo.WithHooks(&hook), kgo.ProducerBatchMaxBytes(batchMax), kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()), // the bytes the quota counts are the values'
		kgo.MaxProduceRequestsInflightPerBroker(1),
		kgo.MaxBufferedRecords(16)} // Produce blocks, rather than buffer what would take minutes to send

	if dial != nil {
		opts = append(opts, kgo.Dialer(dial))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	value := bytes.Repeat([]byte("q"), 8<<10)
	var acked atomic.Int64
	start := time.Now()
	runFor := 4 * time.Second
	runCtx, cancel := context.WithTimeout(ctx, runFor)
	defer cancel()
	for runCtx.Err() == nil {
		cl.Produce(runCtx, &kgo.Record{Value: value}, func(r *kgo.Record, err error) {
			if err == nil {
				acked.Add(int64(len(r.Value)))
			}
		})
	}
	flushCtx, cancelFlush := context.WithTimeout(context.WithoutCancel(runCtx), 45*time.Second)
	defer cancelFlush()
	if err := cl.Flush(flushCtx); err != nil { // what was buffered is answered
		t.Fatalf("flush: %v", err)
	}
	elapsed := time.Since(start)
	// Kafka's Rate: once throttled, the bytes of the samples kept (11 s)
	// stay within the quota over their span, so that what was sent up to
	// the end of the last throttle (after the elapsed time, which ends at
	// the last acknowledgement) is within the quota over that time plus
	// one span, and the requests let through before each throttle was
	// known: one in flight, one more batch. Unthrottled, kgo sends
	// hundreds of MB in that time.
	limit := quota*(elapsed.Seconds()+11) + 2*batchMax
	t.Logf("quota %.0f B/s: %d bytes acknowledged in %v (limit %.0f), %d throttles, %d ms throttled", quota, acked.Load(), elapsed.Round(time.Millisecond), limit, hook.n.Load(), hook.ms.Load())
	if hook.n.Load() == 0 {
		t.Fatal("never throttled")
	}
	if float64(acked.Load()) > limit {
		t.Fatalf("%d bytes acknowledged, more than the quota lets through (%.0f)", acked.Load(), limit)
	}
	if acked.Load() == 0 {
		t.Fatal("nothing acknowledged")
	}
}

// TestClientQuotasCluster: on a three-member cluster, kadm's
// AlterClientQuotas through any member is committed by the controller and
// every member describes the quota; a kgo producer over it is throttled
// by the leader of its partition as a standalone broker throttles it
// (quotas are per broker, as in Kafka).
func TestClientQuotasCluster(t *testing.T) {
	const topic, quota = "q", 32 << 10
	c := startCluster(t, 3)
	ctx := testCtx(t, 90*time.Second)
	adm := kadm.NewClient(newClusterKgo(t, c))
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	testQuotaAdmin(ctx, t, adm, "throttled", quota, func() {
		c.waitImage("the quota", func(img *controller.Image) bool { return img.ClientQuotas().Len() == 1 })
	})
	for _, b := range c.members {
		q, _, ok := b.Image().ClientQuotas().Lookup("producer_byte_rate", "ANONYMOUS", "throttled")
		if !ok || q != quota {
			t.Fatalf("member %d: quota %v %v", b.ID(), q, ok)
		}
	}
	testProducerOverQuota(ctx, t, c.seeds(), c.dial, topic, "throttled", quota)
}
