package replica_test

import (
	"context"
	"crypto/pbkdf2"
	"crypto/sha256"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
)

// securedCluster is a 3-member cluster whose client listeners take SCRAM
// users (admin and alice from the bootstrap users) and check ACLs, admin
// a super user.
// start (re)starts a member with them.
func securedCluster(t *testing.T) (c *memberCluster, start func(id int)) {
	users := scramUsers(t, map[string]string{"admin": "admin-secret", "alice": "alice-secret"})
	tweak := func(cfg *replica.Config) {
		cfg.Listeners = []replica.Listener{{Name: "CLIENT", Addr: "127.0.0.1:0", SASL: users}}
		cfg.Authorizer = &acl.Config{SuperUsers: []string{"User:admin"}}
	}
	c = startClusterWith(t, 3, "local", tweak)
	return c, func(id int) { c.startMemberWith(id, tweak) }
}

// dialMember connects to member b's client listener as user, and only to
// it: every connection the client opens goes there, so whatever it asks,
// b answers.
func dialMember(t *testing.T, ctx context.Context, b *replica.Broker, user, password string) *kafka.Client {
	t.Helper()
	addr, ok := b.ListenerAddr("CLIENT")
	require.True(t, ok)
	var d net.Dialer
	kc, err := kafka.Dial(ctx, kafka.DialConfig{
		Seeds: []string{addr},
		SASL:  &kafka.DialSASL{Mechanism: "SCRAM-SHA-256", User: user, Password: password},
		Dial:  func(ctx context.Context, _ string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) },
	})
	require.NoError(t, err)
	t.Cleanup(func() { kc.Close() })
	return kc
}

// topicCodes is what Metadata for topics answers kc: topic → error code.
func topicCodes(t *testing.T, ctx context.Context, kc *kafka.Client, topics ...string) map[string]int16 {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := kc.Request(ctx, req, 12)
	require.NoError(t, err)
	out := map[string]int16{}
	for _, rt := range resp.(*kmsg.MetadataResponse).Topics {
		out[*rt.Topic] = rt.ErrorCode
	}
	return out
}

func aliceOn(topic string, op acl.Operation) acl.Binding {
	return acl.Binding{
		ResourceType: acl.ResourceTopic, ResourceName: topic, PatternType: acl.PatternLiteral,
		Principal: "User:alice", Host: "*", Operation: op, Permission: acl.PermissionAllow,
	}
}

// waitACLs waits until member b has applied n ACL bindings.
func (c *memberCluster) waitACLs(b *replica.Broker, n int) {
	c.t.Helper()
	c.waitImage(b, "ACLs applied", func(img *controller.Image) bool { return img.ACLs().Len() == n })
}

// notController returns a running member that is not the active
// controller, so that changes sent to it are forwarded.
func (c *memberCluster) notController() *replica.Broker {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, b := range c.members {
		if b == nil {
			continue
		}
		// A loaded machine can be between two controllers: wait for one.
		id, err := replica.WaitController(ctx, b)
		if err != nil {
			c.t.Fatalf("member %d knows no controller: %v", b.ID(), err)
		}
		if id != b.ID() {
			return b
		}
	}
	c.t.Fatal("no member but the controller")
	return nil
}

