package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/log"
)

const quotasHelp = `
Alters and describes client quotas (byte rates a user and/or a client id
may produce and fetch at; a broker over them delays the client), with
kafka-configs.sh's flags. Over --bootstrap-server the client must be
allowed to (a super user, or AlterConfigs/DescribeConfigs on the
cluster); --data-dir works on a stopped standalone broker's data dir.

  strata quotas --bootstrap-server ADDR|--data-dir DIR --alter \
      --entity-type users --entity-name alice [--entity-type clients --entity-default] \
      --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
  strata quotas ... --alter --entity-type clients --entity-name app --delete-config producer_byte_rate
  strata quotas ... --describe [--entity-type users [--entity-name alice|--entity-default]]

Each --entity-type is followed by its --entity-name or --entity-default.
A client's quota is the first found of: its user and client id, its user
and the default client id, its user, the default user and its client id,
the default user and client id, the default user, its client id, the
default client id. --describe without an entity lists every quota; with
a type and no name, every quota of that type.`

// quotaEntityArg is one --entity-type and its name.
type quotaEntityArg struct {
	typ, name string
	named     bool // --entity-name or --entity-default given
	def       bool
}

// quotaEntityFlags collects --entity-type, --entity-name and
// --entity-default in order.
type quotaEntityFlags struct{ args []quotaEntityArg }

type entityFlag struct {
	f    *quotaEntityFlags
	kind string
}

func (e entityFlag) String() string   { return "" }
func (e entityFlag) IsBoolFlag() bool { return e.kind == "default" }
func (e entityFlag) Set(v string) error {
	a := &e.f.args
	if e.kind == "type" {
		*a = append(*a, quotaEntityArg{typ: v})
		return nil
	}
	if len(*a) == 0 || (*a)[len(*a)-1].named {
		return fmt.Errorf("--entity-%s must follow an --entity-type of its own", e.kind)
	}
	last := &(*a)[len(*a)-1]
	last.named = true
	if e.kind == "default" {
		last.def = true
	} else {
		last.name = v
	}
	return nil
}

// entityTypes are kafka-configs.sh's entity types and Kafka's quota entity
// types.
var entityTypes = map[string]string{"users": log.QuotaEntityUser, "clients": log.QuotaEntityClientID}

// quotasBackend is where quotas works: a data dir or a broker.
type quotasBackend interface {
	alter(a log.QuotaAlteration) error
	describe() (*log.QuotaSet, error)
	Close() error
}

func runQuotas(e *env, args []string) (err error) {
	fs := newFlags(e, "quotas", "--bootstrap-server ADDR|--data-dir DIR --alter|--describe [flags]", quotasHelp)
	var t target
	t.register(fs)
	var ents quotaEntityFlags
	var alter, describe bool
	var add, del stringList
	fs.BoolVar(&alter, "alter", false, "alter the quotas of the entity")
	fs.BoolVar(&describe, "describe", false, "describe quotas")
	fs.Var(entityFlag{&ents, "type"}, "entity-type", "`TYPE`: users or clients; repeatable, each followed by its name")
	fs.Var(entityFlag{&ents, "name"}, "entity-name", "`NAME` of the entity type before it")
	fs.Var(entityFlag{&ents, "default"}, "entity-default", "the default entity of the type before it")
	fs.Var(&add, "add-config", "`KEY=VALUE[,...]`: producer_byte_rate, consumer_byte_rate (bytes per second); repeatable")
	fs.Var(&del, "delete-config", "`KEY[,...]` to remove; repeatable")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if alter == describe {
		return usagef("want one of --alter, --describe")
	}
	entity, err := ents.entity(alter)
	if err != nil {
		return err
	}
	var a log.QuotaAlteration
	if alter {
		if a, err = quotaAlteration(entity, add, del); err != nil {
			return err
		}
	} else if len(add) > 0 || len(del) > 0 {
		return usagef("--add-config and --delete-config need --alter")
	}
	if err := t.check(); err != nil {
		return err
	}
	var be quotasBackend
	if t.dataDir != "" {
		b, err := openBroker(e, &t, false)
		if err != nil {
			return err
		}
		be = brokerQuotas{b}
	} else {
		ad, err := dialAdmin(&t)
		if err != nil {
			return err
		}
		be = adminQuotas{ad}
	}
	defer func() {
		if cerr := be.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	if alter {
		if err := be.alter(a); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "Completed updating config for %s.\n", entity)
		return nil
	}
	set, err := be.describe()
	if err != nil {
		return err
	}
	return printQuotas(e.stdout, set, ents.args)
}

// entity is the entity the flags name; for --alter every type needs a
// name or --entity-default.
func (f *quotaEntityFlags) entity(alter bool) (log.QuotaEntity, error) {
	var e log.QuotaEntity
	if alter && len(f.args) == 0 {
		return e, usagef("--alter needs --entity-type and --entity-name or --entity-default")
	}
	for _, a := range f.args {
		typ, ok := entityTypes[a.typ]
		if !ok {
			return e, usagef("unknown --entity-type %q (users or clients)", a.typ)
		}
		if alter && !a.named {
			return e, usagef("--entity-type %s needs --entity-name or --entity-default", a.typ)
		}
		part := &e.User
		if typ == log.QuotaEntityClientID {
			part = &e.ClientID
		}
		if part.In {
			return e, usagef("--entity-type %s given twice", a.typ)
		}
		*part = log.QuotaName{In: true, Default: a.def, Name: a.name}
	}
	return e, nil
}

