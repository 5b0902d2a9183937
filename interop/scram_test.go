package interop

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/kafka/kafkatest"
)

// TestUserSCRAMs: kadm adds a SCRAM user at runtime as a super user
// (AlterUserScramCredentials), a kgo producer logs in with it at once,
// kadm describes it, an ordinary user may not alter or describe, invalid
// upsertions answer Kafka's codes, and once deleted the user is refused.
func TestUserSCRAMs(t *testing.T) {
	const topic = "orders"
	fx := kafkatest.New(t,
		kafkatest.SASLUser("SCRAM-SHA-256", "admin", "admin-secret"),
		kafkatest.SASLUser("SCRAM-SHA-256", "alice", "alice-secret"),
		kafkatest.SuperUser("admin"),
		kafkatest.EnableACLs(),
		kafkatest.Topic(topic, 1))
	ctx := testCtx(t, 60*time.Second)
	client := func(m scram.Auth, opts ...kgo.Opt) *kgo.Client {
		t.Helper()
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(fx.Addr()), kgo.SASL(m.AsSha256Mechanism())}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	admin := kadm.NewClient(client(scram.Auth{User: "admin", Pass: "admin-secret"}))
	alice := kadm.NewClient(client(scram.Auth{User: "alice", Pass: "alice-secret"}))
	// carol logs in with SCRAM-SHA-256: kafkatest offers the mechanisms
	// of its SASLUsers only. Ping is a Metadata request, answered to any
	// authenticated user.
	login := func(pass string) error {
		cl := client(scram.Auth{User: "carol", Pass: pass}, kgo.RequestRetries(0))
		return cl.Ping(ctx)
	}

	if err := login("carol-secret"); err == nil {
		t.Fatal("carol logged in before she was added")
	}
	res, err := alice.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha256, Iterations: 8192, Password: "carol-secret"}})
	// kadm turns a result's authorization failure into the call's error.
	if !errors.Is(err, kerr.ClusterAuthorizationFailed) && !errors.Is(res["carol"].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice adds carol: %v %v, want CLUSTER_AUTHORIZATION_FAILED", res, err)
	}
	if _, err := alice.DescribeUserSCRAMs(ctx); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice describes: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	res, err = admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha256, Iterations: 8192, Password: "carol-secret"}})
	if err != nil || res["carol"].Err != nil {
		t.Fatalf("admin adds carol: %v %v", res, err)
	}
	if err := login("carol-secret"); err != nil {
		t.Fatalf("carol logs in: %v", err)
	}
	if err := login("wrong"); err == nil {
		t.Fatal("carol logged in with a wrong password")
	}
	desc, err := admin.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := desc["carol"]; d.Err != nil || len(d.CredInfos) != 1 || d.CredInfos[0] != (kadm.CredInfo{Mechanism: kadm.ScramSha256, Iterations: 8192}) || len(desc) != 1 {
		t.Fatalf("describe: %+v", desc)
	}

	// Invalid upsertions: Kafka's codes, carol unchanged.
	for _, tc := range []struct {
		up   kadm.UpsertSCRAM
		want error
	}{
		{kadm.UpsertSCRAM{User: "carol", Mechanism: kadm.ScramSha256, Iterations: 1024, Password: "x"}, kerr.UnacceptableCredential},
		{kadm.UpsertSCRAM{User: "carol", Mechanism: 3, Iterations: 4096, Salt: []byte("s"), SaltedPassword: []byte("p")}, kerr.UnsupportedSaslMechanism},
	} {
		res, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{tc.up})
		if err != nil || !errors.Is(res["carol"].Err, tc.want) {
			t.Fatalf("upsert %+v: %v %v, want %v", tc.up, res, err, tc.want)
		}
	}
	res, err = admin.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "carol", Mechanism: kadm.ScramSha256}},
		[]kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "x"}})
	if err != nil || !errors.Is(res["carol"].Err, kerr.DuplicateResource) {
		t.Fatalf("delete and upsert: %v %v, want DUPLICATE_RESOURCE", res, err)
	}
	if err := login("carol-secret"); err != nil {
		t.Fatalf("carol after refused changes: %v", err)
	}

	res, err = admin.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "carol", Mechanism: kadm.ScramSha256}}, nil)
	if err != nil || res["carol"].Err != nil {
		t.Fatalf("admin deletes carol: %v %v", res, err)
	}
	if err := login("carol-secret"); err == nil {
		t.Fatal("carol logged in after she was deleted")
	}
	desc, err = admin.DescribeUserSCRAMs(ctx, "carol")
	if err != nil || !errors.Is(desc["carol"].Err, kerr.ResourceNotFound) {
		t.Fatalf("describe carol deleted: %+v %v, want RESOURCE_NOT_FOUND", desc, err)
	}
}

