package kafka

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/order"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
)

// orderedBackend appends, says the batch has its place, then holds the
// produce until released (an acks=all produce waiting for the ISR).
type orderedBackend struct {
	*log.Broker
	entered chan int64 // the base offset of each produce appended
	release chan struct{}
}

func (b *orderedBackend) Produce(ctx context.Context, tp log.TopicPartition, batch []byte, acks log.Acks) (int64, error) {
	base, err := b.Broker.Produce(ctx, tp, batch, log.AcksLeader)
	b.entered <- base // before the next produce may append and say so
	order.Placed(ctx)
	<-b.release
	return base, err
}

// TestPipelinedProducesAppendBeforeAnswered: produces pipelined on one
// connection to one partition each append as soon as the one before it
// has its place (order.Placed), not once it is answered, and are still
// answered in order.
func TestPipelinedProducesAppendBeforeAnswered(t *testing.T) {
	lb := logtest.New(t, logtest.InMemory(), logtest.Topic("t", 1))
	ob := &orderedBackend{Broker: lb, entered: make(chan int64, 3), release: make(chan struct{})}
	s, err := Listen("127.0.0.1:0", ob, Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	release := sync.OnceFunc(func() { close(ob.release) })
	t.Cleanup(release) // before Close, which waits for the held produces, if the test fails first
	c := dial(t, s.Addr())
	var corrs []int32
	var reqs []kmsg.Request
	for _, v := range []string{"a", "b", "c"} {
		r := produceReq(9, -1, "t", 0, records(v))
		corrs, reqs = append(corrs, c.send(r)), append(reqs, r)
	}
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for want := range int64(3) {
		select {
		case base := <-ob.entered:
			require.Equal(t, want, base, "appended in the order sent")
		case <-timeout.C:
			t.Fatalf("produce %d did not append while the ones before it waited", want)
		}
	}
	release()
	for k := range corrs {
		resp := c.recv(reqs[k], corrs[k]).(*kmsg.ProduceResponse)
		require.Equal(t, int64(k), resp.Topics[0].Partitions[0].BaseOffset)
	}
	require.Empty(t, s.connLanes(), "lanes are forgotten once done")
}
