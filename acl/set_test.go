package acl

import (
	"errors"
	"slices"
	"testing"
)

func ptr(s string) *string { return &s }

// TestFilterMatches follows Kafka's ResourcePatternFilterTest and
// AclBindingFilterTest.
func TestFilterMatches(t *testing.T) {
	b := func(rt ResourceType, pt PatternType, name string) Binding {
		return allow(rt, pt, name, alice, "*", OpRead)
	}
	f := func(rt ResourceType, pt PatternType, name *string) Filter {
		return Filter{ResourceType: rt, PatternType: pt, ResourceName: name, Operation: OpAny, Permission: PermissionAny}
	}
	tests := []struct {
		f    Filter
		b    Binding
		want bool
	}{
		{f(tp, PatternLiteral, ptr("Name")), b(ResourceGroup, lit, "Name"), false},
		{f(tp, PatternLiteral, ptr("Name")), b(tp, lit, "Name"), true},
		{f(tp, PatternLiteral, ptr("Name")), b(tp, lit, "Name2"), false},
		{f(tp, PatternLiteral, ptr("Name")), b(tp, pre, "Name"), false},
		{f(tp, PatternPrefixed, ptr("Name")), b(tp, pre, "Name"), true},
		{f(tp, PatternPrefixed, ptr("Na")), b(tp, pre, "Name"), false},
		{f(ResourceAny, PatternLiteral, ptr("Name")), b(tp, lit, "Name"), true},
		{f(tp, PatternAny, ptr("Name")), b(tp, lit, "Name"), true},
		{f(tp, PatternAny, ptr("Name")), b(tp, pre, "Name"), true},
		{f(tp, PatternAny, ptr("Name")), b(tp, lit, "*"), false},
		{f(tp, PatternAny, nil), b(tp, pre, "x"), true},
		{f(tp, PatternMatch, ptr("Name")), b(tp, lit, "Name"), true},
		{f(tp, PatternMatch, ptr("Name")), b(tp, lit, "*"), true},
		{f(tp, PatternMatch, ptr("Name")), b(tp, pre, "Na"), true},
		{f(tp, PatternMatch, ptr("Name")), b(tp, pre, "Name"), true},
		{f(tp, PatternMatch, ptr("Name")), b(tp, pre, "Names"), false},
		{f(tp, PatternMatch, ptr("Name")), b(tp, lit, "Names"), false},
		{f(tp, PatternLiteral, ptr("*")), b(tp, lit, "*"), true},
		{f(tp, PatternLiteral, ptr("Name")), b(tp, lit, "*"), false},
		{AnyFilter, b(ResourceCluster, lit, ClusterName), true},
		{Filter{ResourceType: ResourceAny, PatternType: PatternAny, Principal: ptr(bob), Operation: OpAny, Permission: PermissionAny}, b(tp, lit, "x"), false},
		{Filter{ResourceType: ResourceAny, PatternType: PatternAny, Host: ptr("*"), Operation: OpRead, Permission: PermissionAllow}, b(tp, lit, "x"), true},
		{Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpWrite, Permission: PermissionAny}, b(tp, lit, "x"), false},
		{Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionDeny}, b(tp, lit, "x"), false},
		{Filter{}, b(tp, lit, "x"), false},
	}
	for i, tt := range tests {
		if got := tt.f.Matches(tt.b); got != tt.want {
			t.Errorf("case %d: %+v matches %v: %v, want %v", i, tt.f, tt.b, got, tt.want)
		}
	}
	if err := (Filter{}).Validate(); !errors.Is(err, ErrInvalidFilter) {
		t.Errorf("zero filter: %v", err)
	}
	if err := AnyFilter.Validate(); err != nil {
		t.Errorf("AnyFilter: %v", err)
	}
}

func TestSetAddDelete(t *testing.T) {
	a := allow(tp, lit, "orders", alice, "*", OpRead)
	b := allow(tp, pre, "ord", bob, "*", OpWrite)
	c := deny(ResourceGroup, lit, "g", bob, "10.0.0.1", OpRead)
	var s0 *Set
	s1, errs := s0.Add([]Binding{a, b, a, {}})
	if errs[0] != nil || errs[1] != nil || errs[2] != nil || !errors.Is(errs[3], ErrInvalidBinding) {
		t.Fatalf("Add errors: %v", errs)
	}
	if s1.Len() != 2 || s0.Len() != 0 {
		t.Fatalf("Len %d (before: %d), want 2 (0)", s1.Len(), s0.Len())
	}
	s2, _ := s1.Add([]Binding{c})
	if s1.Len() != 2 || s2.Len() != 3 {
		t.Fatalf("Add changed its receiver or lost a binding: %d, %d", s1.Len(), s2.Len())
	}
	if !Decide(Config{}, s2, Request{bob, "h", OpWrite, Topic("orders")}).Allowed {
		t.Fatal("bob may not write orders")
	}
	topics := Filter{ResourceType: tp, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}
	if got := s2.Match(topics); !slices.Equal(got, []Binding{a, b}) {
		t.Fatalf("Match topics: %v", got)
	}
	s3, deleted := s2.Delete([]Filter{
		{ResourceType: tp, PatternType: PatternMatch, ResourceName: ptr("orders"), Principal: ptr(bob), Operation: OpAny, Permission: PermissionAny},
		{ResourceType: ResourceAny, PatternType: PatternAny, Principal: ptr(bob), Operation: OpAny, Permission: PermissionAny},
		{ResourceType: ResourceAny, PatternType: PatternAny, Principal: ptr("User:nobody"), Operation: OpAny, Permission: PermissionAny},
	})
	if !slices.Equal(deleted[0], []Binding{b}) || !slices.Equal(deleted[1], []Binding{b, c}) || deleted[2] != nil {
		t.Fatalf("deleted %v", deleted)
	}
	if got := s3.Bindings(); !slices.Equal(got, []Binding{a}) || s2.Len() != 3 {
		t.Fatalf("after Delete: %v (before: %d)", got, s2.Len())
	}
	if Decide(Config{}, s3, Request{bob, "h", OpWrite, Topic("orders")}).Allowed {
		t.Fatal("bob may still write orders")
	}
}

func TestParseNames(t *testing.T) {
	for _, tt := range []struct {
		s    string
		want Operation
	}{{"Read", OpRead}, {"READ", OpRead}, {"DescribeConfigs", OpDescribeConfigs}, {"describe_configs", OpDescribeConfigs}, {"IdempotentWrite", OpIdempotentWrite}, {"All", OpAll}} {
		if got, ok := ParseOperation(tt.s); !ok || got != tt.want {
			t.Errorf("ParseOperation(%q) = %v, %v", tt.s, got, ok)
		}
	}
	if _, ok := ParseOperation("fly"); ok {
		t.Error("ParseOperation(fly) ok")
	}
	if rt, ok := ParseResourceType("transactional-id"); !ok || rt != ResourceTransactionalID {
		t.Errorf("ParseResourceType: %v %v", rt, ok)
	}
	if pt, ok := ParsePatternType("prefixed"); !ok || pt != PatternPrefixed {
		t.Errorf("ParsePatternType: %v %v", pt, ok)
	}
	if p, ok := ParsePermission("deny"); !ok || p != PermissionDeny {
		t.Errorf("ParsePermission: %v %v", p, ok)
	}
}
