package kafka

import (
	"context"
	"crypto/pbkdf2"
	"errors"
	"testing"
	"time"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/log"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// scramFixture is a broker on a data dir that survives a restart, with a
// users file of one user, admin (a super user), for PLAIN and SCRAM, and
// ACLs enforced.
type scramFixture struct {
	t   *testing.T
	dir string
	b   *log.Broker
	s   *Server
}

func startSCRAM(t *testing.T) *scramFixture {
	f := &scramFixture{t: t, dir: t.TempDir()}
	f.open()
	t.Cleanup(f.close)
	return f
}

func (f *scramFixture) open() {
	f.t.Helper()
	b, err := log.Open(f.dir, log.Config{})
	require.NoError(f.t, err)
	c256, err := NewSCRAMCredential(mechSCRAM256, "admin-pw", 0)
	require.NoError(f.t, err)
	c512, err := NewSCRAMCredential(mechSCRAM512, "admin-pw", 0)
	require.NoError(f.t, err)
	s, err := Listen("127.0.0.1:0", b, Config{
		SASL: &SASLConfig{
			Plain:    func(u string) (string, bool) { return "admin-pw", u == "admin" },
			SCRAM256: func(u string) (SCRAMCredential, bool) { return c256, u == "admin" },
			SCRAM512: func(u string) (SCRAMCredential, bool) { return c512, u == "admin" },
		},
		Authorizer:                &acl.Config{SuperUsers: []string{acl.User("admin")}},
		FailedAuthenticationDelay: time.Millisecond,
	})
	require.NoError(f.t, err)
	f.b, f.s = b, s
}

func (f *scramFixture) close() {
	if f.s == nil {
		return
	}
	require.NoError(f.t, f.s.Close())
	require.NoError(f.t, f.b.Close())
	f.s, f.b = nil, nil
}

// login dials as user with mechanism; nil if it authenticated.
func (f *scramFixture) login(mech, user, password string) error {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, DialConfig{Seeds: []string{f.s.Addr()}, SASL: &DialSASL{Mechanism: mech, User: user, Password: password}})
	if err != nil {
		var ke *Error
		require.True(f.t, errors.As(err, &ke), "%v", err)
		require.Equal(f.t, errSaslAuthenticationFailed, ke.Code, "%v", err)
		return err
	}
	return c.Close()
}

// as is a connection logged in (PLAIN) as admin, or as a runtime user
// (SCRAM-SHA-256).
func (f *scramFixture) as(user, password string) *testClient {
	f.t.Helper()
	c := dial(f.t, f.s.Addr())
	if user == "admin" {
		require.Equal(f.t, errNone, handshake(c, 1, mechPlain).ErrorCode)
		require.Equal(f.t, errNone, authenticate(c, 2, []byte("\x00admin\x00"+password)).ErrorCode)
		return c
	}
	require.Equal(f.t, errNone, handshake(c, 1, mechSCRAM256).ErrorCode)
	scramClient(f.t, scramSHA256, user, password, func(msg []byte) []byte {
		r := authenticate(c, 2, msg)
		require.Equal(f.t, errNone, r.ErrorCode)
		return r.SASLAuthBytes
	})
	return c
}

// upsert is an upsertion of user's password, salted as a client does.
func upsert(t testing.TB, user string, mech int8, password string, iterations int32) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	u.Name, u.Mechanism, u.Iterations = user, mech, iterations
	u.Salt = []byte("salt-of-" + user)
	h := scramSHA256
	if mech == 2 {
		h = scramSHA512
	}
	var err error
	u.SaltedPassword, err = pbkdf2.Key(h.new, password, u.Salt, max(int(iterations), 1), h.new().Size())
	require.NoError(t, err)
	return u
}

func deletion(user string, mech int8) kmsg.AlterUserSCRAMCredentialsRequestDeletion {
	d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	d.Name, d.Mechanism = user, mech
	return d
}

func alterSCRAM(c *testClient, ds []kmsg.AlterUserSCRAMCredentialsRequestDeletion, us ...kmsg.AlterUserSCRAMCredentialsRequestUpsertion) map[string]int16 {
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Deletions, req.Upsertions = ds, us
	resp := c.do(req).(*kmsg.AlterUserSCRAMCredentialsResponse)
	out := map[string]int16{}
	for _, r := range resp.Results {
		_, dup := out[r.User]
		require.False(c.t, dup, "two results for %q", r.User)
		out[r.User] = r.ErrorCode
	}
	return out
}

func describeSCRAM(c *testClient, users ...string) *kmsg.DescribeUserSCRAMCredentialsResponse {
	req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, u := range users {
		ru := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		ru.Name = u
		req.Users = append(req.Users, ru)
	}
	return c.do(req).(*kmsg.DescribeUserSCRAMCredentialsResponse)
}

