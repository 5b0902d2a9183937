package acl

import (
	"cmp"
	"slices"
	"strings"
)

// Set is an immutable set of valid bindings, indexed for Decide. The zero
// value and nil are empty. Add and Delete return a new Set; a Set may be
// read from any number of goroutines.
type Set struct {
	all    []Binding // sorted (compare), no duplicates
	byType map[ResourceType]*index
}

type index struct {
	literal  map[string][]Binding // by resource name
	prefixed []Binding
}

// NewSet returns the set of bs, which must be valid (Binding.Validate);
// duplicates are kept once.
func NewSet(bs []Binding) (*Set, error) {
	for _, b := range bs {
		if err := b.Validate(); err != nil {
			return nil, err
		}
	}
	return build(slices.Clone(bs)), nil
}

func build(all []Binding) *Set {
	slices.SortFunc(all, compare)
	all = slices.Compact(all)
	s := &Set{all: all, byType: map[ResourceType]*index{}}
	for _, b := range all {
		idx := s.byType[b.ResourceType]
		if idx == nil {
			idx = &index{literal: map[string][]Binding{}}
			s.byType[b.ResourceType] = idx
		}
		if b.PatternType == PatternPrefixed {
			idx.prefixed = append(idx.prefixed, b)
		} else {
			idx.literal[b.ResourceName] = append(idx.literal[b.ResourceName], b)
		}
	}
	return s
}

func compare(a, b Binding) int {
	return cmp.Or(
		cmp.Compare(a.ResourceType, b.ResourceType),
		cmp.Compare(a.PatternType, b.PatternType),
		strings.Compare(a.ResourceName, b.ResourceName),
		strings.Compare(a.Principal, b.Principal),
		strings.Compare(a.Host, b.Host),
		cmp.Compare(a.Operation, b.Operation),
		cmp.Compare(a.Permission, b.Permission),
	)
}

// index is the bindings of resource type t, nil if none.
func (s *Set) index(t ResourceType) *index {
	if s == nil {
		return nil
	}
	return s.byType[t]
}

// Len is the number of bindings.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.all)
}

// Bindings returns a copy of the bindings, sorted.
func (s *Set) Bindings() []Binding {
	if s == nil {
		return nil
	}
	return slices.Clone(s.all)
}

// Match returns the bindings f matches, sorted.
func (s *Set) Match(f Filter) []Binding {
	if s == nil {
		return nil
	}
	var out []Binding
	for _, b := range s.all {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}

// Add returns s with bs added (one error per binding, nil for those
// added or already there; an invalid binding is left out). s is
// unchanged.
func (s *Set) Add(bs []Binding) (*Set, []error) {
	errs := make([]error, len(bs))
	all := slices.Clip(s.Bindings())
	for i, b := range bs {
		if errs[i] = b.Validate(); errs[i] == nil {
			all = append(all, b)
		}
	}
	return build(all), errs
}

// Delete returns s without the bindings any of fs matches, and the
// bindings each filter matched (a binding two filters match is listed
// under both). s is unchanged.
func (s *Set) Delete(fs []Filter) (*Set, [][]Binding) {
	deleted := make([][]Binding, len(fs))
	var kept []Binding
	for _, b := range s.Bindings() {
		gone := false
		for i := range fs {
			if fs[i].Matches(b) {
				deleted[i] = append(deleted[i], b)
				gone = true
			}
		}
		if !gone {
			kept = append(kept, b)
		}
	}
	return build(kept), deleted
}

// Must is NewSet for bindings known to be valid; it panics otherwise.
func Must(bs []Binding) *Set {
	s, err := NewSet(bs)
	if err != nil {
		panic(err)
	}
	return s
}
