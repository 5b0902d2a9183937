package log

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/strata-log/strata/vfs"
)

// A standalone broker keeps the SCRAM credentials of the users added at
// runtime (AlterUserScramCredentials, KIP-554) in scram.json in its data
// dir, replaced whole on every change (a temp file fsynced, renamed over
// it, the directory fsynced) before the change is acknowledged. It holds
// what Kafka keeps of a password, never the password: the salt, the
// iteration count, and the StoredKey and ServerKey derived from the
// salted password (RFC 5802), base64 in JSON:
//
//	{"version":1,"users":{"alice":{"SCRAM-SHA-256":{"salt":"…",
//	  "iterations":8192,"storedKey":"…","serverKey":"…"}}}}
//
// A missing file is no users; a file that does not parse or holds an
// invalid credential stops the data dir from opening (ErrCorrupt) rather
// than let a deleted user back in or refuse one that was acknowledged.
const (
	scramFile    = "scram.json"
	scramVersion = 1
)

// SCRAM mechanisms a credential may be for.
const (
	SCRAMSHA256 = "SCRAM-SHA-256"
	SCRAMSHA512 = "SCRAM-SHA-512"
)

// MinSCRAMIterations and MaxSCRAMIterations bound a credential's
// iteration count, as Kafka does.
const (
	MinSCRAMIterations = 4096
	MaxSCRAMIterations = 16384
)

var (
	// ErrSCRAMCredentialNotFound: a user has no credential of that
	// mechanism to delete.
	ErrSCRAMCredentialNotFound = errors.New("log: no such SCRAM credential")
	// ErrInvalidSCRAMCredential: a change with no user name, an unknown
	// mechanism, iterations out of range or an empty salt or key.
	ErrInvalidSCRAMCredential = errors.New("log: invalid SCRAM credential")
)

// SCRAMCredential is what is kept of one user's password for one
// mechanism (the fields of kafka.SCRAMCredential).
type SCRAMCredential struct {
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}

// SCRAMChange is one change of AlterSCRAMCredentials: User's credential
// of Mechanism set to Credential, or deleted when Credential is nil.
type SCRAMChange struct {
	User       string
	Mechanism  string
	Credential *SCRAMCredential
}

// scramUsers is user → mechanism → credential; never modified once
// stored in scramStore.users.
type scramUsers map[string]map[string]SCRAMCredential

// scramStore is a data dir's runtime SCRAM users: the map read without a
// lock by every login, and the file, written under mu.
type scramStore struct {
	fs    vfs.FS
	path  string
	mu    sync.Mutex // serializes changes
	users atomic.Pointer[scramUsers]
}

type scramJSON struct {
	Version int                                 `json:"version"`
	Users   map[string]map[string]scramCredJSON `json:"users"`
}

type scramCredJSON struct {
	Salt       []byte `json:"salt"`
	Iterations int    `json:"iterations"`
	StoredKey  []byte `json:"storedKey"`
	ServerKey  []byte `json:"serverKey"`
}

// openSCRAMStore reads dir's scram.json.
func openSCRAMStore(fs vfs.FS, dir string) (*scramStore, error) {
	s := &scramStore{fs: fs, path: filepath.Join(dir, scramFile)}
	users, found, err := readMetaFile(fs, s.path, scramFile, decodeSCRAM)
	if err != nil {
		return nil, err
	}
	if !found {
		users = scramUsers{}
	}
	s.users.Store(&users)
	return s, nil
}

func decodeSCRAM(data []byte) (scramUsers, error) {
	var f scramJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, err
	}
	if f.Version != scramVersion {
		return nil, fmt.Errorf("unknown version %d", f.Version)
	}
	users := scramUsers{}
	for u, mechs := range f.Users {
		if len(mechs) == 0 {
			return nil, fmt.Errorf("user %q has no credential", u)
		}
		users[u] = map[string]SCRAMCredential{}
		for m, j := range mechs {
			c := SCRAMCredential(j)
			if err := validSCRAM(u, m, &c); err != nil {
				return nil, err
			}
			users[u][m] = c
		}
	}
	return users, nil
}

func encodeSCRAM(users scramUsers) []byte {
	f := scramJSON{Version: scramVersion, Users: map[string]map[string]scramCredJSON{}}
	for u, mechs := range users {
		f.Users[u] = map[string]scramCredJSON{}
		for m, c := range mechs {
			f.Users[u][m] = scramCredJSON(c)
		}
	}
	data, _ := json.Marshal(f) // strings, bytes and ints only: cannot fail
	return append(data, '\n')
}

