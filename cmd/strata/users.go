package main

import (
	"context"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
)

const usersHelp = `
Adds, changes, removes and lists SCRAM users kept by the broker (KIP-554),
with kafka-configs.sh --entity-type users' flags. Over --bootstrap-server
the client must be allowed to (a super user, or Alter/Describe on the
cluster); --data-dir works on a stopped standalone broker's data dir.
Only the salt, the iterations and keys derived from the password are
kept, never the password. Users of strata serve --sasl-users are the
bootstrap: a credential added here wins over the file's for its
mechanism; they are not listed here.

  strata users --bootstrap-server ADDR|--data-dir DIR --alter --entity-name alice \
      --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]'
  strata users ... --alter --entity-name alice --delete-config SCRAM-SHA-512
  strata users ... --describe [--entity-name alice]

iterations defaults to 4096 (at least 4096, at most 16384).`

func runUsers(e *env, args []string) (err error) {
	fs := newFlags(e, "users", "--bootstrap-server ADDR|--data-dir DIR --alter|--describe [flags]", usersHelp)
	var t target
	t.register(fs)
	var alter, describe bool
	var names stringList
	var addConfig, deleteConfig string
	fs.BoolVar(&alter, "alter", false, "change the user's credentials (--add-config, --delete-config)")
	fs.BoolVar(&describe, "describe", false, "list users and their credentials' mechanisms and iterations")
	fs.Var(&names, "entity-name", "`USER`; repeatable with --describe")
	fs.StringVar(&addConfig, "add-config", "", "`CONFIGS`: MECHANISM=[iterations=N,password=P],... to set")
	fs.StringVar(&deleteConfig, "delete-config", "", "`MECHANISMS`: comma-separated mechanisms whose credentials to remove")
	fs.String("entity-type", "users", "users (the only type; for kafka-configs.sh's command lines)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if et := fs.Lookup("entity-type").Value.String(); et != "users" {
		return usagef("--entity-type %q: only users", et)
	}
	if alter == describe {
		return usagef("want one of --alter, --describe")
	}
	var changes []userChange
	if alter {
		if len(names) != 1 {
			return usagef("--alter needs one --entity-name")
		}
		if changes, err = parseUserConfigs(names[0], addConfig, deleteConfig); err != nil {
			return err
		}
	}
	if err := t.check(); err != nil {
		return err
	}
	var be usersBackend
	if t.dataDir != "" {
		b, err := openBroker(e, &t, false)
		if err != nil {
			return err
		}
		be = brokerUsers{b}
	} else {
		a, err := dialAdmin(&t)
		if err != nil {
			return err
		}
		be = adminUsers{a}
	}
	defer func() {
		if cerr := be.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	if alter {
		if err := be.alter(changes); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "Completed updating config for user %s.\n", names[0])
		return nil
	}
	users, err := be.describe(names)
	if err != nil {
		return err
	}
	for _, u := range users {
		var cs []string
		for _, c := range u.Credentials {
			cs = append(cs, fmt.Sprintf("%s=iterations=%d", c.Mechanism, c.Iterations))
		}
		fmt.Fprintf(e.stdout, "SCRAM credential configs for user-principal '%s' are %s\n", u.Name, strings.Join(cs, ", "))
	}
	return nil
}

// userChange is one credential to set (password != "") or remove.
type userChange struct {
	user, mechanism string
	iterations      int
	password        string
}

// parseUserConfigs reads --add-config and --delete-config.
func parseUserConfigs(user, add, del string) ([]userChange, error) {
	var out []userChange
	seen := map[string]bool{}
	mech := func(m string) (string, error) {
		m = strings.ToUpper(strings.TrimSpace(m))
		if m != log.SCRAMSHA256 && m != log.SCRAMSHA512 {
			return "", usagef("%q is not SCRAM-SHA-256 or SCRAM-SHA-512", m)
		}
		if seen[m] {
			return "", usagef("%s given twice", m)
		}
		seen[m] = true
		return m, nil
	}
	for _, entry := range splitTopLevel(add) {
		name, val, ok := strings.Cut(entry, "=")
		if !ok {
			return nil, usagef("--add-config %q: want MECHANISM=[iterations=N,password=P]", entry)
		}
		m, err := mech(name)
		if err != nil {
			return nil, err
		}
		ch := userChange{user: user, mechanism: m, iterations: log.MinSCRAMIterations}
		if strings.HasPrefix(val, "[") && strings.HasSuffix(val, "]") {
			for _, kv := range strings.Split(val[1:len(val)-1], ",") {
				k, v, _ := strings.Cut(kv, "=")
				switch strings.TrimSpace(k) {
				case "password":
					ch.password = v
				case "iterations":
					if ch.iterations, err = strconv.Atoi(strings.TrimSpace(v)); err != nil {
						return nil, usagef("--add-config %s: iterations %q", m, v)
					}
				default:
					return nil, usagef("--add-config %s: unknown %q (want iterations, password)", m, k)
				}
			}
		} else {
			ch.password = val
		}
		if ch.password == "" {
			return nil, usagef("--add-config %s: empty password", m)
		}
		if ch.iterations < log.MinSCRAMIterations || ch.iterations > log.MaxSCRAMIterations {
			return nil, usagef("--add-config %s: iterations %d not in [%d, %d]", m, ch.iterations, log.MinSCRAMIterations, log.MaxSCRAMIterations)
		}
		out = append(out, ch)
	}
	for _, name := range splitTopLevel(del) {
		m, err := mech(name)
		if err != nil {
			return nil, err
		}
		out = append(out, userChange{user: user, mechanism: m})
	}
	if len(out) == 0 {
		return nil, usagef("--alter needs --add-config or --delete-config")
	}
	return out, nil
}

