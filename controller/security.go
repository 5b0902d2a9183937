package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/log"
)

// Security metadata: the ACL bindings, the SCRAM credentials of users
// added at runtime and the client quotas of a cluster live in the metadata
// image, changed only by committed records (KRaft's AclControlManager,
// ScramControlManager and ClientQuotaControlManager), so every member
// enforces the same set and a new or restarted member learns it from the
// log or a snapshot. A change sent to any member goes to the active
// controller (CreateACLs, DeleteACLs, AlterSCRAMCredentials,
// AlterClientQuotas), which decides it against its image and commits its
// records; describing reads a member's own image.
//
// The records follow Kafka's AccessControlEntryRecord,
// RemoveAccessControlEntryRecord, UserScramCredentialRecord,
// RemoveUserScramCredentialRecord and ClientQuotaRecord, with two
// differences: an ACL record holds the bindings of one request (a
// snapshot holds every binding in one), since a binding is its own
// identity here (a set holds it once) where Kafka gives each a UUID; and a
// SCRAM record carries the salt, iterations and keys as Kafka's does.

// The security record types: far above the others so that record types
// added elsewhere meanwhile do not collide.
const (
	typeACL         recordType = 64 // aclRecord
	typeRemoveACL   recordType = 65 // removeACLRecord
	typeSCRAM       recordType = 66 // scramRecord
	typeRemoveSCRAM recordType = 67 // removeSCRAMRecord
	typeQuota       recordType = 68 // quotaRecord
)

// aclRecord: bindings are added; each is valid and not yet in the set.
type aclRecord struct{ Bindings []acl.Binding }

// removeACLRecord: bindings, each in the set, are removed.
type removeACLRecord struct{ Bindings []acl.Binding }

// scramRecord: User's credential of Mechanism is set (Kafka's
// UserScramCredentialRecord).
type scramRecord struct {
	User, Mechanism string
	Credential      log.SCRAMCredential
}

// removeSCRAMRecord: User's credential of Mechanism, which it has, is
// deleted.
type removeSCRAMRecord struct{ User, Mechanism string }

// quotaRecord: Entity's quota Key is set to Value, or removed (Kafka's
// ClientQuotaRecord).
type quotaRecord struct {
	Entity log.QuotaEntity
	Key    string
	Value  float64
	Remove bool
}

func (aclRecord) recordType() recordType         { return typeACL }
func (removeACLRecord) recordType() recordType   { return typeRemoveACL }
func (scramRecord) recordType() recordType       { return typeSCRAM }
func (removeSCRAMRecord) recordType() recordType { return typeRemoveSCRAM }
func (quotaRecord) recordType() recordType       { return typeQuota }

// securityState is an image's security metadata. The ACL and quota sets
// are immutable; the SCRAM maps are copied on write (owner, as topicState).
type securityState struct {
	owner  *ownerToken
	acls   *acl.Set
	scram  map[string]map[string]log.SCRAMCredential // user → mechanism → credential
	quotas *log.QuotaSet
}

// mutSecurity returns the image's security state, copied first if the
// image does not own it.
func (img *Image) mutSecurity() *securityState {
	switch {
	case img.sec == nil:
		img.sec = &securityState{owner: img.owner, acls: &acl.Set{}, scram: map[string]map[string]log.SCRAMCredential{}, quotas: &log.QuotaSet{}}
	case img.sec.owner != img.owner:
		c := *img.sec
		c.owner = img.owner
		c.scram = maps.Clone(c.scram)
		img.sec = &c
	}
	return img.sec
}

