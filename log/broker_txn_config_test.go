package log

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/clock/clocktest"
	"github.com/strata-log/strata/tp"
	"github.com/strata-log/strata/txn"
	"github.com/strata-log/strata/vfs"
)

// TestBrokerTxnConfig: the transaction coordinator's settings
// (transaction.max.timeout.ms, transactional.id.expiration.ms,
// transaction.abort.timed.out.transaction.cleanup.interval.ms) take
// Kafka's defaults, bound the producers' timeouts, expire idle ids and
// abort timed-out transactions on the check's ticks; bad values fail Open.
func TestBrokerTxnConfig(t *testing.T) {
	b, err := Open("/d", Config{FS: vfs.NewMem()})
	require.NoError(t, err)
	require.Equal(t, TxnConfig{MaxTimeout: 15 * time.Minute, IDExpiration: 7 * 24 * time.Hour,
		AbortTimedOutInterval: 10 * time.Second, RemoveExpiredInterval: time.Hour, Version: txn.TV2}, b.TxnConfig())
	require.NoError(t, b.Close())
	for v, want := range map[int16]int16{-1: 0, 1: 1, 2: 2} {
		b, err := Open("/d", Config{FS: vfs.NewMem(), TransactionVersion: v})
		require.NoError(t, err)
		require.Equal(t, want, b.TxnConfig().Version, "TransactionVersion %d", v)
		require.NoError(t, b.Close())
	}

	for _, bad := range []Config{
		{TransactionMaxTimeout: -time.Second},
		{TransactionalIDExpiration: -time.Second},
		{TransactionAbortTimedOutInterval: -time.Second},
		{TransactionMaxTimeout: 1 << 31 * time.Millisecond},
		{TransactionVersion: 3},
	} {
		bad.FS = vfs.NewMem()
		_, err := Open("/d", bad)
		require.ErrorIs(t, err, ErrInvalidConfig, "%+v", bad)
	}

	start := time.UnixMilli(1_800_000_000_000) // a multiple of a minute
	clk := clocktest.New(start)
	b, err = Open("/d", Config{FS: vfs.NewMem(), Clock: clk, TransactionMaxTimeout: time.Minute,
		TransactionalIDExpiration: 30 * time.Minute, TransactionAbortTimedOutInterval: time.Minute})
	require.NoError(t, err)
	defer b.Close()
	require.Equal(t, TxnConfig{MaxTimeout: time.Minute, IDExpiration: 30 * time.Minute, AbortTimedOutInterval: time.Minute,
		RemoveExpiredInterval: 30 * time.Minute, Version: txn.TV2, MaxTimeoutSet: true, IDExpirationSet: true, AbortTimedOutSet: true}, b.TxnConfig())
	ctx := context.Background()
	_, err = b.InitTxnProducerID(ctx, "long", 2*time.Minute, ProducerID{ID: -1, Epoch: -1})
	require.ErrorIs(t, err, txn.ErrInvalidTransactionTimeout, "past transaction.max.timeout.ms")

	_, err = b.CreateTopic("t", TopicConfig{})
	require.NoError(t, err)
	c := txnCoordinator(t, b)
	clk.Advance(5 * time.Second)
	pid, err := b.InitTxnProducerID(ctx, "open", 10*time.Second, ProducerID{ID: -1, Epoch: -1})
	require.NoError(t, err)
	require.NoError(t, b.AddPartitionsToTxn(ctx, "open", pid, []tp.TopicPartition{{Topic: "t", Partition: 0}}))
	clk.Advance(40 * time.Second) // 45 s: past the timeout (15 s), before the check's tick (60 s)
	m, _ := c.Describe("open")
	require.Equal(t, txn.Ongoing, m.State)
	clk.Advance(15 * time.Second) // 60 s
	<-c.Idle("open")
	m, _ = c.Describe("open")
	require.Equal(t, txn.CompleteAbort, m.State, "aborted at the tick")

	_, err = b.InitTxnProducerID(ctx, "idle", 10*time.Second, ProducerID{ID: -1, Epoch: -1})
	require.NoError(t, err)
	clk.Advance(29 * time.Minute) // the first expiration check, at 30 min: "idle" changed 29 min ago
	_, ok := c.Describe("idle")
	require.True(t, ok, "not idle for transactional.id.expiration.ms yet")
	clk.Advance(30 * time.Minute) // the second check
	_, ok = c.Describe("idle")
	require.False(t, ok, "expired after transactional.id.expiration.ms")
	_, ok = c.Describe("open")
	require.False(t, ok, "expired too (its transaction ended 59 min ago)")
}
