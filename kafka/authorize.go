package kafka

import (
	"context"
	"crypto/tls"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/internal/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Authorization (Config.Authorizer): every request but ApiVersions and
// SASL's is checked, as Kafka's KafkaApis checks it, by a guard in front
// of its handler (authorizeRules): a request denied whole is answered
// with its *_AUTHORIZATION_FAILED code without reaching the handler; the
// denied topics, groups or resources of a request are taken out of it,
// the handler serves the rest, and the denied ones are added to its
// response with their code. A denied request changes nothing. Without
// Config.Authorizer no guard is installed and every request is served as
// before.
//
// The principal is the SASL user ("User:alice"), else the subject of the
// client's TLS certificate ("User:CN=alice,O=acme"), else
// "User:ANONYMOUS"; the host is the client's IP address. The bindings are
// the backend's (ACLBackend); a backend without ACLs has none, so that
// only super users (and, with AllowIfNoACL, everyone) get through.

// Kafka's authorization error codes (internal/kerr).
const (
	errTopicAuthorizationFailed   = kerr.TopicAuthorizationFailed
	errGroupAuthorizationFailed   = kerr.GroupAuthorizationFailed
	errClusterAuthorizationFailed = kerr.ClusterAuthorizationFailed
)

// ACLBackend keeps the ACLs the server enforces (with Config.Authorizer)
// and serves DescribeAcls, CreateAcls and DeleteAcls. *log.Broker keeps
// them in a file of its data dir.
type ACLBackend interface {
	// ACLs is the current set (nil: none). It is called for every check:
	// it must be cheap (an atomic load) and never block.
	ACLs() *acl.Set
	// CreateACLs adds bindings, durably before it returns: one error per
	// binding (acl.ErrInvalidBinding for one that cannot be stored), or
	// a whole error if none could be.
	CreateACLs(ctx context.Context, bs []acl.Binding) ([]error, error)
	// DeleteACLs removes the bindings each filter matches, durably
	// before it returns, and returns them per filter.
	DeleteACLs(ctx context.Context, fs []acl.Filter) ([][]acl.Binding, error)
}

// principal is the connection's Kafka principal.
func (c *conn) principal() string {
	if c.sasl != nil && c.sasl.done {
		return acl.User(c.sasl.user)
	}
	if tc, ok := c.nc.(*tls.Conn); ok {
		if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
			return acl.User(certs[0].Subject.String())
		}
	}
	return acl.Anonymous
}

// acls is the set the server enforces now.
func (s *Server) acls() *acl.Set {
	if s.caps.acls == nil {
		return nil
	}
	return s.caps.acls.ACLs()
}

// allowed reports whether the connection may do op on r; always true
// without Config.Authorizer.
func (c *conn) allowed(op acl.Operation, r acl.Resource) bool {
	cfg := c.s.cfg.Authorizer
	if cfg == nil {
		return true
	}
	d := acl.Decide(*cfg, c.s.acls(), acl.Request{Principal: c.principal(), Host: c.ip, Operation: op, Resource: r})
	if !d.Allowed {
		c.logger.Debug("kafka: denied", "principal", c.principal(), "operation", op, "resource", r.Type, "name", r.Name, "reason", d.Reason)
	}
	return d.Allowed
}

// allowedAny reports whether the connection may do op on some resource
// of type rt (acl.DecideAny).
func (c *conn) allowedAny(op acl.Operation, rt acl.ResourceType) bool {
	cfg := c.s.cfg.Authorizer
	if cfg == nil {
		return true
	}
	return acl.DecideAny(*cfg, c.s.acls(), c.principal(), c.ip, op, rt)
}

// The operations a resource type has, for the authorized-operations bit
// fields of Metadata, DescribeGroups and DescribeCluster (KIP-430).
var (
	topicOps   = []acl.Operation{acl.OpRead, acl.OpWrite, acl.OpCreate, acl.OpDelete, acl.OpAlter, acl.OpDescribe, acl.OpDescribeConfigs, acl.OpAlterConfigs}
	groupOps   = []acl.Operation{acl.OpRead, acl.OpDelete, acl.OpDescribe}
	clusterOps = []acl.Operation{acl.OpCreate, acl.OpClusterAction, acl.OpDescribeConfigs, acl.OpAlterConfigs, acl.OpIdempotentWrite, acl.OpAlter, acl.OpDescribe}
)

// authorizedOps is the bit field (1 << operation code) of the operations
// of ops the connection may do on r.
func (c *conn) authorizedOps(r acl.Resource, ops []acl.Operation) int32 {
	var bits int32
	for _, op := range ops {
		if c.allowed(op, r) {
			bits |= 1 << op
		}
	}
	return bits
}

// guard returns the handler of key behind its authorization rule.
func (s *Server) guard(key int16, next handler) handler {
	if rule, ok := ruleFor(key); ok {
		if rule == nil {
			return next
		}
		return func(ctx context.Context, c *conn, req kmsg.Request) reply {
			return rule(ctx, c, req, next)
		}
	}
	// An API without a rule is one between members: Kafka's inter-broker
	// APIs need ClusterAction on the cluster. Denied, the connection is
	// closed (there is no generic way to answer an unknown API's error).
	return func(ctx context.Context, c *conn, req kmsg.Request) reply {
		if !c.allowed(acl.OpClusterAction, acl.Cluster()) {
			c.logger.Warn("kafka: closing connection: not authorized", "api", kmsg.NameForKey(key), "principal", c.principal())
			return reply{none: true, closeAfter: true}
		}
		return next(ctx, c, req)
	}
}

// ruleFor returns the authorization rule of an API, false if it has none.
func ruleFor(key int16) (rule, bool) {
	if r, ok := authorizeRules[key]; ok {
		return r, true
	}
	r, ok := txnRules[key]
	return r, ok
}

// handler serves one request.
type handler = func(ctx context.Context, c *conn, req kmsg.Request) reply

// rule is the authorization of an API: it answers the request itself or
// calls next with what the connection may do.
type rule = func(ctx context.Context, c *conn, req kmsg.Request, next handler) reply
