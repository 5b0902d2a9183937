package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/stretchr/testify/require"
)

// groupScenario is one program's group admin code, run unchanged against
// a log.Broker or a Client; it returns the listings it saw.
func groupScenario(t *testing.T, a interface {
	log.GroupAdmin
	log.Admin
	log.Client
}) [][]group.Listing {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, a.CreateTopicContext(ctx, "t", log.TopicConfig{}))
	tp := log.TopicPartition{Topic: "t"}
	require.NoError(t, a.CommitOffsets(ctx, "idle", "", -1, map[log.TopicPartition]int64{tp: 0}))
	cons, err := log.NewConsumer(a, log.ConsumerConfig{Group: "busy", Topics: []string{"t"}, MaxWait: 10 * time.Millisecond})
	require.NoError(t, err)
	defer cons.Close()
	_, err = cons.Poll(ctx) // joins
	require.NoError(t, err)

	var seen [][]group.Listing
	ls, err := a.ListGroups(ctx)
	require.NoError(t, err)
	require.Len(t, ls, 2)
	require.Equal(t, group.Listing{Group: "busy", ProtocolType: "consumer", State: group.StateStable, Type: group.TypeClassic}, ls[0])
	require.Equal(t, group.Listing{Group: "idle", State: group.StateEmpty, Type: group.TypeClassic}, ls[1])
	seen = append(seen, ls)

	require.ErrorIs(t, a.DeleteGroup(ctx, "busy"), group.ErrNonEmptyGroup)
	require.NoError(t, a.DeleteGroup(ctx, "idle"))
	require.ErrorIs(t, a.DeleteGroup(ctx, "idle"), group.ErrGroupNotFound)
	offs, err := a.FetchOffsets(ctx, "idle", []log.TopicPartition{tp})
	require.NoError(t, err)
	require.NotContains(t, offs, tp, "the deleted group's offsets are gone")
	ls, err = a.ListGroups(ctx)
	require.NoError(t, err)
	require.Len(t, ls, 1)
	seen = append(seen, ls)
	return seen
}

// The same group admin code against a log.Broker and against a Client of
// a served one.
func TestClientGroupsSameAsBroker(t *testing.T) {
	leaktest.Check(t)
	_, direct, _ := start(t, Config{})
	want := groupScenario(t, direct)

	s, _, _ := start(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, DialConfig{Seeds: []string{s.Addr()}})
	require.NoError(t, err)
	defer c.Close()
	got := groupScenario(t, c)
	require.Equal(t, want, got)
}
