package kafka

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// deadlineBackend records the deadlines the topic admin verbs were given.
type deadlineBackend struct {
	*log.Broker
	mu        sync.Mutex
	deadlines []time.Duration // left at the call; -1: none
}

func (b *deadlineBackend) note(ctx context.Context) {
	left := time.Duration(-1)
	if d, ok := ctx.Deadline(); ok {
		left = time.Until(d)
	}
	b.mu.Lock()
	b.deadlines = append(b.deadlines, left)
	b.mu.Unlock()
}

func (b *deadlineBackend) CreateTopicContext(ctx context.Context, name string, cfg log.TopicConfig) error {
	b.note(ctx)
	return b.Broker.CreateTopicContext(ctx, name, cfg)
}

func (b *deadlineBackend) DeleteTopicContext(ctx context.Context, name string) error {
	b.note(ctx)
	return b.Broker.DeleteTopicContext(ctx, name)
}

// CreateTopics and DeleteTopics hand the backend the request's timeout as
// the context's deadline: a cluster member's admin waits no longer than
// the client asked.
func TestTopicAdminTakesRequestTimeout(t *testing.T) {
	be := &deadlineBackend{Broker: logtest.New(t, logtest.InMemory())}
	s, err := Listen("127.0.0.1:0", be, Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	c := dial(t, s.Addr())

	cr := c.do(createReq(4, false, newTopic("t", 1, 1))).(*kmsg.CreateTopicsResponse)
	require.Equal(t, errNone, cr.Topics[0].ErrorCode)
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.SetVersion(4)
	del.TimeoutMillis = 5000
	del.TopicNames = []string{"t"}
	dr := c.do(del).(*kmsg.DeleteTopicsResponse)
	require.Equal(t, errNone, dr.Topics[0].ErrorCode)
	require.Empty(t, be.Topics())

	be.mu.Lock()
	defer be.mu.Unlock()
	require.Len(t, be.deadlines, 2)
	for i, left := range be.deadlines {
		require.True(t, left > 0 && left <= 5*time.Second, "call %d: %v left, want the request's 5 s", i, left)
	}
}

// *log.Broker's context forms refuse a done context and change nothing.
func TestBrokerAdminContextDone(t *testing.T) {
	b := logtest.New(t, logtest.InMemory(), logtest.Topic("keep", 1))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, b.CreateTopicContext(ctx, "new", log.TopicConfig{}), context.Canceled)
	require.ErrorIs(t, b.DeleteTopicContext(ctx, "keep"), context.Canceled)
	require.Equal(t, []string{"keep"}, b.Topics())
}
