package acl

import (
	"errors"
	"fmt"
	"strings"
)

// Filter selects bindings (Kafka's AclBindingFilter), for describing and
// deleting. Its zero value matches nothing: set the types to Any and
// leave the strings nil to match everything (AnyFilter).
type Filter struct {
	ResourceType ResourceType // Any: every type
	ResourceName *string      // nil: any name
	// PatternType Any matches every pattern with ResourceName as its
	// name; Match every pattern that matches ResourceName (literal, the
	// "*" literal, prefixes of it); Literal or Prefixed only those.
	PatternType PatternType
	Principal   *string    // nil: any
	Host        *string    // nil: any
	Operation   Operation  // Any: every operation
	Permission  Permission // Any: every permission
}

// AnyFilter matches every binding.
var AnyFilter = Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}

// ErrInvalidFilter is a filter with an unknown type, pattern, operation or
// permission.
var ErrInvalidFilter = errors.New("acl: invalid filter")

// Validate returns an error wrapping ErrInvalidFilter for a filter Kafka
// refuses.
func (f Filter) Validate() error {
	switch {
	case f.ResourceType <= ResourceUnknown || f.ResourceType > ResourceDelegationToken:
		return fmt.Errorf("%w: resource type %d", ErrInvalidFilter, f.ResourceType)
	case f.PatternType <= PatternUnknown || f.PatternType > PatternPrefixed:
		return fmt.Errorf("%w: pattern type %d", ErrInvalidFilter, f.PatternType)
	case f.Operation <= OpUnknown || f.Operation > OpDescribeTokens:
		return fmt.Errorf("%w: operation %d", ErrInvalidFilter, f.Operation)
	case f.Permission <= PermissionUnknown || f.Permission > PermissionAllow:
		return fmt.Errorf("%w: permission %d", ErrInvalidFilter, f.Permission)
	}
	return nil
}

// Matches reports whether f selects b.
func (f Filter) Matches(b Binding) bool {
	return f.matchesPattern(b) &&
		(f.Principal == nil || *f.Principal == b.Principal) &&
		(f.Host == nil || *f.Host == b.Host) &&
		(f.Operation == OpAny || f.Operation == b.Operation) &&
		(f.Permission == PermissionAny || f.Permission == b.Permission)
}

func (f Filter) matchesPattern(b Binding) bool {
	if f.ResourceType != ResourceAny && f.ResourceType != b.ResourceType {
		return false
	}
	if f.PatternType != PatternAny && f.PatternType != PatternMatch && f.PatternType != b.PatternType {
		return false
	}
	if f.ResourceName == nil {
		return true
	}
	name := *f.ResourceName
	if f.PatternType != PatternMatch {
		return name == b.ResourceName
	}
	if b.PatternType == PatternPrefixed {
		return strings.HasPrefix(name, b.ResourceName)
	}
	return name == b.ResourceName || b.ResourceName == WildcardName
}
