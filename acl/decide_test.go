package acl

import (
	"errors"
	"testing"
)

func allow(rt ResourceType, pt PatternType, name, principal, host string, op Operation) Binding {
	return Binding{rt, name, pt, principal, host, op, PermissionAllow}
}

func deny(rt ResourceType, pt PatternType, name, principal, host string, op Operation) Binding {
	return Binding{rt, name, pt, principal, host, op, PermissionDeny}
}

const (
	lit = PatternLiteral
	pre = PatternPrefixed
	tp  = ResourceTopic
)

var (
	alice = User("alice")
	bob   = User("bob")
)

func mustSet(t *testing.T, bs ...Binding) *Set {
	t.Helper()
	s, err := NewSet(bs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDecide follows the cases of Kafka's AuthorizerTest and
// StandardAuthorizerTest: each row is bindings, a config and checks.
func TestDecide(t *testing.T) {
	type check struct {
		principal, host string
		op              Operation
		res             Resource
		want            bool
		reason          Reason
	}
	topic := Topic("orders")
	tests := []struct {
		name   string
		cfg    Config
		acls   []Binding
		checks []check
	}{{
		name: "no acls: denied by default",
		checks: []check{
			{alice, "10.0.0.1", OpRead, topic, false, ReasonNoACL},
			{alice, "10.0.0.1", OpDescribe, Cluster(), false, ReasonNoACL},
		},
	}, {
		name: "no acls: allow.everyone.if.no.acl.found",
		cfg:  Config{AllowIfNoACL: true},
		checks: []check{
			{alice, "10.0.0.1", OpWrite, topic, true, ReasonNoACL},
		},
	}, {
		name: "allow.everyone.if.no.acl.found does not apply once any binding names the resource",
		cfg:  Config{AllowIfNoACL: true},
		acls: []Binding{allow(tp, lit, "orders", alice, "*", OpRead)},
		checks: []check{
			{bob, "10.0.0.1", OpRead, topic, false, ReasonNoMatch},
			{alice, "10.0.0.1", OpWrite, topic, false, ReasonNoMatch},
			{alice, "10.0.0.1", OpRead, topic, true, ReasonAllow},
			// Another topic is named by no binding.
			{bob, "10.0.0.1", OpRead, Topic("payments"), true, ReasonNoACL},
		},
	}, {
		name: "a prefixed binding names the resource too",
		cfg:  Config{AllowIfNoACL: true},
		acls: []Binding{allow(tp, pre, "ord", alice, "*", OpRead)},
		checks: []check{
			{bob, "10.0.0.1", OpRead, topic, false, ReasonNoMatch},
			{bob, "10.0.0.1", OpRead, Topic("or"), true, ReasonNoACL},
		},
	}, {
		name: "topic acl: principal, host and operation must all match",
		acls: []Binding{
			allow(tp, lit, "orders", alice, "192.168.1.1", OpRead),
			allow(tp, lit, "orders", alice, "192.168.1.1", OpWrite),
			deny(tp, lit, "orders", alice, "192.168.1.2", OpRead),
			allow(tp, lit, "orders", bob, "*", OpRead),
			allow(tp, lit, "orders", WildcardPrincipal, "192.168.1.3", OpWrite),
		},
		checks: []check{
			{alice, "192.168.1.1", OpRead, topic, true, ReasonAllow},
			{alice, "192.168.1.1", OpWrite, topic, true, ReasonAllow},
			{alice, "192.168.1.1", OpDelete, topic, false, ReasonNoMatch},
			{alice, "192.168.1.2", OpRead, topic, false, ReasonDeny},
			{alice, "192.168.1.2", OpWrite, topic, false, ReasonNoMatch},
			{bob, "192.168.1.2", OpRead, topic, true, ReasonAllow},
			{bob, "192.168.1.2", OpWrite, topic, false, ReasonNoMatch},
			{bob, "192.168.1.3", OpWrite, topic, true, ReasonAllow},
			{User("carol"), "192.168.1.3", OpWrite, topic, true, ReasonAllow},
			{User("carol"), "192.168.1.4", OpWrite, topic, false, ReasonNoMatch},
			// The principal's type matters: User:* matches users only.
			{"Group:bob", "192.168.1.2", OpRead, topic, false, ReasonNoMatch},
			// A topic acl says nothing of a group of the same name.
			{bob, "192.168.1.2", OpRead, Group("orders"), false, ReasonNoACL},
		},
	}, {
		name: "deny takes precedence over allow",
		acls: []Binding{
			allow(tp, lit, "orders", WildcardPrincipal, "*", OpAll),
			deny(tp, lit, "orders", alice, "10.0.0.1", OpAll),
		},
		checks: []check{
			{alice, "10.0.0.1", OpRead, topic, false, ReasonDeny},
			{alice, "10.0.0.1", OpDescribe, topic, false, ReasonDeny},
			{alice, "10.0.0.2", OpRead, topic, true, ReasonAllow},
			{bob, "10.0.0.1", OpAlterConfigs, topic, true, ReasonAllow},
		},
	}, {
		name: "deny on a wildcard or prefix beats a literal allow",
		acls: []Binding{
			allow(tp, lit, "orders", alice, "*", OpRead),
			deny(tp, lit, "*", alice, "*", OpRead),
			allow(tp, lit, "payments", bob, "*", OpRead),
			deny(tp, pre, "pay", bob, "*", OpRead),
		},
		checks: []check{
			{alice, "10.0.0.1", OpRead, topic, false, ReasonDeny},
			{bob, "10.0.0.1", OpRead, Topic("payments"), false, ReasonDeny},
		},
	}, {
		name: "allow all access",
		acls: []Binding{allow(tp, lit, "*", WildcardPrincipal, "*", OpAll)},
		checks: []check{
			{alice, "10.0.0.1", OpRead, topic, true, ReasonAllow},
			{bob, "::1", OpDelete, Topic("x"), true, ReasonAllow},
			{bob, "::1", OpIdempotentWrite, Topic("x"), true, ReasonAllow},
			{bob, "::1", OpDescribe, Group("x"), false, ReasonNoACL},
		},
	}, {
		name: "super users are allowed whatever the bindings",
		cfg:  Config{SuperUsers: []string{User("admin"), User("ops")}},
		acls: []Binding{deny(tp, lit, "*", WildcardPrincipal, "*", OpAll)},
		checks: []check{
			{User("admin"), "10.0.0.1", OpRead, topic, true, ReasonSuperUser},
			{User("ops"), "10.0.0.1", OpAlter, Cluster(), true, ReasonSuperUser},
			{alice, "10.0.0.1", OpRead, topic, false, ReasonDeny},
			{alice, "10.0.0.1", OpAlter, Cluster(), false, ReasonNoACL},
		},
	}, {
		name: "implied operations: allow implies describe, deny implies nothing",
		acls: []Binding{
			allow(tp, lit, "r", alice, "*", OpRead),
			allow(tp, lit, "w", alice, "*", OpWrite),
			allow(tp, lit, "d", alice, "*", OpDelete),
			allow(tp, lit, "a", alice, "*", OpAlter),
			allow(tp, lit, "ac", alice, "*", OpAlterConfigs),
			allow(tp, lit, "c", alice, "*", OpCreate),
			allow(tp, lit, "dc", alice, "*", OpDescribeConfigs),
			deny(tp, lit, "dr", alice, "*", OpRead),
			allow(tp, lit, "dr", alice, "*", OpDescribe),
		},
		checks: []check{
			{alice, "h", OpDescribe, Topic("r"), true, ReasonAllow},
			{alice, "h", OpDescribe, Topic("w"), true, ReasonAllow},
			{alice, "h", OpDescribe, Topic("d"), true, ReasonAllow},
			{alice, "h", OpDescribe, Topic("a"), true, ReasonAllow},
			{alice, "h", OpDescribeConfigs, Topic("ac"), true, ReasonAllow},
			{alice, "h", OpDescribe, Topic("ac"), false, ReasonNoMatch},
			{alice, "h", OpDescribe, Topic("c"), false, ReasonNoMatch},
			{alice, "h", OpDescribeConfigs, Topic("a"), false, ReasonNoMatch},
			{alice, "h", OpAlterConfigs, Topic("dc"), false, ReasonNoMatch},
			{alice, "h", OpRead, Topic("w"), false, ReasonNoMatch},
			{alice, "h", OpDescribe, Topic("dr"), true, ReasonAllow},
			{alice, "h", OpRead, Topic("dr"), false, ReasonDeny},
		},
	}, {
		name: "wildcard resource",
		acls: []Binding{
			allow(tp, lit, "*", alice, "*", OpRead),
			allow(tp, lit, "orders", alice, "*", OpWrite),
		},
		checks: []check{
			{alice, "h", OpRead, Topic("anything"), true, ReasonAllow},
			{alice, "h", OpWrite, Topic("anything"), false, ReasonNoMatch},
			{alice, "h", OpWrite, topic, true, ReasonAllow},
			{alice, "h", OpRead, topic, true, ReasonAllow},
		},
	}, {
		name: "prefixed resources",
		acls: []Binding{
			allow(tp, pre, "a_", alice, "*", OpRead),
			allow(tp, pre, "a_me_", bob, "*", OpRead),
			allow(tp, lit, "f", alice, "*", OpWrite),
			allow(ResourceGroup, pre, "g", alice, "*", OpRead),
		},
		checks: []check{
			{alice, "h", OpRead, Topic("a_orders"), true, ReasonAllow},
			{alice, "h", OpRead, Topic("a_"), true, ReasonAllow},
			{alice, "h", OpRead, Topic("a"), false, ReasonNoACL},
			{alice, "h", OpRead, Topic("b_orders"), false, ReasonNoACL},
			{bob, "h", OpRead, Topic("a_me_1"), true, ReasonAllow},
			{bob, "h", OpRead, Topic("a_you"), false, ReasonNoMatch},
			{alice, "h", OpRead, Topic("a_me_1"), true, ReasonAllow},
			// A single-character literal is not a prefix.
			{alice, "h", OpWrite, Topic("foo"), false, ReasonNoACL},
			{alice, "h", OpWrite, Topic("f"), true, ReasonAllow},
		},
	}, {
		name: "IPv6 hosts",
		acls: []Binding{allow(tp, lit, "orders", alice, "2001:db8::1", OpRead)},
		checks: []check{
			{alice, "2001:db8::1", OpRead, topic, true, ReasonAllow},
			{alice, "2001:db8::2", OpRead, topic, false, ReasonNoMatch},
		},
	}, {
		name: "cluster and transactional id resources",
		acls: []Binding{
			allow(ResourceCluster, lit, ClusterName, alice, "*", OpIdempotentWrite),
			allow(ResourceCluster, lit, ClusterName, bob, "*", OpAlter),
			allow(ResourceTransactionalID, pre, "app-", alice, "*", OpWrite),
		},
		checks: []check{
			{alice, "h", OpIdempotentWrite, Cluster(), true, ReasonAllow},
			{alice, "h", OpWrite, Cluster(), false, ReasonNoMatch},
			{bob, "h", OpDescribe, Cluster(), true, ReasonAllow},
			{bob, "h", OpCreate, Cluster(), false, ReasonNoMatch},
			{alice, "h", OpDescribe, TransactionalID("app-1"), true, ReasonAllow},
			{alice, "h", OpWrite, TransactionalID("other"), false, ReasonNoACL},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustSet(t, tt.acls...)
			for _, c := range tt.checks {
				d := Decide(tt.cfg, s, Request{c.principal, c.host, c.op, c.res})
				if d.Allowed != c.want || d.Reason != c.reason {
					t.Errorf("%s from %s %s %v: allowed %v (%s), want %v (%s)",
						c.principal, c.host, c.op, c.res, d.Allowed, d.Reason, c.want, c.reason)
				}
				if (d.Reason == ReasonAllow || d.Reason == ReasonDeny) && d.Binding.Permission == PermissionUnknown {
					t.Errorf("%s %s %v: decided by a binding but none returned", c.principal, c.op, c.res)
				}
				if d.Reason == ReasonDeny && d.Binding.Permission != PermissionDeny {
					t.Errorf("%s %s %v: denied by %v", c.principal, c.op, c.res, d.Binding)
				}
			}
		})
	}
}

func TestDecideNilSet(t *testing.T) {
	if d := Decide(Config{}, nil, Request{alice, "h", OpRead, Topic("t")}); d.Allowed || d.Reason != ReasonNoACL {
		t.Fatalf("nil set: %+v", d)
	}
	if d := Decide(Config{AllowIfNoACL: true}, nil, Request{alice, "h", OpRead, Topic("t")}); !d.Allowed {
		t.Fatalf("nil set, allow if no acl: %+v", d)
	}
}

func TestValidate(t *testing.T) {
	good := allow(tp, lit, "orders", alice, "*", OpRead)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []func(*Binding){
		func(b *Binding) { b.ResourceType = ResourceAny },
		func(b *Binding) { b.ResourceType = ResourceUnknown },
		func(b *Binding) { b.ResourceType = 9 },
		func(b *Binding) { b.PatternType = PatternMatch },
		func(b *Binding) { b.PatternType = PatternAny },
		func(b *Binding) { b.ResourceName = "" },
		func(b *Binding) { b.Operation = OpAny },
		func(b *Binding) { b.Operation = OpUnknown },
		func(b *Binding) { b.Permission = PermissionAny },
		func(b *Binding) { b.Principal = "alice" },
		func(b *Binding) { b.Principal = "User:" },
		func(b *Binding) { b.Host = "" },
		func(b *Binding) { b.ResourceType, b.ResourceName = ResourceCluster, "other" },
		func(b *Binding) { b.ResourceType, b.ResourceName, b.PatternType = ResourceCluster, ClusterName, pre },
	}
	for i, f := range bad {
		b := good
		f(&b)
		if err := b.Validate(); !errors.Is(err, ErrInvalidBinding) {
			t.Errorf("case %d %v: %v, want ErrInvalidBinding", i, b, err)
		}
		if _, err := NewSet([]Binding{good, b}); !errors.Is(err, ErrInvalidBinding) {
			t.Errorf("case %d: NewSet: %v", i, err)
		}
	}
}

// TestDecideAny follows Kafka's AuthorizerInterfaceDefaultTest cases of
// authorizeByResourceType.
func TestDecideAny(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		acls []Binding
		want bool
	}{
		{"no acls", Config{}, nil, false},
		{"no acls, allow if none", Config{AllowIfNoACL: true}, nil, true},
		{"super user", Config{SuperUsers: []string{alice}}, nil, true},
		{"literal allow", Config{}, []Binding{allow(tp, lit, "t", alice, "*", OpWrite)}, true},
		{"prefixed allow", Config{}, []Binding{allow(tp, pre, "t", alice, "*", OpWrite)}, true},
		{"all allow", Config{}, []Binding{allow(tp, lit, "t", WildcardPrincipal, "*", OpAll)}, true},
		{"other operation", Config{}, []Binding{allow(tp, lit, "t", alice, "*", OpRead)}, false},
		{"other principal", Config{}, []Binding{allow(tp, lit, "t", bob, "*", OpWrite)}, false},
		{"other host", Config{}, []Binding{allow(tp, lit, "t", alice, "10.9.9.9", OpWrite)}, false},
		{"other resource type", Config{}, []Binding{allow(ResourceGroup, lit, "t", alice, "*", OpWrite)}, false},
		{"deny same literal", Config{}, []Binding{
			allow(tp, lit, "t", alice, "*", OpWrite), deny(tp, lit, "t", alice, "*", OpWrite)}, false},
		{"deny wildcard", Config{}, []Binding{
			allow(tp, lit, "t", alice, "*", OpWrite), deny(tp, lit, "*", WildcardPrincipal, "*", OpAll)}, false},
		{"deny prefix covers", Config{}, []Binding{
			allow(tp, lit, "team.t", alice, "*", OpWrite), allow(tp, pre, "team.x", alice, "*", OpWrite),
			deny(tp, pre, "team.", alice, "*", OpWrite)}, false},
		{"deny prefix covers one of two", Config{}, []Binding{
			allow(tp, lit, "team.t", alice, "*", OpWrite), allow(tp, lit, "other", alice, "*", OpWrite),
			deny(tp, pre, "team.", alice, "*", OpWrite)}, true},
		{"deny of another literal", Config{}, []Binding{
			allow(tp, lit, "t", alice, "*", OpWrite), deny(tp, lit, "u", alice, "*", OpWrite)}, true},
		{"acls of the type for others only, allow if none", Config{AllowIfNoACL: true}, []Binding{
			allow(tp, lit, "t", bob, "*", OpWrite)}, false},
	}
	for _, tt := range tests {
		s := mustSet(t, tt.acls...)
		if got := DecideAny(tt.cfg, s, alice, "10.0.0.1", OpWrite, tp); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
