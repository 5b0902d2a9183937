package interop

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/kafka/kafkatest"
)

// killableDialer dials for one kgo client and can cut it off for good:
// its connections closed, every later dial refused — a process killed.
type killableDialer struct {
	mu     sync.Mutex
	dead   bool
	conns  []net.Conn
	dialer net.Dialer
}

func (d *killableDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		return nil, net.ErrClosed
	}
	c, err := d.dialer.DialContext(ctx, network, host)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *killableDialer) kill() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dead = true
	for _, c := range d.conns {
		c.Close()
	}
}

// TestKgoShareGroup: kgo.ShareGroup consumers share one topic as a queue
// on a Strata server. share.auto.offset.reset=earliest is set as a group
// config over the wire. One worker is killed holding a batch it never
// acknowledged; its records go to the others, delivered a second time,
// and in the end every record was accepted by exactly one live worker.
// Four members on two partitions share each partition, so the dead
// member, which stays assigned until its session times out (45 s, as in
// Kafka), orphans none.
func TestKgoShareGroup(t *testing.T) {
	const topic, group, parts, n = "jobs", "workers", 2, 600
	start := time.Now()
	c := kafkatest.New(t, kafkatest.Topic(topic, parts))
	ctx := testCtx(t, 90*time.Second)
	want := makeRecs("job", n)
	kgoProduce(ctx, t, c.Addr(), topic, want)

	admin, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	cfgReq := kmsg.NewPtrIncrementalAlterConfigsRequest()
	cfgReq.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeGroupConfig, ResourceName: group,
		Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "share.auto.offset.reset", Op: kmsg.IncrementalAlterConfigOpSet, Value: kmsg.StringPtr("earliest")}}}}
	cfgResp, err := cfgReq.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(cfgResp.Resources[0].ErrorCode); err != nil {
		t.Fatal(err)
	}

	// The victim polls one batch and dies with it.
	d := &killableDialer{}
	victim, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.ConsumeTopics(topic), kgo.ShareGroup(group),
		kgo.ShareMaxRecords(50), kgo.Dialer(d.dial), kgo.RetryTimeout(time.Second), kgo.RequestRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	var held []*kgo.Record
	for len(held) == 0 {
		fs := victim.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("the victim got nothing")
		}
		held = fs.Records()
	}
	d.kill()
	t.Logf("victim killed holding %d at %v", len(held), time.Since(start))
	t.Cleanup(func() { victim.Close(); t.Logf("victim closed at %v", time.Since(start)) })
	heldKeys := map[string]bool{}
	for _, r := range held {
		heldKeys[string(r.Key)+"/"+string(r.Value)] = true
	}

	var mu sync.Mutex
	accepted := map[string]int{}
	redelivered := 0
	var wg sync.WaitGroup
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	for range 3 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.ConsumeTopics(topic), kgo.ShareGroup(group), kgo.ShareMaxRecords(40))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			for wctx.Err() == nil {
				fs := cl.PollFetches(wctx)
				for _, r := range fs.Records() {
					k := string(r.Key) + "/" + string(r.Value)
					r.Ack(kgo.AckAccept)
					mu.Lock()
					accepted[k]++
					if heldKeys[k] && r.DeliveryCount() >= 2 {
						redelivered++
					}
					done := len(accepted) == n
					mu.Unlock()
					if done {
						stop()
					}
				}
				if err := cl.FlushAcks(ctx); err != nil && ctx.Err() == nil {
					t.Errorf("flush acks: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("workers done at %v", time.Since(start))
	if ctx.Err() != nil {
		t.Fatalf("timed out: %d of %d records accepted", len(accepted), n)
	}
	for k, c := range accepted {
		if c != 1 {
			t.Errorf("%s accepted %d times", k, c)
		}
	}
	if redelivered != len(held) {
		t.Errorf("%d of the %d records the killed worker held came again with delivery count 2", redelivered, len(held))
	}
	// Every share-partition has moved past every record.
	offs := c.Broker().ShareCoordinator().Offsets(group)
	total := int64(0)
	for _, st := range offs {
		total += st.StartOffset
	}
	if total != n {
		t.Errorf("share-partition start offsets sum to %d, want %d: %+v", total, n, offs)
	}
}