// TestSCRAMUserAtRuntime adds a user with AlterUserScramCredentials, logs
// in with it at once, keeps it across a restart, deletes it and is
// refused; a user without Alter (Describe) on the cluster changes
// (sees) nothing.
func TestSCRAMUserAtRuntime(t *testing.T) {
	f := startSCRAM(t)
	require.NoError(t, f.login(mechSCRAM256, "admin", "admin-pw"))
	require.Error(t, f.login(mechSCRAM256, "carol", "carol-pw"))

	admin := f.as("admin", "admin-pw")
	keys := apiKeys(t, admin)
	require.Equal(t, [2]int16{0, 0}, keys[describeUserSCRAMKey])
	require.Equal(t, [2]int16{0, 0}, keys[alterUserSCRAMKey])
	require.Equal(t, map[string]int16{"carol": errNone},
		alterSCRAM(admin, nil, upsert(t, "carol", 1, "carol-pw", 8192)))

	require.NoError(t, f.login(mechSCRAM256, "carol", "carol-pw"))
	require.Error(t, f.login(mechSCRAM256, "carol", "wrong"))
	require.Error(t, f.login(mechSCRAM512, "carol", "carol-pw")) // no SCRAM-SHA-512 credential
	require.Error(t, f.login(mechPlain, "carol", "carol-pw"))    // PLAIN needs the file

	d := describeSCRAM(admin)
	require.Equal(t, errNone, d.ErrorCode)
	require.Len(t, d.Results, 1)
	require.Equal(t, "carol", d.Results[0].User)
	require.Equal(t, []kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo{{Mechanism: 1, Iterations: 8192}}, d.Results[0].CredentialInfos)

	// carol has no ACL: she may neither alter nor describe credentials.
	carol := f.as("carol", "carol-pw")
	require.Equal(t, map[string]int16{"dave": errClusterAuthorizationFailed, "carol": errClusterAuthorizationFailed},
		alterSCRAM(carol, []kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("carol", 1)}, upsert(t, "dave", 1, "dave-pw", 4096)))
	require.Equal(t, errClusterAuthorizationFailed, describeSCRAM(carol).ErrorCode)
	require.Empty(t, describeSCRAM(carol).Results)
	require.Equal(t, []log.SCRAMUser{{Name: "carol", Credentials: []log.SCRAMInfo{{Mechanism: log.SCRAMSHA256, Iterations: 8192}}}}, f.b.SCRAMUsers())
	require.Error(t, f.login(mechSCRAM256, "dave", "dave-pw"))
	// With Describe (not Alter) on the cluster, she describes, and still
	// may not alter.
	_, err := f.b.CreateACLs(context.Background(), []acl.Binding{allowTo("carol", acl.OpDescribe, acl.Cluster())})
	require.NoError(t, err)
	require.Equal(t, errNone, describeSCRAM(carol, "carol").ErrorCode)
	require.Equal(t, map[string]int16{"dave": errClusterAuthorizationFailed},
		alterSCRAM(carol, nil, upsert(t, "dave", 1, "dave-pw", 4096)))

	// Restarted, carol is still there.
	f.close()
	f.open()
	require.NoError(t, f.login(mechSCRAM256, "carol", "carol-pw"))
	admin = f.as("admin", "admin-pw")
	require.Equal(t, map[string]int16{"carol": errNone},
		alterSCRAM(admin, []kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("carol", 1)}))
	require.Error(t, f.login(mechSCRAM256, "carol", "carol-pw"))
	d = describeSCRAM(admin, "carol")
	require.Equal(t, errResourceNotFound, d.Results[0].ErrorCode)
	f.close()
	f.open()
	require.Error(t, f.login(mechSCRAM256, "carol", "carol-pw"))
}

// TestSCRAMRuntimeOverridesFile: a runtime credential of a users-file
// user replaces its file password for that mechanism; deleted, the file's
// password works again.
func TestSCRAMRuntimeOverridesFile(t *testing.T) {
	f := startSCRAM(t)
	admin := f.as("admin", "admin-pw")
	require.Equal(t, map[string]int16{"admin": errNone},
		alterSCRAM(admin, nil, upsert(t, "admin", 2, "new-pw", 4096)))
	require.NoError(t, f.login(mechSCRAM512, "admin", "new-pw"))
	require.Error(t, f.login(mechSCRAM512, "admin", "admin-pw"))
	require.NoError(t, f.login(mechSCRAM256, "admin", "admin-pw")) // other mechanism: the file's
	require.Equal(t, map[string]int16{"admin": errNone},
		alterSCRAM(admin, []kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("admin", 2)}))
	require.NoError(t, f.login(mechSCRAM512, "admin", "admin-pw"))
	// A user of the file only has no runtime credential to delete.
	require.Equal(t, map[string]int16{"admin": errResourceNotFound},
		alterSCRAM(admin, []kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("admin", 1)}))
}

