package log

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/strata-log/strata/vfs"
)

// A standalone broker keeps its client quotas in quotas.json in its data
// dir, replaced whole on every change (a temp file fsynced, renamed over
// it, the directory fsynced) before the change is acknowledged:
//
//	{"version":1,"quotas":[{"user":"alice","clientId":"<default>",
//	  "quotas":{"producer_byte_rate":1048576}}]}
//
// A part absent from an entity is left out; "<default>" is the default
// user or client id (Kafka's name for it). A missing file is no quotas; a
// file that does not parse or holds an invalid quota stops the data dir
// from opening (ErrCorrupt).
const (
	quotasFile    = "quotas.json"
	quotasVersion = 1
	quotaDefault  = "<default>"
)

// quotaStore is a data dir's quotas: the set enforced now (read without a
// lock) and the file, written under mu.
type quotaStore struct {
	fs   vfs.FS
	path string
	mu   sync.Mutex // serializes changes
	set  atomic.Pointer[QuotaSet]
}

type quotasJSON struct {
	Version int               `json:"version"`
	Quotas  []quotaEntityJSON `json:"quotas"`
}

type quotaEntityJSON struct {
	User     *string            `json:"user,omitempty"`
	ClientID *string            `json:"clientId,omitempty"`
	Quotas   map[string]float64 `json:"quotas"`
}

func openQuotaStore(fs vfs.FS, dir string) (*quotaStore, error) {
	s := &quotaStore{fs: fs, path: filepath.Join(dir, quotasFile)}
	set, found, err := readMetaFile(fs, s.path, quotasFile, decodeQuotas)
	if err != nil {
		return nil, err
	}
	if !found {
		set = &QuotaSet{}
	}
	s.set.Store(set)
	return s, nil
}

func quotaNameOf(p *string) QuotaName {
	switch {
	case p == nil:
		return QuotaName{}
	case *p == quotaDefault:
		return QuotaDefault()
	}
	return QuotaNamed(*p)
}

func quotaNameJSON(n QuotaName) *string {
	if !n.In {
		return nil
	}
	s := n.String()
	return &s
}

func decodeQuotas(data []byte) (*QuotaSet, error) {
	var f quotasJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, err
	}
	if f.Version != quotasVersion {
		return nil, fmt.Errorf("unknown version %d", f.Version)
	}
	var as []QuotaAlteration
	for i, j := range f.Quotas {
		a := QuotaAlteration{Entity: QuotaEntity{User: quotaNameOf(j.User), ClientID: quotaNameOf(j.ClientID)}}
		for k, v := range j.Quotas {
			a.Ops = append(a.Ops, QuotaOp{Key: k, Value: v})
		}
		if err := a.Validate(); err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		as = append(as, a)
	}
	set, _ := (&QuotaSet{}).Alter(as)
	return set, nil
}

func encodeQuotas(s *QuotaSet) []byte {
	f := quotasJSON{Version: quotasVersion, Quotas: []quotaEntityJSON{}}
	for _, e := range s.Entities() {
		f.Quotas = append(f.Quotas, quotaEntityJSON{User: quotaNameJSON(e.User), ClientID: quotaNameJSON(e.ClientID), Quotas: s.Quotas(e)})
	}
	data, _ := json.Marshal(f) // strings and whole numbers only: cannot fail
	return append(data, '\n')
}

// alter applies the valid alterations, durably, and returns one error per
// alteration (ErrInvalidQuota for an invalid one, left out); an error if
// the file could not be written (nothing changes then).
func (s *quotaStore) alter(as []QuotaAlteration, validateOnly bool) ([]error, error) {
	errs := make([]error, len(as))
	var ok []QuotaAlteration
	for i, a := range as {
		if errs[i] = a.Validate(); errs[i] == nil {
			ok = append(ok, a)
		}
	}
	if validateOnly || len(ok) == 0 {
		return errs, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	set, changed := s.set.Load().Alter(ok)
	if !changed {
		return errs, nil
	}
	if err := vfs.WriteFileAtomic(s.fs, s.path, encodeQuotas(set)); err != nil {
		return nil, fmt.Errorf("log: write %s: %w", quotasFile, err)
	}
	s.set.Store(set)
	return errs, nil
}

// ClientQuotas is the set of client quotas the broker keeps
// (kafka.QuotaBackend).
func (b *Broker) ClientQuotas() *QuotaSet { return b.quotas.set.Load() }

// AlterClientQuotas applies alterations, in quotas.json before it returns
// (unless validateOnly): one error per alteration (ErrInvalidQuota for an
// invalid one, which is left out), or an error if the file could not be
// written (nothing changes then).
func (b *Broker) AlterClientQuotas(_ context.Context, as []QuotaAlteration, validateOnly bool) ([]error, error) {
	if b.isClosed() {
		return nil, fmt.Errorf("log: alter client quotas: %w", ErrClosed)
	}
	return b.quotas.alter(as, validateOnly)
}
