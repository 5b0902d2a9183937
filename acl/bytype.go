package acl

import "strings"

// DecideAny reports whether principal, connecting from host, may do op on
// some resource of type rt (Kafka's authorizeByResourceType, KIP-679: a
// producer without IdempotentWrite on the cluster may still be idempotent
// if it may Write some topic). It is allowed for a super user; otherwise
// when an Allow binding for op (or All) matching principal and host names
// a resource pattern no Deny binding covers (a Deny on the literal "*"
// covers all; a Deny literal covers the same name, a Deny prefix every
// pattern that starts with it); and, with Config.AllowIfNoACL, when no
// binding is of type rt at all.
func DecideAny(cfg Config, s *Set, principal, host string, op Operation, rt ResourceType) bool {
	for _, su := range cfg.SuperUsers {
		if su == principal {
			return true
		}
	}
	idx := s.index(rt)
	if idx == nil {
		return cfg.AllowIfNoACL
	}
	applies := func(b *Binding) bool {
		return (b.Principal == principal || b.Principal == WildcardPrincipal) &&
			(b.Host == WildcardHost || b.Host == host) &&
			(b.Operation == OpAll || b.Operation == op)
	}
	var denyLiteral = map[string]bool{}
	var denyPrefix []string
	var allows []*Binding
	visit := func(b *Binding) {
		if !applies(b) {
			return
		}
		switch {
		case b.Permission == PermissionAllow:
			allows = append(allows, b)
		case b.PatternType == PatternPrefixed:
			denyPrefix = append(denyPrefix, b.ResourceName)
		default:
			denyLiteral[b.ResourceName] = true
		}
	}
	for name := range idx.literal {
		for i := range idx.literal[name] {
			visit(&idx.literal[name][i])
		}
	}
	for i := range idx.prefixed {
		visit(&idx.prefixed[i])
	}
	if denyLiteral[WildcardName] {
		return false
	}
	for _, a := range allows {
		if a.PatternType == PatternLiteral && denyLiteral[a.ResourceName] {
			continue
		}
		covered := false
		for _, p := range denyPrefix {
			if strings.HasPrefix(a.ResourceName, p) {
				covered = true
				break
			}
		}
		if !covered {
			return true
		}
	}
	return false
}
