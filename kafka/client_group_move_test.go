package kafka

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/group/assign"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
)

// moving is a GroupRouter whose coordinator moves: route answers each
// CoordinatorFor call, numbered from 1.
type moving struct {
	*log.Broker
	calls  *atomic.Int32
	route  func(call int32) (*group.Coordinator, int32)
	others []ClusterBroker
}

func (moving) GroupCoordinator() *group.Coordinator { return nil }

func (b moving) CoordinatorFor(context.Context, string) (*group.Coordinator, int32, bool) {
	c, node := b.route(b.calls.Add(1))
	return c, node, true
}

func (moving) Coordinators() []*group.Coordinator { return nil }

func (b moving) ClusterBrokers() []ClusterBroker { return b.others }
func (moving) ControllerID() int32               { return 1 }
func (moving) PartitionState(string, int) (int32, int32, []int32, []int32, bool) {
	return 1, 0, []int32{1}, []int32{1}, true
}

func startMoving(t *testing.T, route func(call int32) (*group.Coordinator, int32), others ...ClusterBroker) (*Server, *log.Broker) {
	t.Helper()
	b := logtest.New(t, logtest.InMemory(), logtest.Topic("t", 2))
	s, err := Listen("127.0.0.1:0", moving{Broker: b, calls: new(atomic.Int32), route: route, others: others}, Config{NodeID: 1})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s, b
}

func newCoordinator(t *testing.T, b *log.Broker) *group.Coordinator {
	t.Helper()
	gc, err := group.New(group.Config{Partitions: func(t string) (int, error) { return b.Partitions(context.Background(), t) }})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, gc.Close()) })
	return gc
}

// A coordinator the Client cannot dial (its broker stopped) is looked up
// again, not dialed until the attempts run out.
func TestClientRefindsUndialableCoordinator(t *testing.T) {
	leaktest.Check(t)
	dead := deadAddr(t) // nothing listens there, nor can
	var gc *group.Coordinator
	s, b := startMoving(t, func(call int32) (*group.Coordinator, int32) {
		if call == 1 {
			return nil, 7 // the first FindCoordinator names the stopped broker
		}
		return gc, 1
	}, ClusterBroker{ID: 7, Host: dead.IP.String(), Port: int32(dead.Port)})
	gc = newCoordinator(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kc, err := Dial(ctx, DialConfig{Seeds: []string{s.Addr()}})
	require.NoError(t, err)
	defer kc.Close()
	tp := log.TopicPartition{Topic: "t", Partition: 1}
	require.NoError(t, kc.CommitOffsets(ctx, "g", "", -1, map[log.TopicPartition]int64{tp: 3}))
	require.Equal(t, map[log.TopicPartition]int64{tp: 3}, gc.Committed("g", nil))
}

// A member id the coordinator gave (MEMBER_ID_REQUIRED) that the next
// coordinator does not know (UNKNOWN_MEMBER_ID: the group moved between the
// two joins) makes the Client join anew, as Kafka's consumers do, when its
// caller joined without one.
func TestClientJoinsAnewWhenGivenIDIsGone(t *testing.T) {
	leaktest.Check(t)
	var first, second *group.Coordinator
	s, b := startMoving(t, func(call int32) (*group.Coordinator, int32) {
		if call <= 2 { // FindCoordinator, the first JoinGroup
			return first, 1
		}
		return second, 1
	})
	first, second = newCoordinator(t, b), newCoordinator(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kc, err := Dial(ctx, DialConfig{Seeds: []string{s.Addr()}})
	require.NoError(t, err)
	defer kc.Close()
	resp, err := kc.JoinGroup(ctx, group.JoinRequest{
		Group: "g", ProtocolType: assign.ProtocolType, SessionTimeout: 10 * time.Second,
		Protocols: []group.Protocol{{Name: assign.RangeProtocol, Metadata: assign.EncodeSubscription([]string{"t"})}},
	})
	require.NoError(t, err)
	d, ok := second.Describe("g")
	require.True(t, ok)
	require.Len(t, d.Members, 1)
	require.Equal(t, resp.MemberID, d.Members[0].ID, "joined the second coordinator as a new member")
	require.Equal(t, resp.MemberID, resp.Leader)
}
