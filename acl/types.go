package acl

import (
	"errors"
	"fmt"
	"strings"
)

// ResourceType is the kind of thing a binding is about; the values are
// Kafka's wire codes.
type ResourceType int8

// Resource types.
const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1 // filters only
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
)

// ClusterName is the name of the one cluster resource.
const ClusterName = "kafka-cluster"

// PatternType is how a binding's resource name is matched; Kafka's codes.
type PatternType int8

// Pattern types.
const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1 // filters only: any pattern type
	PatternMatch    PatternType = 2 // filters only: patterns that match the name
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

// Operation is what a principal wants to do; Kafka's codes.
type Operation int8

// Operations.
const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1 // filters only
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
)

// Permission is what a binding does to the operations it matches; Kafka's
// codes.
type Permission int8

// Permissions.
const (
	PermissionUnknown Permission = 0
	PermissionAny     Permission = 1 // filters only
	PermissionDeny    Permission = 2
	PermissionAllow   Permission = 3
)

// Wildcards.
const (
	WildcardName      = "*"      // a Literal pattern matching every name
	WildcardPrincipal = "User:*" // every user
	WildcardHost      = "*"      // every host
)

// Resource is one thing a request acts on.
type Resource struct {
	Type ResourceType
	Name string
}

// Topic, Group, Cluster and TransactionalID name resources.
func Topic(name string) Resource         { return Resource{ResourceTopic, name} }
func Group(name string) Resource         { return Resource{ResourceGroup, name} }
func Cluster() Resource                  { return Resource{ResourceCluster, ClusterName} }
func TransactionalID(id string) Resource { return Resource{ResourceTransactionalID, id} }

// Binding is one access control entry bound to a resource pattern
// (Kafka's AclBinding).
type Binding struct {
	ResourceType ResourceType
	ResourceName string
	PatternType  PatternType // Literal or Prefixed
	Principal    string      // "User:alice", "User:*"
	Host         string      // an IP address or "*"
	Operation    Operation
	Permission   Permission
}

func (b Binding) String() string {
	return fmt.Sprintf("(%s %s %q: %s %s %s from %s)", b.PatternType, b.ResourceType, b.ResourceName,
		b.Permission, b.Principal, b.Operation, b.Host)
}

// ErrInvalidBinding is a binding that cannot be stored: an unknown or
// filter-only type, pattern, operation or permission, an empty resource
// name, a principal that is not "Type:name", or a cluster resource not
// named ClusterName.
var ErrInvalidBinding = errors.New("acl: invalid binding")

// Validate returns an error wrapping ErrInvalidBinding if b cannot be
// stored, as Kafka refuses it in CreateAcls.
func (b Binding) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %v: "+format, append([]any{ErrInvalidBinding, b}, args...)...)
	}
	switch {
	case b.ResourceType <= ResourceAny || b.ResourceType > ResourceDelegationToken:
		return bad("resource type %d", b.ResourceType)
	case b.PatternType != PatternLiteral && b.PatternType != PatternPrefixed:
		return bad("pattern type %d", b.PatternType)
	case b.ResourceName == "":
		return bad("empty resource name")
	case b.ResourceType == ResourceCluster && (b.ResourceName != ClusterName || b.PatternType != PatternLiteral):
		return bad("the cluster resource is the literal %q", ClusterName)
	case b.Operation <= OpAny || b.Operation > OpDescribeTokens:
		return bad("operation %d", b.Operation)
	case b.Permission != PermissionAllow && b.Permission != PermissionDeny:
		return bad("permission %d", b.Permission)
	case b.Host == "":
		return bad("empty host")
	}
	if _, _, err := ParsePrincipal(b.Principal); err != nil {
		return fmt.Errorf("%w %v: %v", ErrInvalidBinding, b, err)
	}
	return nil
}

// ParsePrincipal splits "Type:name" (Kafka's KafkaPrincipal string).
func ParsePrincipal(p string) (typ, name string, err error) {
	typ, name, ok := strings.Cut(p, ":")
	if !ok || typ == "" || name == "" {
		return "", "", fmt.Errorf("principal %q is not Type:name", p)
	}
	return typ, name, nil
}

// User is the principal of a user name ("User:" + name).
func User(name string) string { return "User:" + name }

// Anonymous is the principal of a connection that did not authenticate.
const Anonymous = "User:ANONYMOUS"
