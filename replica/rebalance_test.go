package replica_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
)

// startMemberWith starts member id of c with its usual config changed by
// tweak (nil: unchanged).
func (c *memberCluster) startMemberWith(id int, tweak func(*replica.Config)) *replica.Broker {
	c.t.Helper()
	cfg := c.config(id)
	if tweak != nil {
		tweak(&cfg)
	}
	b, err := replica.Start(cfg)
	require.NoError(c.t, err)
	c.members[id-1] = b
	return b
}

// A member stopped and restarted gets back the leadership of the partitions
// it is the preferred (first) replica of, once it is in their ISR again and
// the controller's imbalance check has run.
func TestPreferredLeaderReturnsAfterRestart(t *testing.T) {
	leaktest.Check(t)
	const interval = 300 * time.Millisecond
	tweak := func(cfg *replica.Config) { cfg.LeaderImbalanceCheckInterval = interval }
	c := startClusterOver(t, 3, "local")
	// Restart every member with the short interval (each is the active
	// controller in turn or not; any of them may be).
	for id := 1; id <= 3; id++ {
		c.stop(id)
		c.startMemberWith(id, tweak)
	}
	c.waitLive(3)
	c.createTopic("t", log.TopicConfig{Partitions: 3, ReplicationFactor: 3, MinInSyncReplicas: 2})
	img := c.any().Image()
	tinfo, _ := img.Topic("t")
	p0 := tinfo.Partitions[0]
	back := p0.Replicas[0]
	require.Equal(t, back, p0.Leader)

	produce(t, c.member(back), "t", 0, 20)
	c.stop(back)
	other := c.any(back)
	c.waitLeaderNot(other, "t", 0, back)
	produce(t, other, "t", 20, 20)

	c.startMemberWith(back, tweak)
	img = c.waitImage(other, fmt.Sprintf("member %d leading partition 0 again", back), func(img *controller.Image) bool {
		st, ok := img.Partition("t", 0)
		return ok && st.Leader == back
	})
	st, _ := img.Partition("t", 0)
	require.Greater(t, st.LeaderEpoch, p0.LeaderEpoch+1, "two leader changes: away and back")
	require.Contains(t, st.ISR, back)

	// It leads: acks=all produces go through it, and the replicas agree.
	produce(t, other, "t", 40, 20)
	for p := range 3 {
		c.waitInSync("t", p)
		c.checkIdentical("t", p)
	}
	require.ElementsMatch(t, values(60), consumeAll(t, c.member(back), "t", 60))
}
