// Package acl decides who may do what, with the semantics of Kafka's
// authorizer (KIP-11; KRaft's StandardAuthorizer): access control entries
// bound to resource patterns, deny winning over allow, super users, and a
// default for resources no entry names.
//
// The decision is a pure function, Decide, of a Config, a Set of bindings
// and a Request (principal, host, operation, resource): it returns whether
// the request is allowed and what decided it (the binding, a super user or
// the default). It does no IO and holds no lock; a server keeps the current
// Set (immutable: Add and Delete return a new one) and calls Decide per
// check.
//
// A principal is "Type:name" as Kafka writes it ("User:alice"); "User:*"
// in a binding matches every user. A host is an IP address in its
// canonical form, "*" in a binding matching any. Resource names match a
// binding's pattern: Literal matches the name itself (or every name when
// the pattern's name is "*"), Prefixed every name that begins with it.
//
// Decide, for principal p on host h wanting operation op on resource r:
//
//   - p is a super user: allowed.
//   - a Deny binding matching r, p (or User:*), h (or *) and op (or All):
//     denied. Deny is never implied: denying Read does not deny Describe.
//   - an Allow binding matching r, p, h and op, All, or an operation that
//     implies op (Read, Write, Delete and Alter imply Describe;
//     AlterConfigs implies DescribeConfigs): allowed.
//   - no binding at all names r (whoever its principal): the default,
//     Config.AllowIfNoACL (Kafka's allow.everyone.if.no.acl.found, false by
//     default).
//   - otherwise denied.
package acl
