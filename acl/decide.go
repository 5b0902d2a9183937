package acl

import "strings"

// Config is an authorizer's settings. The zero value denies everything
// not allowed by a binding (Kafka's default once an authorizer is
// configured).
type Config struct {
	// SuperUsers are principals allowed everything, whatever the
	// bindings say (Kafka's super.users: "User:admin").
	SuperUsers []string
	// AllowIfNoACL allows every request on a resource no binding names
	// (Kafka's allow.everyone.if.no.acl.found).
	AllowIfNoACL bool
}

// Request is one check: may Principal, connected from Host, do Operation
// on Resource. Operation is a concrete one (not Any or All).
type Request struct {
	Principal string // "User:alice"
	Host      string // the client's IP address
	Operation Operation
	Resource  Resource
}

// Reason says what decided.
type Reason int8

// Reasons.
const (
	ReasonNoMatch   Reason = iota // bindings name the resource, none allows: denied
	ReasonSuperUser               // the principal is a super user: allowed
	ReasonDeny                    // a Deny binding matched: denied
	ReasonAllow                   // an Allow binding matched: allowed
	ReasonNoACL                   // no binding names the resource: Config.AllowIfNoACL
)

func (r Reason) String() string {
	switch r {
	case ReasonSuperUser:
		return "super user"
	case ReasonDeny:
		return "deny binding"
	case ReasonAllow:
		return "allow binding"
	case ReasonNoACL:
		return "no binding for the resource"
	}
	return "no binding allows"
}

// Decision is the answer to a Request.
type Decision struct {
	Allowed bool
	Reason  Reason
	// Binding is the binding that decided, when Reason is ReasonDeny or
	// ReasonAllow.
	Binding Binding
}

// Decide answers r with cfg and the bindings of s (nil: none). It is a
// pure function: it reads cfg and s and changes nothing.
func Decide(cfg Config, s *Set, r Request) Decision {
	for _, su := range cfg.SuperUsers {
		if su == r.Principal {
			return Decision{Allowed: true, Reason: ReasonSuperUser}
		}
	}
	var (
		named   bool // a binding names the resource
		allow   Binding
		allowed bool
	)
	check := func(b *Binding) bool {
		named = true
		switch matchEntry(b, r) {
		case PermissionDeny:
			return true
		case PermissionAllow:
			if !allowed {
				allow, allowed = *b, true
			}
		}
		return false
	}
	if idx := s.index(r.Resource.Type); idx != nil {
		for _, name := range [2]string{r.Resource.Name, WildcardName} {
			for i := range idx.literal[name] {
				if b := &idx.literal[name][i]; check(b) {
					return Decision{Reason: ReasonDeny, Binding: *b}
				}
			}
			if r.Resource.Name == WildcardName {
				break
			}
		}
		for i := range idx.prefixed {
			b := &idx.prefixed[i]
			if !strings.HasPrefix(r.Resource.Name, b.ResourceName) {
				continue
			}
			if check(b) {
				return Decision{Reason: ReasonDeny, Binding: *b}
			}
		}
	}
	switch {
	case allowed:
		return Decision{Allowed: true, Reason: ReasonAllow, Binding: allow}
	case !named:
		return Decision{Allowed: cfg.AllowIfNoACL, Reason: ReasonNoACL}
	}
	return Decision{Reason: ReasonNoMatch}
}

// matchEntry is what b, whose resource pattern matches r's resource, says
// of r: PermissionUnknown if its principal, host or operation does not
// apply.
func matchEntry(b *Binding, r Request) Permission {
	if b.Principal != r.Principal && b.Principal != WildcardPrincipal {
		return PermissionUnknown
	}
	if b.Host != WildcardHost && b.Host != r.Host {
		return PermissionUnknown
	}
	if b.Operation != OpAll && b.Operation != r.Operation {
		// Only an Allow implies other operations.
		if b.Permission != PermissionAllow || !implies(b.Operation, r.Operation) {
			return PermissionUnknown
		}
	}
	return b.Permission
}

// implies reports whether allowing have allows want too.
func implies(have, want Operation) bool {
	switch want {
	case OpDescribe:
		return have == OpRead || have == OpWrite || have == OpDelete || have == OpAlter
	case OpDescribeConfigs:
		return have == OpAlterConfigs
	}
	return false
}