// splitTopLevel splits s at the commas outside brackets.
func splitTopLevel(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if strings.TrimSpace(s[start:]) != "" {
		out = append(out, s[start:])
	}
	return out
}

// usersBackend is where users works: a data dir or a broker.
type usersBackend interface {
	alter(changes []userChange) error
	describe(names []string) ([]log.SCRAMUser, error)
	Close() error
}

// brokerUsers works on a data dir.
type brokerUsers struct{ b *log.Broker }

func (b brokerUsers) Close() error {
	var err error
	closeBroker(b.b, &err)
	return err
}

func (b brokerUsers) alter(changes []userChange) error {
	var lc []log.SCRAMChange
	for _, ch := range changes {
		c := log.SCRAMChange{User: ch.user, Mechanism: ch.mechanism}
		if ch.password != "" {
			cred, err := kafka.NewSCRAMCredential(ch.mechanism, ch.password, ch.iterations)
			if err != nil {
				return err
			}
			lcred := log.SCRAMCredential(cred)
			c.Credential = &lcred
		}
		lc = append(lc, c)
	}
	failed, err := b.b.AlterSCRAMCredentials(context.Background(), lc)
	if err != nil {
		return err
	}
	var errs []error
	for _, err := range failed {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (b brokerUsers) describe(names []string) ([]log.SCRAMUser, error) {
	all := b.b.SCRAMUsers()
	if len(names) == 0 {
		return all, nil
	}
	var out []log.SCRAMUser
	for _, n := range names {
		found := false
		for _, u := range all {
			if u.Name == n {
				out, found = append(out, u), true
			}
		}
		if !found {
			return nil, fmt.Errorf("user %q: %w", n, log.ErrSCRAMCredentialNotFound)
		}
	}
	return out, nil
}

// adminUsers works over the Kafka protocol (AlterUserScramCredentials,
// DescribeUserScramCredentials v0: Kafka 2.7+): the password is salted
// here, as Kafka's admin client does, and only the salted password sent.
type adminUsers struct{ a *admin }

func (a adminUsers) Close() error { return a.a.Close() }

var scramCodes = map[string]int8{log.SCRAMSHA256: 1, log.SCRAMSHA512: 2}

func (a adminUsers) alter(changes []userChange) error {
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	for _, ch := range changes {
		if ch.password == "" {
			d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
			d.Name, d.Mechanism = ch.user, scramCodes[ch.mechanism]
			req.Deletions = append(req.Deletions, d)
			continue
		}
		h := func() hash.Hash { return sha256.New() }
		if ch.mechanism == log.SCRAMSHA512 {
			h = sha512.New
		}
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations = ch.user, scramCodes[ch.mechanism], int32(ch.iterations)
		u.Salt = make([]byte, 24)
		rand.Read(u.Salt)
		var err error
		if u.SaltedPassword, err = pbkdf2.Key(h, ch.password, u.Salt, ch.iterations, h().Size()); err != nil {
			return err
		}
		req.Upsertions = append(req.Upsertions, u)
	}
	r, err := a.a.do(req, 0)
	if err != nil {
		return err
	}
	var errs []error
	for _, res := range r.(*kmsg.AlterUserSCRAMCredentialsResponse).Results {
		errs = append(errs, scramCodeError(res.ErrorCode, res.ErrorMessage))
	}
	return errors.Join(errs...)
}

func (a adminUsers) describe(names []string) ([]log.SCRAMUser, error) {
	req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, n := range names {
		u := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		u.Name = n
		req.Users = append(req.Users, u)
	}
	r, err := a.a.do(req, 0)
	if err != nil {
		return nil, err
	}
	resp := r.(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if err := scramCodeError(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return nil, err
	}
	var out []log.SCRAMUser
	for _, res := range resp.Results {
		if err := scramCodeError(res.ErrorCode, res.ErrorMessage); err != nil {
			return nil, fmt.Errorf("user %q: %w", res.User, err)
		}
		u := log.SCRAMUser{Name: res.User}
		for _, ci := range res.CredentialInfos {
			m := fmt.Sprintf("mechanism %d", ci.Mechanism)
			for name, code := range scramCodes {
				if code == ci.Mechanism {
					m = name
				}
			}
			u.Credentials = append(u.Credentials, log.SCRAMInfo{Mechanism: m, Iterations: int(ci.Iterations)})
		}
		out = append(out, u)
	}
	return out, nil
}

// scramCodeError names the codes of the SCRAM APIs, else kafkaCodeError.
func scramCodeError(code int16, msg *string) error {
	names := map[int16]string{33: "UNSUPPORTED_SASL_MECHANISM", 91: "RESOURCE_NOT_FOUND", 92: "DUPLICATE_RESOURCE", 93: "UNACCEPTABLE_CREDENTIAL"}
	name, ok := names[code]
	if !ok {
		return kafkaCodeError(code, msg)
	}
	if msg != nil && *msg != "" {
		name += ": " + *msg
	}
	return errors.New(name)
}