// quotaAlteration is the changes --add-config and --delete-config name.
func quotaAlteration(e log.QuotaEntity, add, del []string) (log.QuotaAlteration, error) {
	a := log.QuotaAlteration{Entity: e}
	for _, list := range add {
		for _, kv := range strings.Split(list, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return a, usagef("--add-config %q: want KEY=VALUE", kv)
			}
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return a, usagef("--add-config %s: %q is not a number", k, v)
			}
			a.Ops = append(a.Ops, log.QuotaOp{Key: k, Value: f})
		}
	}
	for _, list := range del {
		for _, k := range strings.Split(list, ",") {
			a.Ops = append(a.Ops, log.QuotaOp{Key: k, Remove: true})
		}
	}
	if len(a.Ops) == 0 {
		return a, usagef("--alter needs --add-config or --delete-config")
	}
	if err := a.Validate(); err != nil {
		return a, usagef("%v", err)
	}
	return a, nil
}

// printQuotas prints the quotas of the entities the flags select: of each
// type given, the name given (every name without one); only those types.
func printQuotas(w io.Writer, set *log.QuotaSet, args []quotaEntityArg) error {
	n := 0
	for _, e := range set.Entities() {
		if !quotaSelected(e, args) {
			continue
		}
		q := set.Quotas(e)
		var kv []string
		for _, k := range []string{log.QuotaConsumerByteRate, log.QuotaProducerByteRate} {
			if v, ok := q[k]; ok {
				kv = append(kv, k+"="+strconv.FormatFloat(v, 'f', -1, 64))
			}
		}
		fmt.Fprintf(w, "Quota configs for %s are %s\n", e, strings.Join(kv, ","))
		n++
	}
	if n == 0 {
		fmt.Fprintln(w, "No quotas.")
	}
	return nil
}

func quotaSelected(e log.QuotaEntity, args []quotaEntityArg) bool {
	if len(args) == 0 {
		return true
	}
	types := 0
	for _, a := range args {
		part := e.User
		if entityTypes[a.typ] == log.QuotaEntityClientID {
			part = e.ClientID
		}
		if !part.In || (a.named && (part.Default != a.def || part.Name != a.name)) {
			return false
		}
		types++
	}
	in := 0
	for _, p := range []log.QuotaName{e.User, e.ClientID} {
		if p.In {
			in++
		}
	}
	return in == types
}

// brokerQuotas works on a data dir.
type brokerQuotas struct{ b *log.Broker }

func (b brokerQuotas) alter(a log.QuotaAlteration) error {
	errs, err := b.b.AlterClientQuotas(context.Background(), []log.QuotaAlteration{a}, false)
	return errors.Join(append(errs, err)...)
}

func (b brokerQuotas) describe() (*log.QuotaSet, error) { return b.b.ClientQuotas(), nil }

func (b brokerQuotas) Close() error {
	var err error
	closeBroker(b.b, &err)
	return err
}

// adminQuotas works over the Kafka protocol (AlterClientQuotas and
// DescribeClientQuotas v0, which Kafka 2.6+ serves).
type adminQuotas struct{ a *admin }

func (a adminQuotas) Close() error { return a.a.Close() }

func wireName(n log.QuotaName) *string {
	if n.Default {
		return nil
	}
	return kmsg.StringPtr(n.Name)
}

func (a adminQuotas) alter(q log.QuotaAlteration) error {
	req := kmsg.NewPtrAlterClientQuotasRequest()
	entry := kmsg.NewAlterClientQuotasRequestEntry()
	for _, p := range []struct {
		typ string
		n   log.QuotaName
	}{{log.QuotaEntityUser, q.Entity.User}, {log.QuotaEntityClientID, q.Entity.ClientID}} {
		if p.n.In {
			ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
			ent.Type, ent.Name = p.typ, wireName(p.n)
			entry.Entity = append(entry.Entity, ent)
		}
	}
	for _, o := range q.Ops {
		op := kmsg.NewAlterClientQuotasRequestEntryOp()
		op.Key, op.Value, op.Remove = o.Key, o.Value, o.Remove
		entry.Ops = append(entry.Ops, op)
	}
	req.Entries = append(req.Entries, entry)
	r, err := a.a.do(req, 1)
	if err != nil {
		return err
	}
	for _, res := range r.(*kmsg.AlterClientQuotasResponse).Entries {
		if err := kafkaCodeError(res.ErrorCode, res.ErrorMessage); err != nil {
			return err
		}
	}
	return nil
}

func (a adminQuotas) describe() (*log.QuotaSet, error) {
	r, err := a.a.do(kmsg.NewPtrDescribeClientQuotasRequest(), 1)
	if err != nil {
		return nil, err
	}
	resp := r.(*kmsg.DescribeClientQuotasResponse)
	if err := kafkaCodeError(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return nil, err
	}
	var as []log.QuotaAlteration
	for _, en := range resp.Entries {
		var q log.QuotaAlteration
		for _, p := range en.Entity {
			n := log.QuotaDefault()
			if p.Name != nil {
				n = log.QuotaNamed(*p.Name)
			}
			switch p.Type {
			case log.QuotaEntityUser:
				q.Entity.User = n
			case log.QuotaEntityClientID:
				q.Entity.ClientID = n
			default:
				continue // ip quotas of a Kafka broker: not shown
			}
		}
		for _, v := range en.Values {
			if v.Key == log.QuotaProducerByteRate || v.Key == log.QuotaConsumerByteRate {
				q.Ops = append(q.Ops, log.QuotaOp{Key: v.Key, Value: v.Value})
			} // a Kafka broker's request_percentage and others: not shown
		}
		if q.Validate() == nil {
			as = append(as, q)
		}
	}
	set, _ := (&log.QuotaSet{}).Alter(as)
	return set, nil
}
