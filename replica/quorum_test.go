package replica_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
)

// quorumOf returns the voters and observers DescribeQuorum gives, sorted.
func quorumOf(t *testing.T, ctx context.Context, b *replica.Broker) (voters, observers []int) {
	t.Helper()
	q, err := b.DescribeQuorum(ctx)
	require.NoError(t, err)
	for _, v := range q.Voters {
		voters = append(voters, v.ID)
	}
	for _, o := range q.Observers {
		observers = append(observers, o.ID)
	}
	slices.Sort(voters)
	slices.Sort(observers)
	return voters, observers
}

// retryChange runs a voter change until it succeeds, again while the
// controller loses its leadership (outcome unknown); after such a loss,
// done is the error of a change that had committed.
func retryChange(t *testing.T, what string, done error, f func() error) {
	t.Helper()
	for i := 1; ; i++ {
		err := f()
		if err == nil || i > 1 && errors.Is(err, done) {
			return
		}
		if i == 5 || !errors.Is(err, controller.ErrLeadershipLost) {
			require.NoError(t, err, what)
		}
	}
}

// A voter's machine is replaced while an acks=all producer runs: a new
// member starts as a broker only, is promoted to voter (KIP-853's
// AddRaftVoter), the old voter is demoted to an observer (RemoveRaftVoter)
// and stopped. The producer sees no error, every record it was
// acknowledged is there, and the new quorum commits metadata.
func TestReplaceVoterWhileProducing(t *testing.T) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, "local")
	c.createTopic("t", log.TopicConfig{Partitions: 2, ReplicationFactor: 3, MinInSyncReplicas: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var (
		wg    sync.WaitGroup
		stop  = make(chan struct{})
		acked []string
		perr  error
	)
	prod, err := log.NewProducer(c.member(2), log.ProducerConfig{Acks: log.AcksAll, Idempotent: true, Timeout: 20 * time.Second})
	require.NoError(t, err)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := fmt.Sprintf("v%d", i)
			if _, err := prod.Send(ctx, log.Record{Topic: "t", Value: []byte(v)}); err != nil {
				perr = err
				return
			}
			acked = append(acked, v)
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()

	b4 := c.addBroker()
	c.waitLive(4)
	voters, observers := quorumOf(t, ctx, b4)
	require.Equal(t, []int{1, 2, 3}, voters)
	require.Equal(t, []int{4}, observers)
	retryChange(t, "add voter 4", controller.ErrDuplicateVoter, func() error { return c.member(3).AddRaftVoter(ctx, 4) })
	voters, observers = quorumOf(t, ctx, c.member(1))
	require.Equal(t, []int{1, 2, 3, 4}, voters)
	require.Empty(t, observers)
	retryChange(t, "remove voter 1", controller.ErrVoterNotFound, func() error { return b4.RemoveRaftVoter(ctx, 1) })
	voters, observers = quorumOf(t, ctx, c.member(2))
	require.Equal(t, []int{2, 3, 4}, voters)
	require.Equal(t, []int{1}, observers, "a removed voter follows the metadata as an observer until it stops")
	c.stop(1)

	// The new quorum commits; the producer kept going throughout.
	c.createTopic("after", log.TopicConfig{Partitions: 1, ReplicationFactor: 3, MinInSyncReplicas: 2})
	close(stop)
	wg.Wait()
	require.NoError(t, perr)
	require.NoError(t, prod.Close())
	require.NotEmpty(t, acked)
	for p := range 2 {
		c.waitInSync("t", p)
		c.checkIdentical("t", p)
	}
	got := consumeAll(t, c.member(4), "t", len(acked))
	slices.Sort(got)
	slices.Sort(acked)
	require.Equal(t, acked, got)
	t.Logf("%d records acknowledged and consumed across the voter change", len(acked))
}
