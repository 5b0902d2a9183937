package kafka

import (
	"context"
	"fmt"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/log"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The Client's ACL administration (log.ACLAdmin): Kafka's CreateAcls,
// DescribeAcls and DeleteAcls, sent to any broker (a KRaft cluster's
// brokers forward them to the controller). Bindings and filters are
// checked here first, as log.Broker checks them: an invalid binding is
// acl.ErrInvalidBinding and is not sent, an invalid filter
// acl.ErrInvalidFilter and nothing is sent.

var _ log.ACLAdmin = (*Client)(nil)

// Highest versions of the ACL requests the Client sends (v1 brings
// pattern types, KIP-290).
const clientACLsMax = 3

// CreateACLs adds bindings: one error per binding (acl.ErrInvalidBinding
// for one this side refuses; the cluster's error code, as an *Error, for
// one it refuses), or an error if no broker answered.
func (c *Client) CreateACLs(ctx context.Context, bs []acl.Binding) ([]error, error) {
	errs := make([]error, len(bs))
	req := kmsg.NewPtrCreateACLsRequest()
	var sent []int // the binding of each creation
	for i, b := range bs {
		if err := b.Validate(); err != nil {
			errs[i] = err
			continue
		}
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName = kmsg.ACLResourceType(b.ResourceType), b.ResourceName
		cr.ResourcePatternType = kmsg.ACLResourcePatternType(b.PatternType)
		cr.Principal, cr.Host = b.Principal, b.Host
		cr.Operation, cr.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
		req.Creations = append(req.Creations, cr)
		sent = append(sent, i)
	}
	if len(sent) == 0 {
		return errs, nil
	}
	resp, err := c.Request(ctx, req, clientACLsMax)
	if err != nil {
		return nil, fmt.Errorf("kafka: create acls: %w", err)
	}
	rs := resp.(*kmsg.CreateACLsResponse).Results
	if len(rs) != len(sent) {
		return nil, fmt.Errorf("kafka: create acls: %d results for %d bindings: %w", len(rs), len(sent), codeError(errUnknownServerError))
	}
	for j, i := range sent {
		if err := responseErr(rs[j].ErrorCode, rs[j].ErrorMessage); err != nil {
			errs[i] = fmt.Errorf("kafka: create acl %v: %w", bs[i], err)
		}
	}
	return errs, nil
}

// DescribeACLs returns the bindings f matches, as the cluster lists them
// (acl.ErrInvalidFilter).
func (c *Client) DescribeACLs(ctx context.Context, f acl.Filter) ([]acl.Binding, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourceName = kmsg.ACLResourceType(f.ResourceType), f.ResourceName
	req.ResourcePatternType = kmsg.ACLResourcePatternType(f.PatternType)
	req.Principal, req.Host = f.Principal, f.Host
	req.Operation, req.PermissionType = kmsg.ACLOperation(f.Operation), kmsg.ACLPermissionType(f.Permission)
	resp, err := c.Request(ctx, req, clientACLsMax)
	if err != nil {
		return nil, fmt.Errorf("kafka: describe acls: %w", err)
	}
	r := resp.(*kmsg.DescribeACLsResponse)
	if err := responseErr(r.ErrorCode, r.ErrorMessage); err != nil {
		return nil, fmt.Errorf("kafka: describe acls: %w", err)
	}
	var out []acl.Binding
	for _, res := range r.Resources {
		for _, e := range res.ACLs {
			out = append(out, acl.Binding{
				ResourceType: acl.ResourceType(res.ResourceType), ResourceName: res.ResourceName,
				PatternType: acl.PatternType(res.ResourcePatternType), Principal: e.Principal, Host: e.Host,
				Operation: acl.Operation(e.Operation), Permission: acl.Permission(e.PermissionType),
			})
		}
	}
	return out, nil
}

// DeleteACLs removes the bindings each filter matches and returns them
// per filter (acl.ErrInvalidFilter: nothing sent); the first filter the
// cluster refused is the error.
func (c *Client) DeleteACLs(ctx context.Context, fs []acl.Filter) ([][]acl.Binding, error) {
	req := kmsg.NewPtrDeleteACLsRequest()
	for _, f := range fs {
		if err := f.Validate(); err != nil {
			return nil, err
		}
		rf := kmsg.NewDeleteACLsRequestFilter()
		rf.ResourceType, rf.ResourceName = kmsg.ACLResourceType(f.ResourceType), f.ResourceName
		rf.ResourcePatternType = kmsg.ACLResourcePatternType(f.PatternType)
		rf.Principal, rf.Host = f.Principal, f.Host
		rf.Operation, rf.PermissionType = kmsg.ACLOperation(f.Operation), kmsg.ACLPermissionType(f.Permission)
		req.Filters = append(req.Filters, rf)
	}
	if len(fs) == 0 {
		return nil, nil
	}
	resp, err := c.Request(ctx, req, clientACLsMax)
	if err != nil {
		return nil, fmt.Errorf("kafka: delete acls: %w", err)
	}
	rs := resp.(*kmsg.DeleteACLsResponse).Results
	if len(rs) != len(fs) {
		return nil, fmt.Errorf("kafka: delete acls: %d results for %d filters: %w", len(rs), len(fs), codeError(errUnknownServerError))
	}
	out := make([][]acl.Binding, len(fs))
	var first error
	for i, r := range rs {
		if err := responseErr(r.ErrorCode, r.ErrorMessage); err != nil {
			if first == nil {
				first = fmt.Errorf("kafka: delete acls: filter %d: %w", i, err)
			}
			continue
		}
		for _, m := range r.MatchingACLs {
			if err := responseErr(m.ErrorCode, m.ErrorMessage); err != nil {
				if first == nil {
					first = fmt.Errorf("kafka: delete acls: filter %d: %w", i, err)
				}
				continue
			}
			out[i] = append(out[i], acl.Binding{
				ResourceType: acl.ResourceType(m.ResourceType), ResourceName: m.ResourceName,
				PatternType: acl.PatternType(m.ResourcePatternType), Principal: m.Principal, Host: m.Host,
				Operation: acl.Operation(m.Operation), Permission: acl.Permission(m.PermissionType),
			})
		}
	}
	return out, first
}
