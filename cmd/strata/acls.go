package main

import (
	"fmt"
	"io"

	"github.com/strata-log/strata/acl"
)

const aclsHelp = `
Adds, removes and lists ACLs (who may do what, enforced by a broker with
an authorizer: strata serve --override super.users=User:admin, or Apache
Kafka's), with kafka-acls.sh's flags. Over --bootstrap-server the client
must be allowed to (a super user, or Alter/Describe on the cluster);
--data-dir works on a stopped standalone broker's data dir, which is how
the first ACLs of a new broker can be made without a super user.

  strata acls --bootstrap-server ADDR|--data-dir DIR --add \
      --allow-principal User:alice [--allow-host IP] --operation Read --operation Describe \
      --topic orders [--group app] [--resource-pattern-type prefixed]
  strata acls ... --add --consumer --allow-principal User:alice --topic orders --group app
  strata acls ... --add --producer --allow-principal User:bob --topic orders
  strata acls ... --remove [--deny-principal User:eve] [--operation Write] --topic orders
  strata acls ... --list [--topic orders] [--principal User:alice]

--operation defaults to All; hosts to * (any). --producer is Write,
Describe and Create on the topics (and IdempotentWrite on the cluster);
--consumer Read and Describe on the topics and Read on the groups.
--remove without principals removes every ACL of the resources. --list
prints the ACLs of the resources given (every ACL without), with
--resource-pattern-type any (the default of --list) or match (those that
apply to the name).`

// aclsFlags are acls' flags.
type aclsFlags struct {
	add, remove, list            bool
	allowPrincipals, allowHosts  stringList
	denyPrincipals, denyHosts    stringList
	principals                   stringList // --list's filter
	operations                   stringList
	topics, groups, transactions stringList
	cluster, producer, consumer  bool
	patternType                  string
}

// aclsBackend is where acls works: a data dir or a broker.
type aclsBackend interface {
	create(bs []acl.Binding) error
	remove(fs []acl.Filter) ([]acl.Binding, error)
	describe(f acl.Filter) ([]acl.Binding, error)
	Close() error
}

func runACLs(e *env, args []string) (err error) {
	fs := newFlags(e, "acls", "--bootstrap-server ADDR|--data-dir DIR --add|--remove|--list [flags]", aclsHelp)
	var t target
	t.register(fs)
	var f aclsFlags
	fs.BoolVar(&f.add, "add", false, "add the ACLs the flags describe")
	fs.BoolVar(&f.remove, "remove", false, "remove the ACLs the flags describe")
	fs.BoolVar(&f.list, "list", false, "list ACLs")
	fs.Var(&f.allowPrincipals, "allow-principal", "`PRINCIPAL` (User:NAME, User:*) allowed; repeatable")
	fs.Var(&f.denyPrincipals, "deny-principal", "`PRINCIPAL` denied; repeatable")
	fs.Var(&f.allowHosts, "allow-host", "`IP` the allowed principals connect from (default *); repeatable")
	fs.Var(&f.denyHosts, "deny-host", "`IP` the denied principals connect from (default *); repeatable")
	fs.Var(&f.principals, "principal", "`PRINCIPAL` whose ACLs --list prints; repeatable")
	fs.Var(&f.operations, "operation", "`OP`: All, Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite; repeatable (default All)")
	fs.Var(&f.topics, "topic", "`TOPIC` (* for every topic); repeatable")
	fs.Var(&f.groups, "group", "`GROUP` (* for every group); repeatable")
	fs.Var(&f.transactions, "transactional-id", "`ID` (* for every one); repeatable")
	fs.BoolVar(&f.cluster, "cluster", false, "the cluster resource")
	fs.BoolVar(&f.producer, "producer", false, "the ACLs of a producer (with --add or --remove)")
	fs.BoolVar(&f.consumer, "consumer", false, "the ACLs of a consumer (with --add or --remove)")
	fs.StringVar(&f.patternType, "resource-pattern-type", "", "`TYPE` of the resource names: literal (default), prefixed; for --list and --remove also any, match")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	n := 0
	for _, b := range []bool{f.add, f.remove, f.list} {
		if b {
			n++
		}
	}
	if n != 1 {
		return usagef("want one of --add, --remove, --list")
	}
	if err := t.check(); err != nil {
		return err
	}
	var be aclsBackend
	if t.dataDir != "" {
		b, err := openBroker(e, &t, false)
		if err != nil {
			return err
		}
		be = brokerACLs{b}
	} else {
		a, err := dialAdmin(&t)
		if err != nil {
			return err
		}
		be = adminACLs{a}
	}
	defer func() {
		if cerr := be.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	switch {
	case f.add:
		bs, err := f.bindings()
		if err != nil {
			return err
		}
		if err := be.create(bs); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "Added %d ACLs\n", len(bs))
		return nil
	case f.remove:
		fs, err := f.removeFilters()
		if err != nil {
			return err
		}
		gone, err := be.remove(fs)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "Removed %d ACLs\n", len(gone))
		printBindings(e.stdout, gone)
		return nil
	}
	fs2, err := f.listFilters()
	if err != nil {
		return err
	}
	var all []acl.Binding
	seen := map[acl.Binding]bool{}
	for _, flt := range fs2 {
		bs, err := be.describe(flt)
		if err != nil {
			return err
		}
		for _, b := range bs {
			if !seen[b] {
				seen[b] = true
				all = append(all, b)
			}
		}
	}
	printBindings(e.stdout, acl.Must(all).Bindings())
	return nil
}

