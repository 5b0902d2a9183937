package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/log"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The client quota APIs (KIP-546), served when the backend keeps quotas
// (QuotaBackend). With Config.Authorizer, DescribeClientQuotas needs
// DescribeConfigs on the cluster and AlterClientQuotas AlterConfigs, as
// in Kafka.
const (
	describeClientQuotasKey int16 = 48
	alterClientQuotasKey    int16 = 49
)

// quotaAPIs: v1 is flexible; both versions are Kafka 4's.
var quotaAPIs = []api{
	{key: describeClientQuotasKey, min: 0, max: 1, handle: handleDescribeClientQuotas},
	{key: alterClientQuotasKey, min: 0, max: 1, handle: handleAlterClientQuotas},
}

// errQuotaEntity is an entity or filter Kafka answers INVALID_REQUEST.
var errQuotaEntity = fmt.Errorf("%w: entity", log.ErrInvalidQuota)

// quotaEntityIP is Kafka's entity type of connection-rate quotas, which
// Strata does not serve.
const quotaEntityIP = "ip"

// authorizeClientQuotas: DescribeConfigs on the cluster to describe
// quotas, AlterConfigs to alter them.
func authorizeClientQuotas(ctx context.Context, c *conn, req kmsg.Request, next handler) reply {
	op := acl.OpAlterConfigs
	if _, ok := req.(*kmsg.DescribeClientQuotasRequest); ok {
		op = acl.OpDescribeConfigs
	}
	if c.allowed(op, acl.Cluster()) {
		return next(ctx, c, req)
	}
	msg := kmsg.StringPtr("not authorized on the cluster")
	switch req := req.(type) {
	case *kmsg.DescribeClientQuotasRequest:
		resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
		resp.ErrorCode, resp.ErrorMessage = errClusterAuthorizationFailed, msg
		return reply{resp: resp}
	case *kmsg.AlterClientQuotasRequest:
		resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
		for _, e := range req.Entries {
			r := kmsg.NewAlterClientQuotasResponseEntry()
			r.ErrorCode, r.ErrorMessage = errClusterAuthorizationFailed, msg
			r.Entity = alterEntityEcho(e.Entity)
			resp.Entries = append(resp.Entries, r)
		}
		return reply{resp: resp}
	}
	return reply{none: true, closeAfter: true}
}

// quotaPart is a part of an entity, from its wire name (nil: the default).
func quotaPart(name *string) log.QuotaName {
	if name == nil {
		return log.QuotaDefault()
	}
	return log.QuotaNamed(*name)
}

// quotaEntityOf reads an AlterClientQuotas entity: user and/or client-id,
// each once.
func quotaEntityOf(parts []kmsg.AlterClientQuotasRequestEntryEntity) (log.QuotaEntity, error) {
	var e log.QuotaEntity
	if len(parts) == 0 {
		return e, fmt.Errorf("%w: empty entity", errQuotaEntity)
	}
	for _, p := range parts {
		var dst *log.QuotaName
		switch p.Type {
		case log.QuotaEntityUser:
			dst = &e.User
		case log.QuotaEntityClientID:
			dst = &e.ClientID
		case quotaEntityIP:
			return e, fmt.Errorf("%w: ip quotas are not served", errQuotaEntity)
		default:
			return e, fmt.Errorf("%w: unknown entity type %q", errQuotaEntity, p.Type)
		}
		if dst.In {
			return e, fmt.Errorf("%w: entity type %q named twice", errQuotaEntity, p.Type)
		}
		*dst = quotaPart(p.Name)
	}
	return e, nil
}

func alterEntityEcho(parts []kmsg.AlterClientQuotasRequestEntryEntity) []kmsg.AlterClientQuotasResponseEntryEntity {
	out := make([]kmsg.AlterClientQuotasResponseEntryEntity, 0, len(parts))
	for _, p := range parts {
		e := kmsg.NewAlterClientQuotasResponseEntryEntity()
		e.Type, e.Name = p.Type, p.Name
		out = append(out, e)
	}
	return out
}