// TestUserSCRAMsCluster: on a three-member cluster, kadm adds a SCRAM user
// through one member's client listener (AlterUserScramCredentials goes to
// the active controller); the user logs in on every member and every
// member describes it; an ordinary user may not alter; deleted through
// another member, the user is refused everywhere.
func TestUserSCRAMsCluster(t *testing.T) {
	c, listeners := startSecuredCluster(t, map[string]string{"admin": "admin-secret", "alice": "alice-secret"})
	ctx := testCtx(t, 60*time.Second)
	login := func(addr, pass string) error {
		cl := c.onlyMember(t, addr, "carol", pass, kgo.RequestRetries(0))
		defer cl.Close()
		return cl.Ping(ctx)
	}
	alice := kadm.NewClient(c.scramClient(t, listeners, "alice", "alice-secret"))
	up := func() []kadm.UpsertSCRAM { // kadm salts it in place: a new one per call
		return []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha256, Iterations: 8192, Password: "carol-secret"}}
	}
	res, err := alice.AlterUserSCRAMs(ctx, nil, up())
	if !errors.Is(err, kerr.ClusterAuthorizationFailed) && !errors.Is(res["carol"].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice adds carol: %v %v, want CLUSTER_AUTHORIZATION_FAILED", res, err)
	}
	res, err = kadm.NewClient(c.onlyMember(t, listeners[0], "admin", "admin-secret")).AlterUserSCRAMs(ctx, nil, up())
	if err != nil || res["carol"].Err != nil {
		t.Fatalf("admin adds carol: %v %v", res, err)
	}
	c.waitImage("carol", func(img *controller.Image) bool {
		_, ok := img.SCRAMCredential("SCRAM-SHA-256", "carol")
		return ok
	})
	for i, addr := range listeners {
		if err := login(addr, "carol-secret"); err != nil {
			t.Fatalf("carol logs in on member %d: %v", i+1, err)
		}
		if err := login(addr, "wrong"); err == nil {
			t.Fatalf("carol logs in on member %d with a wrong password", i+1)
		}
		desc, err := kadm.NewClient(c.onlyMember(t, addr, "admin", "admin-secret")).DescribeUserSCRAMs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d := desc["carol"]; d.Err != nil || len(d.CredInfos) != 1 || d.CredInfos[0] != (kadm.CredInfo{Mechanism: kadm.ScramSha256, Iterations: 8192}) || len(desc) != 1 {
			t.Fatalf("member %d describes %+v", i+1, desc)
		}
	}
	res, err = kadm.NewClient(c.onlyMember(t, listeners[2], "admin", "admin-secret")).AlterUserSCRAMs(ctx,
		[]kadm.DeleteSCRAM{{User: "carol", Mechanism: kadm.ScramSha256}}, nil)
	if err != nil || res["carol"].Err != nil {
		t.Fatalf("admin deletes carol: %v %v", res, err)
	}
	c.waitImage("carol gone", func(img *controller.Image) bool {
		_, ok := img.SCRAMCredential("SCRAM-SHA-256", "carol")
		return !ok
	})
	for i, addr := range listeners {
		if err := login(addr, "carol-secret"); err == nil {
			t.Fatalf("carol logs in on member %d once deleted", i+1)
		}
	}
}
