package kafka

import (
	"context"
	"errors"

	"github.com/strata-log/strata/acl"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The ACL APIs (KIP-11, KIP-140), served when the backend keeps ACLs
// (ACLBackend). Each needs, with Config.Authorizer, Describe (DescribeAcls)
// or Alter (CreateAcls, DeleteAcls) on the cluster.
const (
	describeACLsKey int16 = 29
	createACLsKey   int16 = 30
	deleteACLsKey   int16 = 31
)

// aclAPIs: v0 is KIP-11's (literal patterns only), v1 adds pattern types
// (KIP-290), v2+ are flexible. Kafka 4 serves v1–v3; v0 is served too for
// older clients, as literal.
var aclAPIs = []api{
	{key: describeACLsKey, min: 0, max: 3, handle: handleDescribeACLs},
	{key: createACLsKey, min: 0, max: 3, handle: handleCreateACLs},
	{key: deleteACLsKey, min: 0, max: 3, handle: handleDeleteACLs},
}

// authorizeACLs: Describe on the cluster to describe ACLs, Alter to
// create or delete them.
func authorizeACLs(ctx context.Context, c *conn, req kmsg.Request, next handler) reply {
	op := acl.OpAlter
	if _, ok := req.(*kmsg.DescribeACLsRequest); ok {
		op = acl.OpDescribe
	}
	if c.allowed(op, acl.Cluster()) {
		return next(ctx, c, req)
	}
	msg := kmsg.StringPtr("not authorized on the cluster")
	switch req := req.(type) {
	case *kmsg.DescribeACLsRequest:
		resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
		resp.ErrorCode, resp.ErrorMessage = errClusterAuthorizationFailed, msg
		return reply{resp: resp}
	case *kmsg.CreateACLsRequest:
		resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
		for range req.Creations {
			r := kmsg.NewCreateACLsResponseResult()
			r.ErrorCode, r.ErrorMessage = errClusterAuthorizationFailed, msg
			resp.Results = append(resp.Results, r)
		}
		return reply{resp: resp}
	case *kmsg.DeleteACLsRequest:
		resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
		for range req.Filters {
			r := kmsg.NewDeleteACLsResponseResult()
			r.ErrorCode, r.ErrorMessage = errClusterAuthorizationFailed, msg
			resp.Results = append(resp.Results, r)
		}
		return reply{resp: resp}
	}
	return reply{none: true, closeAfter: true}
}

// aclFilter reads a DescribeAcls or DeleteAcls filter; v0 has no pattern
// type: literal.
func aclFilter(version int16, rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType, principal, host *string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) (acl.Filter, error) {
	f := acl.Filter{
		ResourceType: acl.ResourceType(rt), ResourceName: name, PatternType: acl.PatternType(pt),
		Principal: principal, Host: host, Operation: acl.Operation(op), Permission: acl.Permission(perm),
	}
	if version == 0 {
		f.PatternType = acl.PatternLiteral
	}
	return f, f.Validate()
}

func handleDescribeACLs(_ context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	f, err := aclFilter(req.Version, req.ResourceType, req.ResourceName, req.ResourcePatternType, req.Principal, req.Host, req.Operation, req.PermissionType)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errInvalidRequest, kmsg.StringPtr(err.Error())
		return reply{resp: resp}
	}
	// Bindings come sorted by resource: one entry per resource pattern.
	for _, b := range c.s.caps.acls.ACLs().Match(f) {
		n := len(resp.Resources)
		if n == 0 || resp.Resources[n-1].ResourceType != kmsg.ACLResourceType(b.ResourceType) ||
			resp.Resources[n-1].ResourceName != b.ResourceName ||
			resp.Resources[n-1].ResourcePatternType != kmsg.ACLResourcePatternType(b.PatternType) {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName = kmsg.ACLResourceType(b.ResourceType), b.ResourceName
			res.ResourcePatternType = kmsg.ACLResourcePatternType(b.PatternType)
			resp.Resources = append(resp.Resources, res)
			n++
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host = b.Principal, b.Host
		e.Operation, e.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
		resp.Resources[n-1].ACLs = append(resp.Resources[n-1].ACLs, e)
	}
	return reply{resp: resp}
}

func handleCreateACLs(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	bs := make([]acl.Binding, len(req.Creations))
	for i, cr := range req.Creations {
		bs[i] = acl.Binding{
			ResourceType: acl.ResourceType(cr.ResourceType), ResourceName: cr.ResourceName,
			PatternType: acl.PatternType(cr.ResourcePatternType), Principal: cr.Principal, Host: cr.Host,
			Operation: acl.Operation(cr.Operation), Permission: acl.Permission(cr.PermissionType),
		}
		if req.Version == 0 {
			bs[i].PatternType = acl.PatternLiteral
		}
	}
	errs, err := c.s.caps.acls.CreateACLs(ctx, bs)
	for i := range bs {
		res := kmsg.NewCreateACLsResponseResult()
		e := err
		if e == nil && i < len(errs) {
			e = errs[i]
		}
		if e != nil {
			res.ErrorCode, res.ErrorMessage = aclErrorCode(e), kmsg.StringPtr(e.Error())
		}
		resp.Results = append(resp.Results, res)
	}
	return reply{resp: resp}
}

func handleDeleteACLs(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	results := make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	var fs []acl.Filter
	var at []int // the result of each filter of fs
	for i, rf := range req.Filters {
		results[i] = kmsg.NewDeleteACLsResponseResult()
		f, err := aclFilter(req.Version, rf.ResourceType, rf.ResourceName, rf.ResourcePatternType, rf.Principal, rf.Host, rf.Operation, rf.PermissionType)
		if err != nil {
			results[i].ErrorCode, results[i].ErrorMessage = errInvalidRequest, kmsg.StringPtr(err.Error())
			continue
		}
		fs, at = append(fs, f), append(at, i)
	}
	if len(fs) > 0 {
		deleted, err := c.s.caps.acls.DeleteACLs(ctx, fs)
		for j, i := range at {
			if err != nil {
				results[i].ErrorCode, results[i].ErrorMessage = aclErrorCode(err), kmsg.StringPtr(err.Error())
				continue
			}
			for _, b := range deleted[j] {
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName = kmsg.ACLResourceType(b.ResourceType), b.ResourceName
				m.ResourcePatternType = kmsg.ACLResourcePatternType(b.PatternType)
				m.Principal, m.Host = b.Principal, b.Host
				m.Operation, m.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
				results[i].MatchingACLs = append(results[i].MatchingACLs, m)
			}
		}
	}
	resp.Results = results
	return reply{resp: resp}
}

// aclErrorCode is the code of an ACL backend's error.
func aclErrorCode(err error) int16 {
	if errors.Is(err, acl.ErrInvalidBinding) || errors.Is(err, acl.ErrInvalidFilter) {
		return errInvalidRequest
	}
	return errorCode(err)
}
