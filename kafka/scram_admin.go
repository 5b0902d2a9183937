package kafka

import (
	"context"
	"errors"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/internal/kerr"
	"github.com/strata-log/strata/log"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SCRAM users managed at runtime (KIP-554): DescribeUserScramCredentials
// and AlterUserScramCredentials, served when the backend keeps SCRAM
// credentials (SCRAMBackend; *log.Broker keeps them in scram.json of its
// data dir). With Config.Authorizer, Describe needs Describe on the
// cluster and Alter needs Alter on it, as in Kafka.
//
// A client sends the salted password (PBKDF2 of the password with the
// salt and iteration count), never the password; the server keeps the
// salt, the iterations, and the StoredKey and ServerKey derived from it.
//
// Logging in, a SCRAM user's credential is the runtime one if the backend
// has one for that user and mechanism, else the one of Config.SASL (the
// users file of `strata serve --sasl-users`, the bootstrap): a runtime
// credential overrides a file user's password at once, and deleting it
// brings the file's password back, not a refusal. Describe lists the
// runtime users only. PLAIN is not affected: it needs the password, which
// is never stored.
const (
	describeUserSCRAMKey int16 = 50
	alterUserSCRAMKey    int16 = 51
)

// Kafka's error codes of the SCRAM APIs.
const (
	errResourceNotFound       = kerr.ResourceNotFound
	errDuplicateResource      = kerr.DuplicateResource
	errUnacceptableCredential = kerr.UnacceptableCredential
)

// scramAdminAPIs: v0 is the only version (flexible).
var scramAdminAPIs = []api{
	{key: describeUserSCRAMKey, min: 0, max: 0, handle: handleDescribeUserSCRAM},
	{key: alterUserSCRAMKey, min: 0, max: 0, handle: handleAlterUserSCRAM},
}

// SCRAMBackend keeps the SCRAM credentials of users added at runtime;
// *log.Broker keeps them in a file of its data dir.
type SCRAMBackend interface {
	// SCRAMCredential is user's credential for mechanism
	// ("SCRAM-SHA-256", "SCRAM-SHA-512"), false if none. It is called for
	// every SCRAM login: cheap, never blocking.
	SCRAMCredential(mechanism, user string) (log.SCRAMCredential, bool)
	// SCRAMUsers lists the users and their credentials' mechanisms and
	// iterations.
	SCRAMUsers() []log.SCRAMUser
	// AlterSCRAMCredentials applies changes durably before it returns:
	// per user an error (log.ErrSCRAMCredentialNotFound, ...) and none of
	// that user's changes, or a whole error and nothing changed.
	AlterSCRAMCredentials(ctx context.Context, changes []log.SCRAMChange) (map[string]error, error)
}

// scramMechanisms are KIP-554's mechanism codes (0 is UNKNOWN).
var scramMechanisms = map[int8]scramHash{1: scramSHA256, 2: scramSHA512}

func scramMechanismCode(name string) int8 {
	for code, h := range scramMechanisms {
		if h.name == name {
			return code
		}
	}
	return 0
}

// authorizeSCRAMAdmin: Describe on the cluster to describe credentials,
// Alter to alter them.
func authorizeSCRAMAdmin(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	msg := kmsg.StringPtr("not authorized on the cluster")
	switch req := r.(type) {
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		if c.allowed(acl.OpDescribe, acl.Cluster()) {
			return next(ctx, c, req)
		}
		resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
		resp.ErrorCode, resp.ErrorMessage = errClusterAuthorizationFailed, msg
		return reply{resp: resp}
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		if c.allowed(acl.OpAlter, acl.Cluster()) {
			return next(ctx, c, req)
		}
		resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
		for _, u := range alterUsers(req) {
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User, res.ErrorCode, res.ErrorMessage = u, errClusterAuthorizationFailed, msg
			resp.Results = append(resp.Results, res)
		}
		return reply{resp: resp}
	}
	return reply{none: true, closeAfter: true}
}

// alterUsers are the users an Alter names, in the order of their first
// change (deletions, then upsertions), once each.
func alterUsers(req *kmsg.AlterUserSCRAMCredentialsRequest) []string {
	seen := map[string]bool{}
	var out []string
	add := func(u string) {
		if !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	for _, d := range req.Deletions {
		add(d.Name)
	}
	for _, u := range req.Upsertions {
		add(u.Name)
	}
	return out
}

func handleDescribeUserSCRAM(_ context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	users := c.s.caps.scram.SCRAMUsers()
	result := func(u log.SCRAMUser) kmsg.DescribeUserSCRAMCredentialsResponseResult {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = u.Name
		for _, ci := range u.Credentials {
			info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			info.Mechanism, info.Iterations = scramMechanismCode(ci.Mechanism), int32(ci.Iterations)
			res.CredentialInfos = append(res.CredentialInfos, info)
		}
		return res
	}
	if len(req.Users) == 0 { // null or empty: every user
		for _, u := range users {
			resp.Results = append(resp.Results, result(u))
		}
		return reply{resp: resp}
	}
	byName := make(map[string]log.SCRAMUser, len(users))
	for _, u := range users {
		byName[u.Name] = u
	}
	count := map[string]int{}
	for _, ru := range req.Users {
		count[ru.Name]++
	}
	done := map[string]bool{}
	for _, ru := range req.Users {
		if done[ru.Name] {
			continue
		}
		done[ru.Name] = true
		u, ok := byName[ru.Name]
		switch {
		case count[ru.Name] > 1:
			res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			res.User, res.ErrorCode = ru.Name, errDuplicateResource
			res.ErrorMessage = kmsg.StringPtr("cannot describe the same user twice in one request")
			resp.Results = append(resp.Results, res)
		case !ok:
			res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			res.User, res.ErrorCode = ru.Name, errResourceNotFound
			res.ErrorMessage = kmsg.StringPtr("the user has no SCRAM credential")
			resp.Results = append(resp.Results, res)
		default:
			resp.Results = append(resp.Results, result(u))
		}
	}
	return reply{resp: resp}
}

// userAlteration is one user's part of an Alter: its changes, or why it
// is refused.
type userAlteration struct {
	changes []log.SCRAMChange
	code    int16
	msg     string
}

func (a *userAlteration) refuse(code int16, msg string) {
	if a.code == errNone {
		a.code, a.msg = code, msg
	}
}

func handleAlterUserSCRAM(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	users := alterUsers(req)
	alts := make(map[string]*userAlteration, len(users))
	for _, u := range users {
		alts[u] = &userAlteration{}
	}
	// A (user, mechanism) changed twice refuses the user (Kafka's
	// DUPLICATE_RESOURCE), whatever else is wrong with its changes.
	type key struct {
		user string
		mech int8
	}
	seen := map[key]bool{}
	dup := func(u string, m int8) {
		if seen[key{u, m}] {
			alts[u].code, alts[u].msg = errDuplicateResource, "a user's credential cannot be altered twice in one request"
		}
		seen[key{u, m}] = true
	}
	for _, d := range req.Deletions {
		dup(d.Name, d.Mechanism)
	}
	for _, u := range req.Upsertions {
		dup(u.Name, u.Mechanism)
	}
	check := func(a *userAlteration, name string, mech int8) (scramHash, bool) {
		h, ok := scramMechanisms[mech]
		switch {
		case name == "":
			a.refuse(errUnacceptableCredential, "the user name must not be empty")
		case !ok:
			a.refuse(errUnsupportedSaslMechanism, "unknown SCRAM mechanism")
		}
		return h, a.code == errNone
	}
	for _, d := range req.Deletions {
		a := alts[d.Name]
		if h, ok := check(a, d.Name, d.Mechanism); ok {
			a.changes = append(a.changes, log.SCRAMChange{User: d.Name, Mechanism: h.name})
		}
	}
	for _, u := range req.Upsertions {
		a := alts[u.Name]
		h, ok := check(a, u.Name, u.Mechanism)
		switch {
		case !ok:
			continue
		case u.Iterations < log.MinSCRAMIterations:
			a.refuse(errUnacceptableCredential, "too few iterations")
		case u.Iterations > log.MaxSCRAMIterations:
			a.refuse(errUnacceptableCredential, "too many iterations")
		case len(u.Salt) == 0:
			a.refuse(errUnacceptableCredential, "empty salt")
		case len(u.SaltedPassword) != h.new().Size():
			a.refuse(errUnacceptableCredential, "the salted password is not of the mechanism's hash size")
		default:
			cred := &log.SCRAMCredential{
				Salt:       append([]byte(nil), u.Salt...),
				Iterations: int(u.Iterations),
				StoredKey:  h.sum(h.hmac(u.SaltedPassword, []byte("Client Key"))),
				ServerKey:  h.hmac(u.SaltedPassword, []byte("Server Key")),
			}
			a.changes = append(a.changes, log.SCRAMChange{User: u.Name, Mechanism: h.name, Credential: cred})
		}
	}
	var changes []log.SCRAMChange
	for _, u := range users {
		if a := alts[u]; a.code == errNone {
			changes = append(changes, a.changes...)
		}
	}
	if len(changes) > 0 {
		failed, err := c.s.caps.scram.AlterSCRAMCredentials(ctx, changes)
		for _, u := range users {
			a := alts[u]
			if a.code != errNone {
				continue
			}
			e := err
			if e == nil {
				e = failed[u]
			}
			if e != nil {
				a.code, a.msg = scramErrorCode(e), e.Error()
			}
		}
	}
	for _, u := range users {
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User, res.ErrorCode = u, alts[u].code
		if res.ErrorCode != errNone {
			res.ErrorMessage = kmsg.StringPtr(alts[u].msg)
		}
		resp.Results = append(resp.Results, res)
	}
	return reply{resp: resp}
}

// scramErrorCode is the code of a SCRAMBackend's error.
func scramErrorCode(err error) int16 {
	switch {
	case errors.Is(err, log.ErrSCRAMCredentialNotFound):
		return errResourceNotFound
	case errors.Is(err, log.ErrInvalidSCRAMCredential):
		return errUnacceptableCredential
	}
	return errorCode(err)
}

// scramLookup is the credential lookup of mechanism h at login: the
// runtime one (nil: none), else the configured one.
func scramLookup(runtime SCRAMBackend, h scramHash, configured func(string) (SCRAMCredential, bool)) func(string) (SCRAMCredential, bool) {
	if runtime == nil {
		return configured
	}
	return func(user string) (SCRAMCredential, bool) {
		if c, ok := runtime.SCRAMCredential(h.name, user); ok {
			return SCRAMCredential(c), true
		}
		return configured(user)
	}
}
