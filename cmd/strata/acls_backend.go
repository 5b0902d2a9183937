package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/log"
)

// brokerACLs works on a data dir.
type brokerACLs struct{ b *log.Broker }

func (b brokerACLs) create(bs []acl.Binding) error {
	errs, err := b.b.CreateACLs(context.Background(), bs)
	return errors.Join(append(errs, err)...)
}

func (b brokerACLs) remove(fs []acl.Filter) ([]acl.Binding, error) {
	deleted, err := b.b.DeleteACLs(context.Background(), fs)
	return flattenACLs(deleted), err
}

func (b brokerACLs) describe(f acl.Filter) ([]acl.Binding, error) { return b.b.ACLs().Match(f), nil }

func (b brokerACLs) Close() error {
	var err error
	closeBroker(b.b, &err)
	return err
}

func flattenACLs(per [][]acl.Binding) []acl.Binding {
	var all []acl.Binding
	seen := map[acl.Binding]bool{}
	for _, bs := range per {
		for _, b := range bs {
			if !seen[b] {
				seen[b] = true
				all = append(all, b)
			}
		}
	}
	return acl.Must(all).Bindings()
}

// adminACLs works over the Kafka protocol (CreateAcls, DeleteAcls,
// DescribeAcls v2, which Kafka 2.4+ serves).
type adminACLs struct{ a *admin }

func (a adminACLs) Close() error { return a.a.Close() }

func (a adminACLs) create(bs []acl.Binding) error {
	req := kmsg.NewPtrCreateACLsRequest()
	for _, b := range bs {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName = kmsg.ACLResourceType(b.ResourceType), b.ResourceName
		c.ResourcePatternType = kmsg.ACLResourcePatternType(b.PatternType)
		c.Principal, c.Host = b.Principal, b.Host
		c.Operation, c.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
		req.Creations = append(req.Creations, c)
	}
	r, err := a.a.do(req, 2)
	if err != nil {
		return err
	}
	var first error
	failed := 0
	for i, res := range r.(*kmsg.CreateACLsResponse).Results {
		if err := kafkaCodeError(res.ErrorCode, res.ErrorMessage); err != nil {
			if failed++; first == nil {
				first = fmt.Errorf("%v: %w", bs[i], err)
			}
		}
	}
	if failed > 1 {
		return fmt.Errorf("%d of %d ACLs not added, the first: %w", failed, len(bs), first)
	}
	return first
}

func (a adminACLs) remove(fs []acl.Filter) ([]acl.Binding, error) {
	req := kmsg.NewPtrDeleteACLsRequest()
	for _, f := range fs {
		d := kmsg.NewDeleteACLsRequestFilter()
		d.ResourceType, d.ResourceName = kmsg.ACLResourceType(f.ResourceType), f.ResourceName
		d.ResourcePatternType = kmsg.ACLResourcePatternType(f.PatternType)
		d.Principal, d.Host = f.Principal, f.Host
		d.Operation, d.PermissionType = kmsg.ACLOperation(f.Operation), kmsg.ACLPermissionType(f.Permission)
		req.Filters = append(req.Filters, d)
	}
	r, err := a.a.do(req, 2)
	if err != nil {
		return nil, err
	}
	var per [][]acl.Binding
	for _, res := range r.(*kmsg.DeleteACLsResponse).Results {
		if err := kafkaCodeError(res.ErrorCode, res.ErrorMessage); err != nil {
			return nil, err
		}
		var bs []acl.Binding
		for _, m := range res.MatchingACLs {
			bs = append(bs, acl.Binding{ResourceType: acl.ResourceType(m.ResourceType), ResourceName: m.ResourceName,
				PatternType: acl.PatternType(m.ResourcePatternType), Principal: m.Principal, Host: m.Host,
				Operation: acl.Operation(m.Operation), Permission: acl.Permission(m.PermissionType)})
		}
		per = append(per, bs)
	}
	return flattenACLs(per), nil
}

func (a adminACLs) describe(f acl.Filter) ([]acl.Binding, error) {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourceName = kmsg.ACLResourceType(f.ResourceType), f.ResourceName
	req.ResourcePatternType = kmsg.ACLResourcePatternType(f.PatternType)
	req.Principal, req.Host = f.Principal, f.Host
	req.Operation, req.PermissionType = kmsg.ACLOperation(f.Operation), kmsg.ACLPermissionType(f.Permission)
	r, err := a.a.do(req, 2)
	if err != nil {
		return nil, err
	}
	resp := r.(*kmsg.DescribeACLsResponse)
	if err := kafkaCodeError(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return nil, err
	}
	var out []acl.Binding
	for _, res := range resp.Resources {
		for _, e := range res.ACLs {
			out = append(out, acl.Binding{ResourceType: acl.ResourceType(res.ResourceType), ResourceName: res.ResourceName,
				PatternType: acl.PatternType(res.ResourcePatternType), Principal: e.Principal, Host: e.Host,
				Operation: acl.Operation(e.Operation), Permission: acl.Permission(e.PermissionType)})
		}
	}
	return out, nil
}