// validSCRAM checks one credential of user for mechanism.
func validSCRAM(user, mechanism string, c *SCRAMCredential) error {
	switch {
	case user == "":
		return fmt.Errorf("%w: empty user name", ErrInvalidSCRAMCredential)
	case mechanism != SCRAMSHA256 && mechanism != SCRAMSHA512:
		return fmt.Errorf("%w: unknown mechanism %q", ErrInvalidSCRAMCredential, mechanism)
	case c == nil:
		return nil
	case c.Iterations < MinSCRAMIterations || c.Iterations > MaxSCRAMIterations:
		return fmt.Errorf("%w: %d iterations, not in [%d, %d]", ErrInvalidSCRAMCredential, c.Iterations, MinSCRAMIterations, MaxSCRAMIterations)
	case len(c.Salt) == 0 || len(c.StoredKey) == 0 || len(c.ServerKey) == 0:
		return fmt.Errorf("%w: empty salt or key for %q", ErrInvalidSCRAMCredential, user)
	}
	return nil
}

// credential returns user's credential of mechanism.
func (s *scramStore) credential(mechanism, user string) (SCRAMCredential, bool) {
	c, ok := (*s.users.Load())[user][mechanism]
	return c, ok
}

// alter applies changes, durably: a user one of whose changes is invalid
// or deletes a credential it does not have gets none of its changes, and
// its error; if the file cannot be written, nothing changes.
func (s *scramStore) alter(changes []SCRAMChange) (map[string]error, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := *s.users.Load()
	next := maps.Clone(cur)
	failed := map[string]error{}
	var order []string // users in the order of their first change
	byUser := map[string][]SCRAMChange{}
	for _, ch := range changes {
		if _, ok := byUser[ch.User]; !ok {
			order = append(order, ch.User)
		}
		byUser[ch.User] = append(byUser[ch.User], ch)
	}
	changed := false
	for _, u := range order {
		mechs := maps.Clone(cur[u])
		if mechs == nil {
			mechs = map[string]SCRAMCredential{}
		}
		var err error
		for _, ch := range byUser[u] {
			if err = validSCRAM(ch.User, ch.Mechanism, ch.Credential); err != nil {
				break
			}
			if ch.Credential == nil {
				if _, ok := mechs[ch.Mechanism]; !ok {
					err = fmt.Errorf("%w: user %q has no %s credential", ErrSCRAMCredentialNotFound, u, ch.Mechanism)
					break
				}
				delete(mechs, ch.Mechanism)
				continue
			}
			mechs[ch.Mechanism] = cloneSCRAM(*ch.Credential)
		}
		if err != nil {
			failed[u] = err
			continue
		}
		changed = true
		if len(mechs) == 0 {
			delete(next, u)
		} else {
			next[u] = mechs
		}
	}
	if !changed {
		return failed, nil
	}
	if err := vfs.WriteFileAtomic(s.fs, s.path, encodeSCRAM(next)); err != nil {
		return nil, fmt.Errorf("log: write %s: %w", scramFile, err)
	}
	s.users.Store(&next)
	return failed, nil
}

func cloneSCRAM(c SCRAMCredential) SCRAMCredential {
	c.Salt = append([]byte(nil), c.Salt...)
	c.StoredKey = append([]byte(nil), c.StoredKey...)
	c.ServerKey = append([]byte(nil), c.ServerKey...)
	return c
}

// SCRAMCredential returns the credential of user for mechanism
// ("SCRAM-SHA-256" or "SCRAM-SHA-512") added at runtime, false if there
// is none (kafka.SCRAMBackend). It is called for every SCRAM login: an
// atomic load and two map lookups. The slices must not be modified.
func (b *Broker) SCRAMCredential(mechanism, user string) (SCRAMCredential, bool) {
	return b.scram.credential(mechanism, user)
}

// SCRAMUsers returns the users with credentials added at runtime, sorted,
// with the mechanisms (sorted) and iteration counts of their
// credentials.
func (b *Broker) SCRAMUsers() []SCRAMUser {
	users := *b.scram.users.Load()
	out := make([]SCRAMUser, 0, len(users))
	for u, mechs := range users {
		su := SCRAMUser{Name: u}
		for m, c := range mechs {
			su.Credentials = append(su.Credentials, SCRAMInfo{Mechanism: m, Iterations: c.Iterations})
		}
		sort.Slice(su.Credentials, func(i, j int) bool { return su.Credentials[i].Mechanism < su.Credentials[j].Mechanism })
		out = append(out, su)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// SCRAMUser is a user's credentials as described: never the keys.
type SCRAMUser struct {
	Name        string
	Credentials []SCRAMInfo
}

// SCRAMInfo is one credential as described.
type SCRAMInfo struct {
	Mechanism  string
	Iterations int
}

// AlterSCRAMCredentials applies changes, in scram.json before it
// returns. A user one of whose changes is invalid
// (ErrInvalidSCRAMCredential) or deletes a credential it does not have
// (ErrSCRAMCredentialNotFound) gets none of its changes: its error is in
// the map; the other users' changes are applied. An error (file not
// written) means nothing changed.
func (b *Broker) AlterSCRAMCredentials(_ context.Context, changes []SCRAMChange) (map[string]error, error) {
	if b.isClosed() {
		return nil, fmt.Errorf("log: alter SCRAM credentials: %w", ErrClosed)
	}
	return b.scram.alter(changes)
}
