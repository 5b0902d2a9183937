package acl

import (
	"fmt"
	"strings"
)

var (
	resourceNames = map[ResourceType]string{
		ResourceUnknown: "UNKNOWN", ResourceAny: "ANY", ResourceTopic: "TOPIC",
		ResourceGroup: "GROUP", ResourceCluster: "CLUSTER",
		ResourceTransactionalID: "TRANSACTIONAL_ID", ResourceDelegationToken: "DELEGATION_TOKEN",
	}
	patternNames = map[PatternType]string{
		PatternUnknown: "UNKNOWN", PatternAny: "ANY", PatternMatch: "MATCH",
		PatternLiteral: "LITERAL", PatternPrefixed: "PREFIXED",
	}
	operationNames = map[Operation]string{
		OpUnknown: "UNKNOWN", OpAny: "ANY", OpAll: "ALL", OpRead: "READ", OpWrite: "WRITE",
		OpCreate: "CREATE", OpDelete: "DELETE", OpAlter: "ALTER", OpDescribe: "DESCRIBE",
		OpClusterAction: "CLUSTER_ACTION", OpDescribeConfigs: "DESCRIBE_CONFIGS",
		OpAlterConfigs: "ALTER_CONFIGS", OpIdempotentWrite: "IDEMPOTENT_WRITE",
		OpCreateTokens: "CREATE_TOKENS", OpDescribeTokens: "DESCRIBE_TOKENS",
	}
	permissionNames = map[Permission]string{
		PermissionUnknown: "UNKNOWN", PermissionAny: "ANY", PermissionDeny: "DENY", PermissionAllow: "ALLOW",
	}
)

func name[K comparable](m map[K]string, k K, n int8) string {
	if s, ok := m[k]; ok {
		return s
	}
	return fmt.Sprint(n)
}

func parse[K comparable](m map[K]string, s string) (K, bool) {
	s = strings.ReplaceAll(strings.ToUpper(s), "-", "_")
	for k, v := range m {
		if v == s || strings.ReplaceAll(v, "_", "") == s {
			return k, true
		}
	}
	var zero K
	return zero, false
}

func (t ResourceType) String() string { return name(resourceNames, t, int8(t)) }
func (t PatternType) String() string  { return name(patternNames, t, int8(t)) }
func (o Operation) String() string    { return name(operationNames, o, int8(o)) }
func (p Permission) String() string   { return name(permissionNames, p, int8(p)) }

// ParseOperation reads an operation as Kafka's tools write it ("Read",
// "READ", "DescribeConfigs", "describe_configs").
func ParseOperation(s string) (Operation, bool) { return parse(operationNames, s) }

// ParseResourceType reads a resource type ("topic", "TRANSACTIONAL_ID").
func ParseResourceType(s string) (ResourceType, bool) { return parse(resourceNames, s) }

// ParsePatternType reads a pattern type ("literal", "PREFIXED", "match").
func ParsePatternType(s string) (PatternType, bool) { return parse(patternNames, s) }

// ParsePermission reads a permission ("allow", "DENY").
func ParsePermission(s string) (Permission, bool) { return parse(permissionNames, s) }