// TestAlterUserSCRAMInvalid: each invalid change answers Kafka's code for
// its user and changes nothing of that user; a valid user of the same
// request is altered.
func TestAlterUserSCRAMInvalid(t *testing.T) {
	f := startSCRAM(t)
	admin := f.as("admin", "admin-pw")
	require.Equal(t, map[string]int16{"keep": errNone}, alterSCRAM(admin, nil, upsert(t, "keep", 1, "keep-pw", 4096)))
	short := upsert(t, "x", 1, "x-pw", 4096)
	short.SaltedPassword = short.SaltedPassword[:10]
	noSalt := upsert(t, "x", 1, "x-pw", 4096)
	noSalt.Salt = nil
	type dels = []kmsg.AlterUserSCRAMCredentialsRequestDeletion
	for _, tc := range []struct {
		name string
		ds   dels
		us   []kmsg.AlterUserSCRAMCredentialsRequestUpsertion
		code int16
	}{
		{"too few iterations", nil, []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{upsert(t, "x", 1, "x-pw", 4095)}, errUnacceptableCredential},
		{"too many iterations", nil, []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{upsert(t, "x", 1, "x-pw", 16385)}, errUnacceptableCredential},
		{"unknown mechanism", nil, []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{upsert(t, "x", 1, "x-pw", 4096), upsert(t, "x", 3, "x-pw", 4096)}, errUnsupportedSaslMechanism},
		{"unknown mechanism of a deletion", dels{deletion("x", 0)}, nil, errUnsupportedSaslMechanism},
		{"twice", nil, []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{upsert(t, "x", 1, "x-pw", 4096), upsert(t, "x", 1, "y-pw", 4096)}, errDuplicateResource},
		{"deleted and upserted", dels{deletion("x", 2)}, []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{upsert(t, "x", 2, "x-pw", 4096)}, errDuplicateResource},
		{"not there to delete", dels{deletion("x", 1)}, []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{upsert(t, "x", 2, "x-pw", 4096)}, errResourceNotFound},
		{"short salted password", nil, []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{short}, errUnacceptableCredential},
		{"no salt", nil, []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{noSalt}, errUnacceptableCredential},
	} {
		t.Run(tc.name, func(t *testing.T) {
			us := append(tc.us, upsert(t, "ok-"+tc.name, 1, "ok-pw", 4096))
			got := alterSCRAM(admin, tc.ds, us...)
			require.Equal(t, map[string]int16{"x": tc.code, "ok-" + tc.name: errNone}, got)
			_, ok256 := f.b.SCRAMCredential(log.SCRAMSHA256, "x")
			_, ok512 := f.b.SCRAMCredential(log.SCRAMSHA512, "x")
			require.False(t, ok256 || ok512, "x was changed")
			require.NoError(t, f.login(mechSCRAM256, "ok-"+tc.name, "ok-pw"))
		})
	}
	require.Equal(t, map[string]int16{"": errUnacceptableCredential}, alterSCRAM(admin, nil, upsert(t, "", 1, "pw", 4096)))

	d := describeSCRAM(admin, "keep", "nobody", "keep")
	require.Equal(t, errNone, d.ErrorCode)
	got := map[string]int16{}
	for _, r := range d.Results {
		got[r.User] = r.ErrorCode
	}
	require.Equal(t, map[string]int16{"keep": errDuplicateResource, "nobody": errResourceNotFound}, got)
}

// FuzzSCRAMAdmin decodes a frame as the server does and handles it
// against an in-memory broker, seeded with DescribeUserScramCredentials
// and AlterUserScramCredentials: nothing panics, every request gets a
// response, and whatever it stored is a valid credential.
func FuzzSCRAMAdmin(f *testing.F) {
	fm := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	alter := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	alter.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("a", 1), deletion("b", 7)}
	alter.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{upsert(f, "a", 2, "pw", 4096), upsert(f, "c", 1, "pw", 100)}
	f.Add(fm.AppendRequest(nil, alter, 1)[4:])
	describe := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	describe.Users = []kmsg.DescribeUserSCRAMCredentialsRequestUser{{Name: "a"}, {Name: "a"}, {Name: "z"}}
	f.Add(fm.AppendRequest(nil, describe, 2)[4:])
	b, err := log.Open(f.TempDir(), log.Config{})
	require.NoError(f, err)
	f.Cleanup(func() { b.Close() })
	s, err := Listen("127.0.0.1:0", b, Config{})
	require.NoError(f, err)
	f.Cleanup(func() { s.Close() })
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, a, req, err := s.decode(frame)
		if err != nil {
			return
		}
		c := newConn(s, nopConn{})
		p := &pending{h: h}
		rep := a.handle(context.Background(), c, req)
		c.encode(p, rep)
		if p.out == nil && !rep.none {
			t.Fatalf("no response to %s", kmsg.NameForKey(h.key))
		}
		for _, u := range b.SCRAMUsers() {
			for _, ci := range u.Credentials {
				c, ok := b.SCRAMCredential(ci.Mechanism, u.Name)
				if !ok || u.Name == "" || c.Iterations < log.MinSCRAMIterations || len(c.Salt) == 0 {
					t.Fatalf("stored %q %+v", u.Name, c)
				}
			}
		}
	})
}