// resources are the resources the flags name, with their pattern type.
func (f *aclsFlags) resources(forAdd bool) ([]acl.Binding, error) {
	pt := acl.PatternLiteral
	if f.patternType != "" {
		var ok bool
		if pt, ok = acl.ParsePatternType(f.patternType); !ok || pt == acl.PatternUnknown {
			return nil, usagef("--resource-pattern-type %q: want literal, prefixed, any or match", f.patternType)
		}
		if forAdd && pt != acl.PatternLiteral && pt != acl.PatternPrefixed {
			return nil, usagef("--resource-pattern-type %s: --add takes literal or prefixed", f.patternType)
		}
	}
	var out []acl.Binding
	add := func(rt acl.ResourceType, names []string) {
		for _, n := range names {
			out = append(out, acl.Binding{ResourceType: rt, ResourceName: n, PatternType: pt})
		}
	}
	add(acl.ResourceTopic, f.topics)
	add(acl.ResourceGroup, f.groups)
	add(acl.ResourceTransactionalID, f.transactions)
	if f.cluster || f.producer && forAdd && len(f.topics) > 0 {
		out = append(out, acl.Binding{ResourceType: acl.ResourceCluster, ResourceName: acl.ClusterName, PatternType: acl.PatternLiteral})
	}
	return out, nil
}

// operationsFor are the operations the flags give for a resource type.
func (f *aclsFlags) operationsFor(rt acl.ResourceType) ([]acl.Operation, error) {
	var ops []acl.Operation
	switch {
	case f.producer && rt == acl.ResourceTopic:
		ops = append(ops, acl.OpWrite, acl.OpDescribe, acl.OpCreate)
	case f.producer && rt == acl.ResourceCluster && !f.cluster:
		ops = append(ops, acl.OpIdempotentWrite)
	case f.consumer && rt == acl.ResourceTopic:
		ops = append(ops, acl.OpRead, acl.OpDescribe)
	case f.consumer && rt == acl.ResourceGroup:
		ops = append(ops, acl.OpRead)
	}
	for _, s := range f.operations {
		op, ok := acl.ParseOperation(s)
		if !ok || op == acl.OpUnknown || op == acl.OpAny {
			return nil, usagef("--operation %q is not an operation", s)
		}
		ops = append(ops, op)
	}
	if len(ops) == 0 && !f.producer && !f.consumer {
		ops = []acl.Operation{acl.OpAll}
	}
	return ops, nil
}

type entry struct {
	principal, host string
	perm            acl.Permission
}

// entries are the (principal, host, permission) the flags give.
func (f *aclsFlags) entries() ([]entry, error) {
	var out []entry
	for _, side := range []struct {
		principals, hosts stringList
		perm              acl.Permission
	}{{f.allowPrincipals, f.allowHosts, acl.PermissionAllow}, {f.denyPrincipals, f.denyHosts, acl.PermissionDeny}} {
		hosts := side.hosts
		if len(hosts) == 0 {
			hosts = stringList{acl.WildcardHost}
		}
		for _, p := range side.principals {
			if _, _, err := acl.ParsePrincipal(p); err != nil {
				return nil, usagef("%v", err)
			}
			for _, h := range hosts {
				out = append(out, entry{p, h, side.perm})
			}
		}
	}
	return out, nil
}

