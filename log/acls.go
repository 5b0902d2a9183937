package log

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/vfs"
)

// A standalone broker keeps its ACLs (package acl) in acls.json in its
// data dir, replaced whole on every change (a temp file fsynced, renamed
// over it, the directory fsynced) before the change is acknowledged:
//
//	{"version":1,"acls":[{"resourceType":"TOPIC","resourceName":"orders",
//	  "patternType":"LITERAL","principal":"User:alice","host":"*",
//	  "operation":"READ","permission":"ALLOW"}]}
//
// A missing file is no ACLs; a file that does not parse or holds an
// invalid binding stops the data dir from opening (ErrCorrupt) rather
// than enforce fewer ACLs than were acknowledged.
const (
	aclsFile    = "acls.json"
	aclsVersion = 1
)

// aclStore is a data dir's ACLs: the set enforced now (read without a
// lock) and the file, written under mu.
type aclStore struct {
	fs   vfs.FS
	path string
	mu   sync.Mutex // serializes changes
	set  atomic.Pointer[acl.Set]
}

type aclsJSON struct {
	Version int           `json:"version"`
	ACLs    []bindingJSON `json:"acls"`
}

type bindingJSON struct {
	ResourceType string `json:"resourceType"`
	ResourceName string `json:"resourceName"`
	PatternType  string `json:"patternType"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
}

// openACLStore reads dir's acls.json.
func openACLStore(fs vfs.FS, dir string) (*aclStore, error) {
	s := &aclStore{fs: fs, path: filepath.Join(dir, aclsFile)}
	set, found, err := readMetaFile(fs, s.path, aclsFile, decodeACLs)
	if err != nil {
		return nil, err
	}
	if !found {
		set = &acl.Set{}
	}
	s.set.Store(set)
	return s, nil
}

func decodeACLs(data []byte) (*acl.Set, error) {
	var f aclsJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, err
	}
	if f.Version != aclsVersion {
		return nil, fmt.Errorf("unknown version %d", f.Version)
	}
	bs := make([]acl.Binding, len(f.ACLs))
	for i, j := range f.ACLs {
		var ok [4]bool
		b := &bs[i]
		b.ResourceType, ok[0] = acl.ParseResourceType(j.ResourceType)
		b.PatternType, ok[1] = acl.ParsePatternType(j.PatternType)
		b.Operation, ok[2] = acl.ParseOperation(j.Operation)
		b.Permission, ok[3] = acl.ParsePermission(j.Permission)
		if ok != [4]bool{true, true, true, true} {
			return nil, fmt.Errorf("binding %d: unknown name in %+v", i, j)
		}
		b.ResourceName, b.Principal, b.Host = j.ResourceName, j.Principal, j.Host
	}
	return acl.NewSet(bs)
}

func encodeACLs(s *acl.Set) []byte {
	f := aclsJSON{Version: aclsVersion, ACLs: []bindingJSON{}}
	for _, b := range s.Bindings() {
		f.ACLs = append(f.ACLs, bindingJSON{
			ResourceType: b.ResourceType.String(), ResourceName: b.ResourceName,
			PatternType: b.PatternType.String(), Principal: b.Principal, Host: b.Host,
			Operation: b.Operation.String(), Permission: b.Permission.String(),
		})
	}
	data, _ := json.Marshal(f) // strings and ints only: cannot fail
	return append(data, '\n')
}

// change replaces the set with next(current), durably; nothing changes
// if writing fails.
func (s *aclStore) change(next func(*acl.Set) (*acl.Set, bool)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.set.Load()
	set, changed := next(cur)
	if !changed {
		return nil
	}
	if err := vfs.WriteFileAtomic(s.fs, s.path, encodeACLs(set)); err != nil {
		return fmt.Errorf("log: write %s: %w", aclsFile, err)
	}
	s.set.Store(set)
	return nil
}

func (s *aclStore) create(bs []acl.Binding) ([]error, error) {
	var errs []error
	err := s.change(func(cur *acl.Set) (*acl.Set, bool) {
		var set *acl.Set
		set, errs = cur.Add(bs)
		return set, set.Len() != cur.Len()
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}

func (s *aclStore) delete(fs []acl.Filter) ([][]acl.Binding, error) {
	var deleted [][]acl.Binding
	err := s.change(func(cur *acl.Set) (*acl.Set, bool) {
		var set *acl.Set
		set, deleted = cur.Delete(fs)
		return set, set.Len() != cur.Len()
	})
	if err != nil {
		return nil, err
	}
	return deleted, nil
}

func (b *Broker) isClosed() bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.closed
}

// ACLs is the set of ACLs the broker keeps (kafka.ACLBackend).
func (b *Broker) ACLs() *acl.Set { return b.acls.set.Load() }

// CreateACLs adds bindings, in acls.json before it returns: one error per
// binding (acl.ErrInvalidBinding for an invalid one, which is left out),
// or an error if the file could not be written (nothing is added then).
func (b *Broker) CreateACLs(_ context.Context, bs []acl.Binding) ([]error, error) {
	if b.isClosed() {
		return nil, fmt.Errorf("log: create acls: %w", ErrClosed)
	}
	return b.acls.create(bs)
}

// DeleteACLs removes the bindings each filter matches, from acls.json
// before it returns, and returns them per filter; an error if the file
// could not be written (nothing is removed then).
func (b *Broker) DeleteACLs(_ context.Context, fs []acl.Filter) ([][]acl.Binding, error) {
	if b.isClosed() {
		return nil, fmt.Errorf("log: delete acls: %w", ErrClosed)
	}
	for _, f := range fs {
		if err := f.Validate(); err != nil {
			return nil, err
		}
	}
	return b.acls.delete(fs)
}
