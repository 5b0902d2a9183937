package log

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/strata-log/strata/vfs"
)

func scramCred(b byte, iterations int) *SCRAMCredential {
	return &SCRAMCredential{Salt: []byte{b, 1}, Iterations: iterations, StoredKey: []byte{b, 2}, ServerKey: []byte{b, 3}}
}

func TestBrokerSCRAMSurvivesRestart(t *testing.T) {
	mem := vfs.NewMem()
	ctx := context.Background()
	b, err := Open("/data", Config{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.SCRAMCredential(SCRAMSHA256, "alice"); ok || len(b.SCRAMUsers()) != 0 {
		t.Fatalf("new data dir has users: %v", b.SCRAMUsers())
	}
	failed, err := b.AlterSCRAMCredentials(ctx, []SCRAMChange{
		{User: "alice", Mechanism: SCRAMSHA256, Credential: scramCred(1, 8192)},
		{User: "alice", Mechanism: SCRAMSHA512, Credential: scramCred(2, 4096)},
		{User: "bob", Mechanism: SCRAMSHA256, Credential: scramCred(3, 4096)},
		{User: "carol", Mechanism: SCRAMSHA256, Credential: scramCred(4, 4096)},
		{User: "carol", Mechanism: SCRAMSHA512}, // carol has none: nothing of carol's
		{User: "dave", Mechanism: SCRAMSHA256, Credential: scramCred(5, 4095)},
		{User: "erin", Mechanism: "SCRAM-SHA-1", Credential: scramCred(6, 4096)},
	})
	if err != nil || len(failed) != 3 || !errors.Is(failed["carol"], ErrSCRAMCredentialNotFound) ||
		!errors.Is(failed["dave"], ErrInvalidSCRAMCredential) || !errors.Is(failed["erin"], ErrInvalidSCRAMCredential) {
		t.Fatalf("AlterSCRAMCredentials: %v %v", failed, err)
	}
	// bob's only credential deleted: bob is gone.
	if failed, err := b.AlterSCRAMCredentials(ctx, []SCRAMChange{{User: "bob", Mechanism: SCRAMSHA256}}); err != nil || len(failed) != 0 {
		t.Fatalf("delete bob: %v %v", failed, err)
	}
	want := []SCRAMUser{{Name: "alice", Credentials: []SCRAMInfo{{SCRAMSHA256, 8192}, {SCRAMSHA512, 4096}}}}
	check := func(b *Broker, when string) {
		t.Helper()
		if got := b.SCRAMUsers(); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: users %+v, want %+v", when, got, want)
		}
		c, ok := b.SCRAMCredential(SCRAMSHA256, "alice")
		if !ok || !reflect.DeepEqual(c, *scramCred(1, 8192)) {
			t.Fatalf("%s: alice's credential %+v %v", when, c, ok)
		}
		for _, u := range []string{"bob", "carol", "dave"} {
			if _, ok := b.SCRAMCredential(SCRAMSHA256, u); ok {
				t.Fatalf("%s: %s has a credential", when, u)
			}
		}
	}
	check(b, "before restart")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AlterSCRAMCredentials(ctx, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("AlterSCRAMCredentials after Close: %v", err)
	}
	for _, fs := range []*vfs.MemFS{mem, mem.CrashClone()} {
		b, err := Open("/data", Config{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		check(b, "after restart")
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSCRAMFileCorrupt(t *testing.T) {
	for _, data := range []string{"", "{", `{"version":2,"users":{}}`,
		`{"version":1,"users":{"a":{}}}`,
		`{"version":1,"users":{"a":{"SCRAM-SHA-1":{"salt":"AQ==","iterations":4096,"storedKey":"AQ==","serverKey":"AQ=="}}}}`,
		`{"version":1,"users":{"a":{"SCRAM-SHA-256":{"salt":"AQ==","iterations":10,"storedKey":"AQ==","serverKey":"AQ=="}}}}`,
		`{"version":1,"users":{"a":{"SCRAM-SHA-256":{"salt":"","iterations":4096,"storedKey":"AQ==","serverKey":"AQ=="}}}}`,
		`{"version":1,"users":{"":{"SCRAM-SHA-256":{"salt":"AQ==","iterations":4096,"storedKey":"AQ==","serverKey":"AQ=="}}}}`,
	} {
		mem := vfs.NewMem()
		if err := mem.MkdirAll("/data", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := vfs.WriteFileAtomic(mem, "/data/"+scramFile, []byte(data)); err != nil {
			t.Fatal(err)
		}
		if _, err := openSCRAMStore(mem, "/data"); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%q: %v, want ErrCorrupt", data, err)
		}
	}
}

// TestSCRAMFileCrashAtEachOp crashes the file system at each operation of
// a change (only what was synced survives) and fails each operation in
// turn: the file reopens to the old users or the new ones, never anything
// else, and to the new ones once the change was acknowledged; a failed
// change leaves the users logging in unchanged.
func TestSCRAMFileCrashAtEachOp(t *testing.T) {
	before := []SCRAMChange{{User: "alice", Mechanism: SCRAMSHA256, Credential: scramCred(1, 4096)}}
	change := []SCRAMChange{
		{User: "alice", Mechanism: SCRAMSHA256},
		{User: "bob", Mechanism: SCRAMSHA512, Credential: scramCred(2, 4096)},
	}
	oldUsers := scramUsers{"alice": {SCRAMSHA256: *scramCred(1, 4096)}}
	newUsers := scramUsers{"bob": {SCRAMSHA512: *scramCred(2, 4096)}}
	reopen := func(t *testing.T, fs vfs.FS) scramUsers {
		t.Helper()
		s, err := openSCRAMStore(fs, "/data")
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		return *s.users.Load()
	}
	fresh := func(t *testing.T) (*vfs.MemFS, *scramStore) {
		mem := vfs.NewMem()
		if err := mem.MkdirAll("/data", 0o755); err != nil {
			t.Fatal(err)
		}
		s, err := openSCRAMStore(mem, "/data")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.alter(before); err != nil {
			t.Fatal(err)
		}
		return mem, s
	}
	oldOrNew := func(got scramUsers) bool {
		return reflect.DeepEqual(got, oldUsers) || reflect.DeepEqual(got, newUsers)
	}
	for k := 0; ; k++ {
		mem, s := fresh(t)
		var crashed *vfs.MemFS
		n := 0
		s.fs = vfs.WithErrors(mem, func(vfs.Op, string) error {
			if n == k {
				crashed = mem.CrashClone()
			}
			n++
			return nil
		})
		if failed, err := s.alter(change); err != nil || len(failed) != 0 {
			t.Fatal(failed, err)
		}
		if crashed == nil {
			if k < 4 {
				t.Fatalf("a change took only %d operations", k)
			}
			return
		}
		if got := reopen(t, crashed); !oldOrNew(got) {
			t.Fatalf("crash at op %d: %v", k, got)
		}
		if got := reopen(t, mem.CrashClone()); !reflect.DeepEqual(got, newUsers) {
			t.Fatalf("crash after the change was acknowledged (op %d): %v", k, got)
		}

		mem, s = fresh(t)
		s.fs = vfs.WithErrors(mem, vfs.FailAfter(k))
		if _, err := s.alter(change); err == nil {
			t.Fatalf("op %d failed and the change succeeded", k)
		}
		if _, ok := s.credential(SCRAMSHA256, "alice"); !ok {
			t.Fatalf("failed change (op %d) removed alice", k)
		}
		if _, ok := s.credential(SCRAMSHA512, "bob"); ok {
			t.Fatalf("failed change (op %d) added bob", k)
		}
		if got := reopen(t, mem.CrashClone()); !oldOrNew(got) {
			t.Fatalf("failed change (op %d), crash: %v", k, got)
		}
	}
}

// FuzzDecodeSCRAM: scram.json, whatever its bytes, decodes or fails and
// never panics; what it decodes encodes back to the same users.
func FuzzDecodeSCRAM(f *testing.F) {
	f.Add(encodeSCRAM(scramUsers{"alice": {SCRAMSHA256: *scramCred(1, 4096), SCRAMSHA512: *scramCred(2, 8192)}}))
	f.Add([]byte(`{"version":1,"users":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		users, err := decodeSCRAM(data)
		if err != nil {
			return
		}
		again, err := decodeSCRAM(encodeSCRAM(users))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(users, again) {
			t.Fatalf("round trip: %v != %v", users, again)
		}
	})
}