// bindings are the ACLs --add makes.
func (f *aclsFlags) bindings() ([]acl.Binding, error) {
	res, err := f.resources(true)
	if err != nil {
		return nil, err
	}
	ents, err := f.entries()
	if err != nil {
		return nil, err
	}
	if len(res) == 0 || len(ents) == 0 {
		return nil, usagef("--add needs a resource (--topic, --group, --transactional-id, --cluster) and --allow-principal or --deny-principal")
	}
	var out []acl.Binding
	for _, r := range res {
		ops, err := f.operationsFor(r.ResourceType)
		if err != nil {
			return nil, err
		}
		for _, op := range ops {
			for _, en := range ents {
				b := r
				b.Principal, b.Host, b.Operation, b.Permission = en.principal, en.host, op, en.perm
				if err := b.Validate(); err != nil {
					return nil, usagef("%v", err)
				}
				out = append(out, b)
			}
		}
	}
	return out, nil
}

// removeFilters are the filters --remove deletes with: the ACLs the flags
// describe, or every ACL of the resources without principals.
func (f *aclsFlags) removeFilters() ([]acl.Filter, error) {
	res, err := f.resources(false)
	if err != nil {
		return nil, err
	}
	if len(res) == 0 {
		return nil, usagef("--remove needs a resource (--topic, --group, --transactional-id, --cluster)")
	}
	ents, err := f.entries()
	if err != nil {
		return nil, err
	}
	var out []acl.Filter
	for _, r := range res {
		base := resourceFilter(r)
		if len(ents) == 0 {
			out = append(out, base)
			continue
		}
		ops, err := f.operationsFor(r.ResourceType)
		if err != nil {
			return nil, err
		}
		for _, op := range ops {
			for _, en := range ents {
				flt := base
				flt.Principal, flt.Host, flt.Operation, flt.Permission = &en.principal, &en.host, op, en.perm
				out = append(out, flt)
			}
		}
	}
	return out, nil
}

// listFilters are --list's filters: the resources given (any pattern
// type by default), or every ACL; of the principals given.
func (f *aclsFlags) listFilters() ([]acl.Filter, error) {
	if f.patternType == "" {
		f.patternType = "any"
	}
	res, err := f.resources(false)
	if err != nil {
		return nil, err
	}
	var out []acl.Filter
	if len(res) == 0 {
		out = append(out, acl.AnyFilter)
	}
	for _, r := range res {
		out = append(out, resourceFilter(r))
	}
	if len(f.principals) == 0 {
		return out, nil
	}
	var byPrincipal []acl.Filter
	for _, flt := range out {
		for _, p := range f.principals {
			flt.Principal = &p
			byPrincipal = append(byPrincipal, flt)
		}
	}
	return byPrincipal, nil
}

// resourceFilter matches the ACLs of r's resource, any entry.
func resourceFilter(r acl.Binding) acl.Filter {
	name := r.ResourceName
	return acl.Filter{ResourceType: r.ResourceType, ResourceName: &name, PatternType: r.PatternType,
		Operation: acl.OpAny, Permission: acl.PermissionAny}
}

// printBindings prints ACLs as kafka-acls.sh does, by resource.
func printBindings(w io.Writer, bs []acl.Binding) {
	for i, b := range bs {
		if i == 0 || bs[i-1].ResourceType != b.ResourceType || bs[i-1].ResourceName != b.ResourceName || bs[i-1].PatternType != b.PatternType {
			if i > 0 {
				fmt.Fprintln(w)
			}
			fmt.Fprintf(w, "Current ACLs for resource `ResourcePattern(resourceType=%s, name=%s, patternType=%s)`:\n", b.ResourceType, b.ResourceName, b.PatternType)
		}
		fmt.Fprintf(w, " \t(principal=%s, host=%s, operation=%s, permissionType=%s)\n", b.Principal, b.Host, b.Operation, b.Permission)
	}
}