// applySecurity applies one security record (see Image.apply).
func (img *Image) applySecurity(r record) error {
	switch r := r.(type) {
	case aclRecord:
		cur := img.ACLs()
		for _, b := range r.Bindings {
			if err := b.Validate(); err != nil {
				return fmt.Errorf("%w: %v", errInapplicable, err)
			}
		}
		next, _ := cur.Add(r.Bindings)
		if len(r.Bindings) == 0 || next.Len() != cur.Len()+len(r.Bindings) {
			return fmt.Errorf("%w: %d ACLs, some present already or repeated", errInapplicable, len(r.Bindings))
		}
		img.mutSecurity().acls = next
	case removeACLRecord:
		cur := img.ACLs()
		fs := make([]acl.Filter, len(r.Bindings))
		for i, b := range r.Bindings {
			fs[i] = exactFilter(b)
		}
		next, deleted := cur.Delete(fs)
		for i, d := range deleted {
			if len(d) != 1 {
				return fmt.Errorf("%w: remove ACL %v, which is not there", errInapplicable, r.Bindings[i])
			}
		}
		if next.Len() != cur.Len()-len(r.Bindings) {
			return fmt.Errorf("%w: remove ACLs: one repeated", errInapplicable)
		}
		img.mutSecurity().acls = next
	case scramRecord:
		c := r.Credential
		if err := validSCRAM(r.User, r.Mechanism, &c); err != nil {
			return fmt.Errorf("%w: %v", errInapplicable, err)
		}
		sec := img.mutSecurity()
		mechs := maps.Clone(sec.scram[r.User])
		if mechs == nil {
			mechs = map[string]log.SCRAMCredential{}
		}
		mechs[r.Mechanism] = cloneSCRAM(c)
		sec.scram[r.User] = mechs
	case removeSCRAMRecord:
		if _, ok := img.SCRAMCredential(r.Mechanism, r.User); !ok {
			return fmt.Errorf("%w: remove %s credential of %q, which it does not have", errInapplicable, r.Mechanism, r.User)
		}
		sec := img.mutSecurity()
		mechs := maps.Clone(sec.scram[r.User])
		delete(mechs, r.Mechanism)
		if len(mechs) == 0 {
			delete(sec.scram, r.User)
		} else {
			sec.scram[r.User] = mechs
		}
	case quotaRecord:
		a := log.QuotaAlteration{Entity: r.Entity, Ops: []log.QuotaOp{{Key: r.Key, Value: r.Value, Remove: r.Remove}}}
		if err := a.Validate(); err != nil {
			return fmt.Errorf("%w: %v", errInapplicable, err)
		}
		next, changed := img.ClientQuotas().Alter([]log.QuotaAlteration{a})
		if !changed {
			return fmt.Errorf("%w: quota %s of %s changes nothing", errInapplicable, r.Key, r.Entity)
		}
		img.mutSecurity().quotas = next
	default:
		return fmt.Errorf("%w: record type %T", errInapplicable, r)
	}
	return nil
}

// exactFilter matches b and nothing else.
func exactFilter(b acl.Binding) acl.Filter {
	return acl.Filter{
		ResourceType: b.ResourceType, ResourceName: &b.ResourceName, PatternType: b.PatternType,
		Principal: &b.Principal, Host: &b.Host, Operation: b.Operation, Permission: b.Permission,
	}
}

// ACLs is the set of ACL bindings; never nil, not to be changed.
func (img *Image) ACLs() *acl.Set {
	if img.sec == nil {
		return &acl.Set{}
	}
	return img.sec.acls
}

// SCRAMCredential returns user's credential of mechanism ("SCRAM-SHA-256",
// "SCRAM-SHA-512"), false if none. Its slices must not be modified.
func (img *Image) SCRAMCredential(mechanism, user string) (log.SCRAMCredential, bool) {
	if img.sec == nil {
		return log.SCRAMCredential{}, false
	}
	c, ok := img.sec.scram[user][mechanism]
	return c, ok
}

