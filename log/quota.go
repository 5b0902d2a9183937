package log

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// Client quotas (KIP-13, KIP-55, KIP-546): byte rates a user and/or a
// client id may produce and fetch at, the quota of a client found by
// Kafka's precedence order (QuotaSet.Lookup). Package kafka enforces them
// by delaying; a standalone broker keeps them in quotas.json of its data
// dir (quota_store.go).

// The quota keys Strata enforces (Kafka's names), in bytes per second.
const (
	QuotaProducerByteRate = "producer_byte_rate"
	QuotaConsumerByteRate = "consumer_byte_rate"
)

// The entity types of a quota entity (Kafka's names).
const (
	QuotaEntityUser     = "user"
	QuotaEntityClientID = "client-id"
)

// ErrInvalidQuota is an alteration with an invalid entity, key or value:
// it changes nothing.
var ErrInvalidQuota = errors.New("log: invalid client quota")

// QuotaName is one part of a quota entity: absent (In false), the default
// of its type (Default), or a name.
type QuotaName struct {
	In      bool
	Default bool
	Name    string
}

// QuotaNamed is the part of an entity naming name.
func QuotaNamed(name string) QuotaName { return QuotaName{In: true, Name: name} }

// QuotaDefault is the default part of an entity type (Kafka's <default>).
func QuotaDefault() QuotaName { return QuotaName{In: true, Default: true} }

// String is the part as Kafka's config paths write it.
func (n QuotaName) String() string {
	switch {
	case !n.In:
		return ""
	case n.Default:
		return "<default>"
	}
	return n.Name
}

// QuotaEntity is who a quota applies to: a user, a client id, or a user's
// client id; a default part applies to each user (or client id) without
// a quota of its own.
type QuotaEntity struct {
	User, ClientID QuotaName
}

func (e QuotaEntity) String() string {
	s := ""
	if e.User.In {
		s = "users/" + e.User.String()
	}
	if e.ClientID.In {
		if s != "" {
			s += "/"
		}
		s += "clients/" + e.ClientID.String()
	}
	return s
}

// Validate reports an entity that names nothing, or names a user or
// client id "<default>" (the default's name in quotas.json and in Kafka's
// tools).
func (e QuotaEntity) Validate() error {
	if !e.User.In && !e.ClientID.In {
		return fmt.Errorf("%w: empty entity", ErrInvalidQuota)
	}
	for _, n := range []QuotaName{e.User, e.ClientID} {
		if n.In && !n.Default && n.Name == quotaDefault {
			return fmt.Errorf("%w: %q is the name of the default entity", ErrInvalidQuota, quotaDefault)
		}
	}
	return nil
}

// QuotaOp is one change of an alteration: set Key to Value, or remove it.
type QuotaOp struct {
	Key    string
	Value  float64
	Remove bool
}

// QuotaAlteration is the changes to one entity's quotas.
type QuotaAlteration struct {
	Entity QuotaEntity
	Ops    []QuotaOp
}

// Validate checks the entity, the keys (only the byte rates are served)
// and the values (whole and positive, as Kafka's LONG quota configs).
func (a QuotaAlteration) Validate() error {
	if err := a.Entity.Validate(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, op := range a.Ops {
		if op.Key != QuotaProducerByteRate && op.Key != QuotaConsumerByteRate {
			return fmt.Errorf("%w: unknown or unsupported quota key %q", ErrInvalidQuota, op.Key)
		}
		if seen[op.Key] {
			return fmt.Errorf("%w: key %q named twice", ErrInvalidQuota, op.Key)
		}
		seen[op.Key] = true
		if op.Remove {
			continue
		}
		if math.IsNaN(op.Value) || op.Value <= 0 || op.Value != math.Trunc(op.Value) || op.Value > math.MaxInt64 {
			return fmt.Errorf("%w: %s must be a positive whole number, not %v", ErrInvalidQuota, op.Key, op.Value)
		}
	}
	return nil
}

// QuotaSet is a set of quotas, never changed once made (a change makes a
// new set): safe for concurrent use.
type QuotaSet struct {
	m map[QuotaEntity]map[string]float64
}

// Len is the number of entities with quotas.
func (s *QuotaSet) Len() int {
	if s == nil {
		return 0
	}
	return len(s.m)
}

// Quotas returns e's quotas (nil if none); the map must not be changed.
func (s *QuotaSet) Quotas(e QuotaEntity) map[string]float64 {
	if s == nil {
		return nil
	}
	return s.m[e]
}

// Entities returns the entities with quotas, sorted.
func (s *QuotaSet) Entities() []QuotaEntity {
	if s == nil {
		return nil
	}
	es := make([]QuotaEntity, 0, len(s.m))
	for e := range s.m {
		es = append(es, e)
	}
	sort.Slice(es, func(i, j int) bool { return es[i].String() < es[j].String() })
	return es
}

// Alter returns the set with a's changes, and whether it changed. a must
// be valid.
func (s *QuotaSet) Alter(as []QuotaAlteration) (*QuotaSet, bool) {
	next := &QuotaSet{m: map[QuotaEntity]map[string]float64{}}
	if s != nil {
		for e, q := range s.m {
			next.m[e] = q
		}
	}
	changed := false
	for _, a := range as {
		q := map[string]float64{}
		for k, v := range next.m[a.Entity] {
			q[k] = v
		}
		for _, op := range a.Ops {
			old, had := q[op.Key]
			if op.Remove {
				delete(q, op.Key)
				changed = changed || had
			} else {
				q[op.Key] = op.Value
				changed = changed || !had || old != op.Value
			}
		}
		if len(q) == 0 {
			delete(next.m, a.Entity)
		} else {
			next.m[a.Entity] = q
		}
	}
	return next, changed
}

// Lookup finds the quota key of a client, user (the principal's name) and
// clientID, in Kafka's order of precedence:
//
//	users/<user>/clients/<client-id>
//	users/<user>/clients/<default>
//	users/<user>
//	users/<default>/clients/<client-id>
//	users/<default>/clients/<default>
//	users/<default>
//	clients/<client-id>
//	clients/<default>
//
// It returns the quota and the entity that holds it, ok false if none
// does (no quota).
func (s *QuotaSet) Lookup(key, user, clientID string) (quota float64, from QuotaEntity, ok bool) {
	if s.Len() == 0 {
		return 0, QuotaEntity{}, false
	}
	u, ud, c, cd := QuotaNamed(user), QuotaDefault(), QuotaNamed(clientID), QuotaDefault()
	for _, e := range [...]QuotaEntity{
		{User: u, ClientID: c}, {User: u, ClientID: cd}, {User: u},
		{User: ud, ClientID: c}, {User: ud, ClientID: cd}, {User: ud},
		{ClientID: c}, {ClientID: cd},
	} {
		if v, ok := s.m[e][key]; ok {
			return v, e, true
		}
	}
	return 0, QuotaEntity{}, false
}