// ACLs created through one member's client listener (forwarded to the
// active controller) are enforced by every member; they survive the stop
// of the active controller and a member's restart, and a deletion through
// another member reaches them all, the restarted one included.
func TestACLsEnforcedByEveryMember(t *testing.T) {
	leaktest.Check(t)
	c, start := securedCluster(t)
	c.createTopic("orders", log.TopicConfig{Partitions: 1, ReplicationFactor: 3})
	c.createTopic("secret", log.TopicConfig{Partitions: 1, ReplicationFactor: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Authorization on, no ACLs: alice sees nothing.
	for _, b := range c.members {
		codes := topicCodes(t, ctx, dialMember(t, ctx, b, "alice", "alice-secret"), "orders", "secret")
		require.Equal(t, map[string]int16{"orders": 29, "secret": 29}, codes, "member %d", b.ID())
	}

	via := c.notController()
	admin := dialMember(t, ctx, via, "admin", "admin-secret")
	errs, err := admin.CreateACLs(ctx, []acl.Binding{aliceOn("orders", acl.OpRead), aliceOn("orders", acl.OpWrite)})
	require.NoError(t, err)
	require.Equal(t, []error{nil, nil}, errs)
	// The member asked answers once it has applied them: it describes them at once.
	got, err := admin.DescribeACLs(ctx, acl.AnyFilter)
	require.NoError(t, err)
	require.ElementsMatch(t, []acl.Binding{aliceOn("orders", acl.OpRead), aliceOn("orders", acl.OpWrite)}, got)

	// An ordinary user may not change ACLs, on any member.
	aliceVia := dialMember(t, ctx, via, "alice", "alice-secret")
	errs, err = aliceVia.CreateACLs(ctx, []acl.Binding{aliceOn("secret", acl.OpRead)})
	require.NoError(t, err)
	var ke *kafka.Error
	require.ErrorAs(t, errs[0], &ke)
	require.EqualValues(t, 31, ke.Code, "CLUSTER_AUTHORIZATION_FAILED")

	check := func(want map[string]int16) {
		t.Helper()
		for _, b := range c.members {
			if b == nil {
				continue
			}
			c.waitACLs(b, len(c.any().Image().ACLs().Bindings()))
			codes := topicCodes(t, ctx, dialMember(t, ctx, b, "alice", "alice-secret"), "orders", "secret")
			require.Equal(t, want, codes, "member %d", b.ID())
			described, err := dialMember(t, ctx, b, "admin", "admin-secret").DescribeACLs(ctx, acl.AnyFilter)
			require.NoError(t, err)
			require.ElementsMatch(t, c.any().Image().ACLs().Bindings(), described, "member %d describes its image", b.ID())
		}
	}
	check(map[string]int16{"orders": 0, "secret": 29})

	// The active controller stops; the others go on enforcing the same ACLs.
	ctl, ok := c.any().Controller()
	require.True(t, ok)
	c.stop(ctl)
	check(map[string]int16{"orders": 0, "secret": 29})
	// A deletion through a survivor commits under the next controller.
	other := dialMember(t, ctx, c.any(), "admin", "admin-secret")
	deleted, err := other.DeleteACLs(ctx, []acl.Filter{acl.AnyFilter})
	require.NoError(t, err)
	require.Len(t, deleted[0], 2)
	check(map[string]int16{"orders": 29, "secret": 29})

	// The stopped member comes back with the deletion applied; new ACLs
	// reach it and the member restarted after them.
	start(ctl)
	c.waitLive(3)
	check(map[string]int16{"orders": 29, "secret": 29})
	_, err = other.CreateACLs(ctx, []acl.Binding{aliceOn("secret", acl.OpDescribe)})
	require.NoError(t, err)
	restarted := c.any(ctl).ID()
	c.stop(restarted)
	start(restarted)
	c.waitLive(3)
	check(map[string]int16{"orders": 29, "secret": 0})
}

// SCRAM users added at runtime through one member log in on every member,
// and client quotas altered through one are described by every member.
func TestSCRAMUsersAndQuotasOnEveryMember(t *testing.T) {
	leaktest.Check(t)
	c, _ := securedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := dialMember(t, ctx, c.notController(), "admin", "admin-secret")

	salt := []byte("carol-salt")
	salted, err := pbkdf2.Key(sha256.New, "carol-secret", salt, 4096, sha256.Size)
	require.NoError(t, err)
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = "carol", 1, 4096, salt, salted
	req.Upsertions = append(req.Upsertions, up)
	del := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	del.Name, del.Mechanism = "dave", 1
	req.Deletions = append(req.Deletions, del)
	resp, err := admin.Request(ctx, req, 0)
	require.NoError(t, err)
	results := map[string]int16{}
	for _, r := range resp.(*kmsg.AlterUserSCRAMCredentialsResponse).Results {
		results[r.User] = r.ErrorCode
	}
	require.Equal(t, map[string]int16{"carol": 0, "dave": 91}, results, "dave has no credential: RESOURCE_NOT_FOUND")

	quotas := kmsg.NewPtrAlterClientQuotasRequest()
	entry := kmsg.NewAlterClientQuotasRequestEntry()
	ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
	ent.Type, ent.Name = "user", kmsg.StringPtr("carol")
	entry.Entity = append(entry.Entity, ent)
	op := kmsg.NewAlterClientQuotasRequestEntryOp()
	op.Key, op.Value = "producer_byte_rate", 4096
	entry.Ops = append(entry.Ops, op)
	quotas.Entries = append(quotas.Entries, entry)
	qresp, err := admin.Request(ctx, quotas, 1)
	require.NoError(t, err)
	require.Zero(t, qresp.(*kmsg.AlterClientQuotasResponse).Entries[0].ErrorCode)

	for _, b := range c.members {
		c.waitImage(b, "carol and her quota", func(img *controller.Image) bool {
			_, ok := img.SCRAMCredential("SCRAM-SHA-256", "carol")
			return ok && img.ClientQuotas().Len() == 1
		})
		carol := dialMember(t, ctx, b, "carol", "carol-secret")
		_, err := carol.ListTopics(ctx)
		require.NoError(t, err, "carol logs in on member %d", b.ID())

		dq := kmsg.NewPtrDescribeClientQuotasRequest()
		dresp, err := dialMember(t, ctx, b, "admin", "admin-secret").Request(ctx, dq, 1)
		require.NoError(t, err)
		entries := dresp.(*kmsg.DescribeClientQuotasResponse).Entries
		require.Len(t, entries, 1, "member %d", b.ID())
		require.Equal(t, "carol", *entries[0].Entity[0].Name)
		require.Equal(t, 4096.0, entries[0].Values[0].Value)
	}

	// Deleted through another member, carol is refused everywhere.
	req = kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	del.Name = "carol"
	req.Deletions = append(req.Deletions, del)
	resp, err = dialMember(t, ctx, c.member(1), "admin", "admin-secret").Request(ctx, req, 0)
	require.NoError(t, err)
	require.Zero(t, resp.(*kmsg.AlterUserSCRAMCredentialsResponse).Results[0].ErrorCode)
	for _, b := range c.members {
		c.waitImage(b, "carol gone", func(img *controller.Image) bool {
			_, ok := img.SCRAMCredential("SCRAM-SHA-256", "carol")
			return !ok
		})
		addr, _ := b.ListenerAddr("CLIENT")
		_, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{addr}, SASL: &kafka.DialSASL{Mechanism: "SCRAM-SHA-256", User: "carol", Password: "carol-secret"}})
		require.Error(t, err, "member %d", b.ID())
	}
}

// An authorizer guards client listeners: without one it is refused.
func TestAuthorizerNeedsListeners(t *testing.T) {
	_, err := replica.Start(replica.Config{
		ID: 1, Dir: t.TempDir(), Addr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0",
		Authorizer: &acl.Config{},
	})
	require.ErrorIs(t, err, replica.ErrInvalidConfig)
	_, err = replica.Start(replica.Config{
		ID: 1, Dir: t.TempDir(), Addr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0",
		Listeners:  []replica.Listener{{Addr: "127.0.0.1:0"}},
		Authorizer: &acl.Config{SuperUsers: []string{"admin"}},
	})
	require.ErrorIs(t, err, replica.ErrInvalidConfig)
}