func handleAlterClientQuotas(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	var as []log.QuotaAlteration
	var at []int // the entry of each of as
	for i, e := range req.Entries {
		res := kmsg.NewAlterClientQuotasResponseEntry()
		res.Entity = alterEntityEcho(e.Entity)
		resp.Entries = append(resp.Entries, res)
		ent, err := quotaEntityOf(e.Entity)
		a := log.QuotaAlteration{Entity: ent}
		for _, op := range e.Ops {
			a.Ops = append(a.Ops, log.QuotaOp{Key: op.Key, Value: op.Value, Remove: op.Remove})
		}
		if err == nil {
			err = a.Validate()
		}
		if err != nil {
			resp.Entries[i].ErrorCode, resp.Entries[i].ErrorMessage = errInvalidRequest, kmsg.StringPtr(err.Error())
			continue
		}
		as, at = append(as, a), append(at, i)
	}
	if len(as) == 0 {
		return reply{resp: resp}
	}
	errs, err := c.s.caps.quotas.b.AlterClientQuotas(ctx, as, req.ValidateOnly)
	for j, i := range at {
		e := err
		if e == nil && j < len(errs) {
			e = errs[j]
		}
		if e != nil {
			code := errorCode(e)
			if errors.Is(e, log.ErrInvalidQuota) {
				code = errInvalidRequest
			}
			resp.Entries[i].ErrorCode, resp.Entries[i].ErrorMessage = code, kmsg.StringPtr(e.Error())
		}
	}
	return reply{resp: resp}
}

// quotaFilter is a DescribeClientQuotas filter: one component per entity
// type the entities must have.
type quotaFilter struct {
	comps  []kmsg.DescribeClientQuotasRequestComponent
	strict bool
}

func newQuotaFilter(req *kmsg.DescribeClientQuotasRequest) (quotaFilter, error) {
	seen := map[string]bool{}
	for _, c := range req.Components {
		switch c.EntityType {
		case log.QuotaEntityUser, log.QuotaEntityClientID, quotaEntityIP:
		default:
			return quotaFilter{}, fmt.Errorf("%w: unknown entity type %q", errQuotaEntity, c.EntityType)
		}
		if seen[c.EntityType] {
			return quotaFilter{}, fmt.Errorf("%w: entity type %q filtered twice", errQuotaEntity, c.EntityType)
		}
		seen[c.EntityType] = true
		switch c.MatchType {
		case kmsg.QuotasMatchTypeExact:
			if c.Match == nil {
				return quotaFilter{}, fmt.Errorf("%w: exact match of %q without a name", errQuotaEntity, c.EntityType)
			}
		case kmsg.QuotasMatchTypeDefault, kmsg.QuotasMatchTypeAny:
		default:
			return quotaFilter{}, fmt.Errorf("%w: unknown match type %d", errQuotaEntity, c.MatchType)
		}
	}
	return quotaFilter{comps: req.Components, strict: req.Strict}, nil
}

// matches reports whether e has every type the filter names, each matched,
// and, if strict, no other.
func (f quotaFilter) matches(e log.QuotaEntity) bool {
	parts := map[string]log.QuotaName{}
	if e.User.In {
		parts[log.QuotaEntityUser] = e.User
	}
	if e.ClientID.In {
		parts[log.QuotaEntityClientID] = e.ClientID
	}
	for _, c := range f.comps {
		p, ok := parts[c.EntityType]
		if !ok {
			return false
		}
		switch c.MatchType {
		case kmsg.QuotasMatchTypeExact:
			if p.Default || p.Name != *c.Match {
				return false
			}
		case kmsg.QuotasMatchTypeDefault:
			if !p.Default {
				return false
			}
		}
	}
	return !f.strict || len(f.comps) == len(parts)
}

func handleDescribeClientQuotas(_ context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	f, err := newQuotaFilter(req)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errInvalidRequest, kmsg.StringPtr(err.Error())
		return reply{resp: resp}
	}
	set := c.s.caps.quotas.b.ClientQuotas()
	for _, e := range set.Entities() {
		if !f.matches(e) {
			continue
		}
		entry := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, p := range []struct {
			typ string
			n   log.QuotaName
		}{{log.QuotaEntityUser, e.User}, {log.QuotaEntityClientID, e.ClientID}} {
			if !p.n.In {
				continue
			}
			ent := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ent.Type = p.typ
			if !p.n.Default {
				ent.Name = kmsg.StringPtr(p.n.Name)
			}
			entry.Entity = append(entry.Entity, ent)
		}
		for _, k := range []string{log.QuotaConsumerByteRate, log.QuotaProducerByteRate} {
			if v, ok := set.Quotas(e)[k]; ok {
				val := kmsg.NewDescribeClientQuotasResponseEntryValue()
				val.Key, val.Value = k, v
				entry.Values = append(entry.Values, val)
			}
		}
		resp.Entries = append(resp.Entries, entry)
	}
	return reply{resp: resp}
}
