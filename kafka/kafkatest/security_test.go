package kafkatest_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/kafka/kafkatest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/segment/batch"
	"github.com/stretchr/testify/require"
)

// TestSecurityOptions: with SASL users, a super user and ACLs enforced, a
// user without ACLs is refused and changes nothing, the super user is
// allowed, and an ACL lets the user in.
func TestSecurityOptions(t *testing.T) {
	leaktest.Check(t)
	ctx := context.Background()
	fx := kafkatest.New(t,
		kafkatest.SASLUser("PLAIN", "admin", "admin-secret"),
		kafkatest.SASLUser("SCRAM-SHA-256", "alice", "alice-secret"),
		kafkatest.SASLUser("SCRAM-SHA-512", "bob", "bob-secret"),
		kafkatest.SuperUser("admin"),
		kafkatest.EnableACLs(),
		kafkatest.Topic("orders", 1),
		kafkatest.ACL(acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: "orders", PatternType: acl.PatternLiteral,
			Principal: acl.User("bob"), Host: "*", Operation: acl.OpWrite, Permission: acl.PermissionAllow}))
	dial := func(mech, user, pass string) *kafka.Client {
		t.Helper()
		c, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{fx.Addr()}, SASL: &kafka.DialSASL{Mechanism: mech, User: user, Password: pass}})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	tp := log.TopicPartition{Topic: "orders"}
	batch := func() []byte {
		var bd batch.Builder
		bd.Reset(time.Now().UnixMilli())
		bd.Append(time.Now().UnixMilli(), nil, []byte("v"), nil)
		return slices.Clone(bd.Bytes())
	}
	end := func() int64 {
		p, err := fx.Broker().Partition("orders", 0)
		require.NoError(t, err)
		return p.EndOffset()
	}

	alice := dial("SCRAM-SHA-256", "alice", "alice-secret")
	_, err := alice.Produce(ctx, tp, batch(), log.AcksAll)
	// kafka.Client says the topic is refused (TOPIC_AUTHORIZATION_FAILED,
	// as Kafka's clients do), not that it does not exist.
	require.Error(t, err, "alice has no ACL")
	var kerr *kafka.Error
	require.ErrorAs(t, err, &kerr)
	require.Equal(t, int16(29), kerr.Code, "%v", err)
	require.NotErrorIs(t, err, log.ErrUnknownTopic)
	_, err = alice.Partitions(ctx, "orders")
	require.ErrorAs(t, err, &kerr)
	require.Equal(t, int16(29), kerr.Code, "%v", err)
	require.Zero(t, end())
	_, err = dial("PLAIN", "admin", "admin-secret").Partitions(ctx, "nope")
	require.ErrorIs(t, err, log.ErrUnknownTopic, "a topic that does not exist")

	admin := dial("PLAIN", "admin", "admin-secret")
	_, err = admin.Produce(ctx, tp, batch(), log.AcksAll)
	require.NoError(t, err)
	require.Equal(t, int64(1), end())

	bob := dial("SCRAM-SHA-512", "bob", "bob-secret")
	_, err = bob.Produce(ctx, tp, batch(), log.AcksAll)
	require.NoError(t, err)
	require.Equal(t, int64(2), end())

	// A wrong password does not log in.
	_, err = kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{fx.Addr()}, SASL: &kafka.DialSASL{Mechanism: "PLAIN", User: "admin", Password: "nope"}})
	require.Error(t, err)
}
