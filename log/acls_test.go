package log

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/vfs"
)

var (
	aclRead  = acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: "orders", PatternType: acl.PatternLiteral, Principal: "User:alice", Host: "*", Operation: acl.OpRead, Permission: acl.PermissionAllow}
	aclWrite = acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: "ord", PatternType: acl.PatternPrefixed, Principal: "User:bob", Host: "10.0.0.1", Operation: acl.OpWrite, Permission: acl.PermissionDeny}
	aclGroup = acl.Binding{ResourceType: acl.ResourceGroup, ResourceName: "*", PatternType: acl.PatternLiteral, Principal: "User:*", Host: "*", Operation: acl.OpAll, Permission: acl.PermissionAllow}
)

func TestBrokerACLsSurviveRestart(t *testing.T) {
	mem := vfs.NewMem()
	ctx := context.Background()
	b, err := Open("/data", Config{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	if b.ACLs().Len() != 0 {
		t.Fatalf("new data dir: %v", b.ACLs().Bindings())
	}
	errs, err := b.CreateACLs(ctx, []acl.Binding{aclRead, aclWrite, aclGroup, {}})
	if err != nil || errs[0] != nil || errs[1] != nil || errs[2] != nil || !errors.Is(errs[3], acl.ErrInvalidBinding) {
		t.Fatalf("CreateACLs: %v %v", errs, err)
	}
	bob := "User:bob"
	deleted, err := b.DeleteACLs(ctx, []acl.Filter{{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Principal: &bob, Operation: acl.OpAny, Permission: acl.PermissionAny}})
	if err != nil || !slices.Equal(deleted[0], []acl.Binding{aclWrite}) {
		t.Fatalf("DeleteACLs: %v %v", deleted, err)
	}
	if _, err := b.DeleteACLs(ctx, []acl.Filter{{}}); !errors.Is(err, acl.ErrInvalidFilter) {
		t.Fatalf("DeleteACLs of an invalid filter: %v", err)
	}
	want := acl.Must([]acl.Binding{aclRead, aclGroup}).Bindings()
	if got := b.ACLs().Bindings(); !slices.Equal(got, want) {
		t.Fatalf("ACLs %v, want %v", got, want)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateACLs(ctx, []acl.Binding{aclWrite}); !errors.Is(err, ErrClosed) {
		t.Fatalf("CreateACLs after Close: %v", err)
	}
	// A crash right after, too: everything acknowledged was synced.
	for _, fs := range []*vfs.MemFS{mem, mem.CrashClone()} {
		b, err := Open("/data", Config{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		if got := b.ACLs().Bindings(); !slices.Equal(got, want) {
			t.Fatalf("after restart: %v, want %v", got, want)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestACLFileCorrupt(t *testing.T) {
	for _, data := range []string{"", "{", `{"version":2,"acls":[]}`,
		`{"version":1,"acls":[{"resourceType":"TOPIC","resourceName":"t","patternType":"LITERAL","principal":"User:a","host":"*","operation":"FLY","permission":"ALLOW"}]}`,
		`{"version":1,"acls":[{"resourceType":"TOPIC","resourceName":"","patternType":"LITERAL","principal":"User:a","host":"*","operation":"READ","permission":"ALLOW"}]}`,
	} {
		mem := vfs.NewMem()
		if err := mem.MkdirAll("/data", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := vfs.WriteFileAtomic(mem, "/data/"+aclsFile, []byte(data)); err != nil {
			t.Fatal(err)
		}
		if _, err := openACLStore(mem, "/data"); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%q: %v, want ErrCorrupt", data, err)
		}
	}
}

// TestACLFileCrashAtEachOp crashes the file system at each operation of a
// change (only what was synced survives) and fails each operation in
// turn: the file reopens to the old set or the new one, never anything
// else, and to the new one once the change was acknowledged; a failed
// change leaves the set enforced unchanged.
func TestACLFileCrashAtEachOp(t *testing.T) {
	before := []acl.Binding{aclRead}
	after := acl.Must([]acl.Binding{aclRead, aclWrite}).Bindings()
	reopen := func(t *testing.T, fs vfs.FS) []acl.Binding {
		t.Helper()
		s, err := openACLStore(fs, "/data")
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		return s.set.Load().Bindings()
	}
	oldOrNew := func(got []acl.Binding) bool {
		return slices.Equal(got, before) || slices.Equal(got, after)
	}
	for k := 0; ; k++ {
		mem := vfs.NewMem()
		if err := mem.MkdirAll("/data", 0o755); err != nil {
			t.Fatal(err)
		}
		s, err := openACLStore(mem, "/data")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.create(before); err != nil {
			t.Fatal(err)
		}
		// Crash at the k-th operation (what survives is checked after),
		// and, in a second run, fail it.
		var crashed *vfs.MemFS
		n := 0
		s.fs = vfs.WithErrors(mem, func(vfs.Op, string) error {
			if n == k {
				crashed = mem.CrashClone()
			}
			n++
			return nil
		})
		if _, err := s.create([]acl.Binding{aclWrite}); err != nil {
			t.Fatal(err)
		}
		if crashed == nil {
			// k is past the last operation: every one was crashed at.
			if k < 4 {
				t.Fatalf("a change took only %d operations", k)
			}
			return
		}
		if got := reopen(t, crashed); !oldOrNew(got) {
			t.Fatalf("crash at op %d: %v", k, got)
		}
		if got := reopen(t, mem.CrashClone()); !slices.Equal(got, after) {
			t.Fatalf("crash after the change was acknowledged (op %d): %v", k, got)
		}

		mem = vfs.NewMem()
		if err := mem.MkdirAll("/data", 0o755); err != nil {
			t.Fatal(err)
		}
		s, _ = openACLStore(mem, "/data")
		if _, err := s.create(before); err != nil {
			t.Fatal(err)
		}
		s.fs = vfs.WithErrors(mem, vfs.FailAfter(k))
		_, err = s.create([]acl.Binding{aclWrite})
		if err == nil {
			t.Fatalf("op %d failed and the change succeeded", k)
		}
		if got := s.set.Load().Bindings(); !slices.Equal(got, before) {
			t.Fatalf("failed change (op %d) is enforced: %v", k, got)
		}
		if got := reopen(t, mem.CrashClone()); !oldOrNew(got) {
			t.Fatalf("failed change (op %d), crash: %v", k, got)
		}
	}
}

// FuzzDecodeACLs: acls.json, whatever its bytes, opens or fails with
// ErrCorrupt-worthy errors and never panics; what it decodes encodes back
// to the same set.
func FuzzDecodeACLs(f *testing.F) {
	f.Add(encodeACLs(acl.Must([]acl.Binding{aclRead, aclWrite, aclGroup})))
	f.Add([]byte(`{"version":1,"acls":[]}`))
	f.Add([]byte(`{"version":1,"acls":[{"resourceType":"CLUSTER"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := decodeACLs(data)
		if err != nil {
			return
		}
		again, err := decodeACLs(encodeACLs(set))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !slices.Equal(set.Bindings(), again.Bindings()) {
			t.Fatalf("round trip: %v != %v", set.Bindings(), again.Bindings())
		}
	})
}
