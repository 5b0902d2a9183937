package kafka

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/stretchr/testify/require"
)

// Strata's own Producer and Consumer over the wire: Client → Server →
// Broker.
func TestClientProducerConsumer(t *testing.T) {
	leaktest.Check(t)
	s, b, _ := start(t, Config{}, logtest.Topic("orders", 3))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, DialConfig{Seeds: []string{s.Addr()}})
	require.NoError(t, err)
	defer c.Close()

	n, err := c.Partitions(context.Background(), "orders")
	require.NoError(t, err)
	require.Equal(t, 3, n)
	_, err = c.Partitions(context.Background(), "nope")
	require.ErrorIs(t, err, log.ErrUnknownTopic)

	p, err := log.NewProducer(c, log.ProducerConfig{Linger: time.Millisecond})
	require.NoError(t, err)
	const total = 300
	for i := range total {
		p.SendAsync(log.Record{Topic: "orders", Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint("v", i)),
			Headers: []log.Header{{Key: "h", Value: []byte("x")}}}, func(_ log.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	require.NoError(t, p.Flush(ctx))
	require.NoError(t, p.Close())
	sum := int64(0)
	for i := range 3 {
		part, _ := b.Partition("orders", i)
		sum += part.EndOffset()
	}
	require.Equal(t, int64(total), sum)

	cons, err := log.NewConsumer(c, log.ConsumerConfig{Topics: []string{"orders"}, Reset: log.ResetEarliest, MaxWait: 50 * time.Millisecond})
	require.NoError(t, err)
	defer cons.Close()
	seen := map[string]bool{}
	for len(seen) < total {
		recs, err := cons.Poll(ctx)
		require.NoError(t, err)
		for _, r := range recs {
			require.Equal(t, "x", string(r.Headers[0].Value))
			seen[string(r.Value)] = true
		}
	}

	end, err := c.ListOffset(context.Background(), log.TopicPartition{Topic: "orders", Partition: 0}, log.LatestOffset)
	require.NoError(t, err)
	part, _ := b.Partition("orders", 0)
	require.Equal(t, part.EndOffset(), end)
	_, err = c.ListOffset(context.Background(), log.TopicPartition{Topic: "orders", Partition: 9}, log.LatestOffset)
	require.ErrorIs(t, err, log.ErrUnknownPartition)

	// Errors come back as Strata's.
	_, err = c.Produce(ctx, log.TopicPartition{Topic: "nope"}, records("x"), log.AcksAll)
	require.ErrorIs(t, err, log.ErrUnknownTopic)
	bad := records("x")
	bad[len(bad)-1] ^= 1
	_, err = c.Produce(ctx, log.TopicPartition{Topic: "orders"}, bad, log.AcksAll)
	require.ErrorIs(t, err, log.ErrCorrupt)
	resp, err := c.Fetch(ctx, log.FetchRequest{Partitions: []log.FetchPartition{{TopicPartition: log.TopicPartition{Topic: "orders"}, Offset: 1 << 40}}, MaxWait: time.Millisecond})
	require.NoError(t, err)
	var oor *log.OffsetOutOfRangeError
	require.ErrorAs(t, resp.Partitions[0].Err, &oor)
	require.Equal(t, end, oor.End)

	require.ErrorIs(t, c.Heartbeat(ctx, "g", "m", 1), log.ErrUnknownMember)
}

func TestClientSASLAndTLS(t *testing.T) {
	leaktest.Check(t)
	srvTLS, cliTLS := selfSigned(t)
	s, _, _ := start(t, Config{TLS: srvTLS, SASL: saslConfig(t)}, logtest.Topic("t", 1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, mech := range []string{mechPlain, mechSCRAM256, mechSCRAM512} {
		c, err := Dial(ctx, DialConfig{Seeds: []string{s.Addr()}, TLS: cliTLS, SASL: &DialSASL{Mechanism: mech, User: "alice", Password: "s3cret"}})
		require.NoError(t, err, mech)
		base, err := c.Produce(ctx, log.TopicPartition{Topic: "t"}, records("a"), log.AcksLeader)
		require.NoError(t, err)
		require.GreaterOrEqual(t, base, int64(0))
		require.NoError(t, c.Close())
	}
	_, err := Dial(ctx, DialConfig{Seeds: []string{s.Addr()}, TLS: cliTLS, SASL: &DialSASL{Mechanism: mechSCRAM256, User: "alice", Password: "wrong"}})
	var ke *Error
	require.True(t, errors.As(err, &ke), "%v", err)
	require.Equal(t, errSaslAuthenticationFailed, ke.Code)
}

// A broker that goes away: requests fail, and a new one on the same
// address is found again.
func TestClientReconnects(t *testing.T) {
	leaktest.Check(t)
	b := logtest.New(t, logtest.InMemory(), logtest.Topic("t", 1))
	s, err := Listen("127.0.0.1:0", b, Config{})
	require.NoError(t, err)
	addr := s.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, DialConfig{Seeds: []string{addr}})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Produce(ctx, log.TopicPartition{Topic: "t"}, records("1"), log.AcksAll)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	// The client either sees the connection close under the produce, or
	// first, and then retries the dead broker until the context ends:
	// that of this produce, not the test's.
	down, downCancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = c.Produce(down, log.TopicPartition{Topic: "t"}, records("2"), log.AcksAll)
	downCancel()
	require.Error(t, err)
	s2, err := Listen(addr, b, Config{})
	require.NoError(t, err)
	defer s2.Close()
	base, err := c.Produce(ctx, log.TopicPartition{Topic: "t"}, records("3"), log.AcksAll)
	require.NoError(t, err)
	require.Equal(t, int64(1), base)
}