// SCRAMUsers lists the users with SCRAM credentials, sorted, with their
// mechanisms (sorted) and iteration counts.
func (img *Image) SCRAMUsers() []log.SCRAMUser {
	if img.sec == nil {
		return []log.SCRAMUser{}
	}
	out := make([]log.SCRAMUser, 0, len(img.sec.scram))
	for u, mechs := range img.sec.scram {
		su := log.SCRAMUser{Name: u}
		for m, c := range mechs {
			su.Credentials = append(su.Credentials, log.SCRAMInfo{Mechanism: m, Iterations: c.Iterations})
		}
		sort.Slice(su.Credentials, func(i, j int) bool { return su.Credentials[i].Mechanism < su.Credentials[j].Mechanism })
		out = append(out, su)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ClientQuotas is the set of client quotas; never nil, not to be changed.
func (img *Image) ClientQuotas() *log.QuotaSet {
	if img.sec == nil {
		return &log.QuotaSet{}
	}
	return img.sec.quotas
}

// securityRecords are the records that rebuild img's security metadata
// (for a snapshot): every binding in one record, then each credential,
// then each quota.
func securityRecords(img *Image) []record {
	if img.sec == nil {
		return nil
	}
	var recs []record
	if bs := img.sec.acls.Bindings(); len(bs) > 0 {
		recs = append(recs, aclRecord{Bindings: bs})
	}
	for _, u := range img.SCRAMUsers() {
		for _, ci := range u.Credentials {
			recs = append(recs, scramRecord{User: u.Name, Mechanism: ci.Mechanism, Credential: img.sec.scram[u.Name][ci.Mechanism]})
		}
	}
	q := img.sec.quotas
	for _, e := range q.Entities() {
		vals := q.Quotas(e)
		keys := make([]string, 0, len(vals))
		for k := range vals {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			recs = append(recs, quotaRecord{Entity: e, Key: k, Value: vals[k]})
		}
	}
	return recs
}

// validSCRAM checks one credential change of user for mechanism (c nil: a
// deletion), as a standalone broker does.
func validSCRAM(user, mechanism string, c *log.SCRAMCredential) error {
	switch {
	case user == "":
		return fmt.Errorf("%w: empty user name", log.ErrInvalidSCRAMCredential)
	case mechanism != log.SCRAMSHA256 && mechanism != log.SCRAMSHA512:
		return fmt.Errorf("%w: unknown mechanism %q", log.ErrInvalidSCRAMCredential, mechanism)
	case c == nil:
		return nil
	case c.Iterations < log.MinSCRAMIterations || c.Iterations > log.MaxSCRAMIterations:
		return fmt.Errorf("%w: %d iterations, not in [%d, %d]", log.ErrInvalidSCRAMCredential, c.Iterations, log.MinSCRAMIterations, log.MaxSCRAMIterations)
	case len(c.Salt) == 0 || len(c.StoredKey) == 0 || len(c.ServerKey) == 0:
		return fmt.Errorf("%w: empty salt or key for %q", log.ErrInvalidSCRAMCredential, user)
	}
	return nil
}

func cloneSCRAM(c log.SCRAMCredential) log.SCRAMCredential {
	c.Salt = append([]byte(nil), c.Salt...)
	c.StoredKey = append([]byte(nil), c.StoredKey...)
	c.ServerKey = append([]byte(nil), c.ServerKey...)
	return c
}

// The operations of this file, forwarded to the active controller.
const (
	opCreateACLs  = "create_acls"
	opDeleteACLs  = "delete_acls"
	opAlterSCRAM  = "alter_scram"
	opAlterQuotas = "alter_client_quotas"
)

// securityOp is the request of a security operation.
type securityOp struct {
	ACLs    []acl.Binding         `json:"acls,omitzero"`
	Filters []acl.Filter          `json:"filters,omitzero"`
	SCRAM   []log.SCRAMChange     `json:"scram,omitzero"`
	Quotas  []log.QuotaAlteration `json:"quotas,omitzero"`
}

// securityOutcome is what a security operation yields: per binding or
// alteration an error (nil: none), per filter the bindings deleted, per
// user an error.
type securityOutcome struct {
	Errors     []itemError          `json:"errors,omitzero"`
	Deleted    [][]acl.Binding      `json:"deleted,omitzero"`
	UserErrors map[string]itemError `json:"user_errors,omitzero"`
}

// itemError is one item's error on the wire: a code of itemCodes and the
// message; the zero value is no error.
type itemError struct {
	Code    string `json:"code,omitzero"`
	Message string `json:"message,omitzero"`
}

var itemCodes = []wireErrorCode{
	{"invalid_binding", acl.ErrInvalidBinding},
	{"invalid_filter", acl.ErrInvalidFilter},
	{"invalid_scram", log.ErrInvalidSCRAMCredential},
	{"scram_not_found", log.ErrSCRAMCredentialNotFound},
	{"invalid_quota", log.ErrInvalidQuota},
}

func toItemError(err error) itemError {
	if err == nil {
		return itemError{}
	}
	for _, c := range itemCodes {
		if errors.Is(err, c.err) {
			return itemError{Code: c.code, Message: err.Error()}
		}
	}
	return itemError{Code: "invalid_request", Message: err.Error()}
}

func (e itemError) err() error {
	if e.Code == "" {
		return nil
	}
	for _, c := range itemCodes {
		if c.code == e.Code {
			return &remoteError{msg: e.Message, sentinel: c.err}
		}
	}
	return &remoteError{msg: e.Message, sentinel: ErrInvalidRequest}
}

// decideSecurity decides a security operation against img.
func decideSecurity(img *Image, o op) ([]record, outcome, error) {
	var recs []record
	var res securityOutcome
	var err error
	switch o.Kind {
	case opCreateACLs:
		recs, res.Errors = decideCreateACLs(img, o.Security.ACLs)
	case opDeleteACLs:
		recs, res.Deleted, err = decideDeleteACLs(img, o.Security.Filters)
	case opAlterSCRAM:
		recs, res.UserErrors = decideAlterSCRAM(img, o.Security.SCRAM)
	case opAlterQuotas:
		recs, res.Errors = decideAlterQuotas(img, o.Security.Quotas)
	default:
		err = fmt.Errorf("%w: unknown operation %q", ErrInvalidRequest, o.Kind)
	}
	if err != nil {
		return nil, outcome{}, err
	}
	return recs, outcome{Security: res}, nil
}

// decideCreateACLs adds the valid bindings not in the set yet, in one
// record; an invalid one gets its error (acl.ErrInvalidBinding), one
// already there none, as Kafka answers.
func decideCreateACLs(img *Image, bs []acl.Binding) ([]record, []itemError) {
	errs := make([]itemError, len(bs))
	cur := img.ACLs()
	seen := map[acl.Binding]bool{}
	var add []acl.Binding
	for i, b := range bs {
		if err := b.Validate(); err != nil {
			errs[i] = toItemError(err)
			continue
		}
		if seen[b] || len(cur.Match(exactFilter(b))) > 0 {
			continue
		}
		seen[b] = true
		add = append(add, b)
	}
	if len(add) == 0 {
		return nil, errs
	}
	return []record{aclRecord{Bindings: add}}, errs
}

// decideDeleteACLs removes the bindings any filter matches, in one record,
// and returns them per filter. An invalid filter refuses the whole
// request (acl.ErrInvalidFilter), as a standalone broker does.
func decideDeleteACLs(img *Image, fs []acl.Filter) ([]record, [][]acl.Binding, error) {
	for _, f := range fs {
		if err := f.Validate(); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
		}
	}
	next, deleted := img.ACLs().Delete(fs)
	if next.Len() == img.ACLs().Len() {
		return nil, deleted, nil
	}
	seen := map[acl.Binding]bool{}
	var gone []acl.Binding
	for _, d := range deleted {
		for _, b := range d {
			if !seen[b] {
				seen[b] = true
				gone = append(gone, b)
			}
		}
	}
	return []record{removeACLRecord{Bindings: gone}}, deleted, nil
}

// decideAlterSCRAM applies changes per user, as a standalone broker does:
// a user one of whose changes is invalid or deletes a credential it does
// not have gets none of its changes, and its error; the other users'
// changes become records.
func decideAlterSCRAM(img *Image, changes []log.SCRAMChange) ([]record, map[string]itemError) {
	var order []string
	byUser := map[string][]log.SCRAMChange{}
	for _, ch := range changes {
		if _, ok := byUser[ch.User]; !ok {
			order = append(order, ch.User)
		}
		byUser[ch.User] = append(byUser[ch.User], ch)
	}
	failed := map[string]itemError{}
	var recs []record
	for _, u := range order {
		have := map[string]bool{}
		for _, m := range []string{log.SCRAMSHA256, log.SCRAMSHA512} {
			_, have[m] = img.SCRAMCredential(m, u)
		}
		var urecs []record
		var err error
		for _, ch := range byUser[u] {
			if err = validSCRAM(ch.User, ch.Mechanism, ch.Credential); err != nil {
				break
			}
			if ch.Credential == nil {
				if !have[ch.Mechanism] {
					err = fmt.Errorf("%w: user %q has no %s credential", log.ErrSCRAMCredentialNotFound, u, ch.Mechanism)
					break
				}
				have[ch.Mechanism] = false
				urecs = append(urecs, removeSCRAMRecord{User: u, Mechanism: ch.Mechanism})
				continue
			}
			have[ch.Mechanism] = true
			urecs = append(urecs, scramRecord{User: u, Mechanism: ch.Mechanism, Credential: cloneSCRAM(*ch.Credential)})
		}
		if err != nil {
			failed[u] = toItemError(err)
			continue
		}
		recs = append(recs, urecs...)
	}
	return recs, failed
}

// decideAlterQuotas turns each valid alteration into one record per key it
// changes (setting a key to its value, or removing one not set, changes
// nothing); an invalid one gets its error (log.ErrInvalidQuota).
func decideAlterQuotas(img *Image, as []log.QuotaAlteration) ([]record, []itemError) {
	errs := make([]itemError, len(as))
	cur := img.ClientQuotas()
	var recs []record
	for i, a := range as {
		if err := a.Validate(); err != nil {
			errs[i] = toItemError(err)
			continue
		}
		for _, op := range a.Ops {
			old, had := cur.Quotas(a.Entity)[op.Key]
			if op.Remove && !had || !op.Remove && had && old == op.Value {
				continue
			}
			recs = append(recs, quotaRecord{Entity: a.Entity, Key: op.Key, Value: op.Value, Remove: op.Remove})
			cur, _ = cur.Alter([]log.QuotaAlteration{{Entity: a.Entity, Ops: []log.QuotaOp{op}}})
		}
	}
	return recs, errs
}

// CreateACLs adds bindings to the cluster's ACLs through the active
// controller: one error per binding (acl.ErrInvalidBinding; nil for one
// added or there already), and the metadata version the change committed
// at (0: nothing to change).
func (c *Controller) CreateACLs(ctx context.Context, bs []acl.Binding) ([]error, uint64, error) {
	out, err := c.call(ctx, op{Kind: opCreateACLs, Security: securityOp{ACLs: bs}})
	if err != nil {
		return nil, 0, err
	}
	errs := make([]error, len(bs))
	for i := range errs {
		if i < len(out.Security.Errors) {
			errs[i] = out.Security.Errors[i].err()
		}
	}
	return errs, out.Version, nil
}

// DeleteACLs removes the bindings each filter matches through the active
// controller and returns them per filter, with the version the change
// committed at (0: none matched).
func (c *Controller) DeleteACLs(ctx context.Context, fs []acl.Filter) ([][]acl.Binding, uint64, error) {
	out, err := c.call(ctx, op{Kind: opDeleteACLs, Security: securityOp{Filters: fs}})
	if err != nil {
		return nil, 0, err
	}
	deleted := make([][]acl.Binding, len(fs))
	copy(deleted, out.Security.Deleted)
	return deleted, out.Version, nil
}

// AlterSCRAMCredentials applies SCRAM credential changes through the
// active controller: per user an error (log.ErrInvalidSCRAMCredential,
// log.ErrSCRAMCredentialNotFound) and none of that user's changes; the
// others are applied, committed at the version returned.
func (c *Controller) AlterSCRAMCredentials(ctx context.Context, changes []log.SCRAMChange) (map[string]error, uint64, error) {
	out, err := c.call(ctx, op{Kind: opAlterSCRAM, Security: securityOp{SCRAM: changes}})
	if err != nil {
		return nil, 0, err
	}
	failed := map[string]error{}
	for u, e := range out.Security.UserErrors {
		if err := e.err(); err != nil {
			failed[u] = err
		}
	}
	return failed, out.Version, nil
}

// AlterClientQuotas applies quota alterations through the active
// controller: one error per alteration (log.ErrInvalidQuota, which
// changes nothing), and the version the changes committed at.
func (c *Controller) AlterClientQuotas(ctx context.Context, as []log.QuotaAlteration) ([]error, uint64, error) {
	out, err := c.call(ctx, op{Kind: opAlterQuotas, Security: securityOp{Quotas: as}})
	if err != nil {
		return nil, 0, err
	}
	errs := make([]error, len(as))
	for i := range errs {
		if i < len(out.Security.Errors) {
			errs[i] = out.Security.Errors[i].err()
		}
	}
	return errs, out.Version, nil
}
