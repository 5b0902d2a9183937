package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/log"
)

const groupsHelp = `
Lists, describes, deletes and resets consumer groups on a data dir or a
Kafka-protocol broker, as kafka-consumer-groups.sh does. The action is a
word (list, describe, delete, delete-offsets, reset-offsets) or Kafka's
flag for it (--list, --describe, --delete, --delete-offsets,
--reset-offsets).

  strata groups --bootstrap-server ADDR|--data-dir DIR list
  strata groups --bootstrap-server ADDR|--data-dir DIR describe --group G [--topic T]
  strata groups --bootstrap-server ADDR|--data-dir DIR describe --all-groups
  strata groups ... describe --group G|--all-groups --state|--members
  strata groups --bootstrap-server ADDR|--data-dir DIR delete --group G [--group G2]...
  strata groups --bootstrap-server ADDR|--data-dir DIR delete --all-groups
  strata groups --bootstrap-server ADDR|--data-dir DIR delete-offsets --group G --topic T[:P,P...]
  strata groups ... list [--type[=classic,consumer]] [--state[=Stable,...]]
  strata groups ... reset-offsets --group G|--all-groups --topic T[:P,P...]|--all-topics
        --to-earliest|--to-latest|--to-datetime TIME|--shift-by N [--execute|--dry-run]

list prints the id of every group, one per line, classic groups and groups
of the consumer protocol (KIP-848) alike. With --type and/or --state it
prints GROUP, TYPE (classic or consumer) and STATE columns, those asked
for, keeping only the types and states given after "=" (Kafka 4's --list
--type --state).

describe prints, for every partition the group has a committed offset on
or a member is assigned (of --topic only, with it), the committed offset,
the log end offset, the lag between them and the member that has the
partition: its CONSUMER-ID, HOST and CLIENT-ID ("-" for none). A member
without partitions has a line of its own. Over --bootstrap-server it asks
the group's coordinator (FindCoordinator, DescribeGroups, OffsetFetch for
all of the group's topics).

A consumer-protocol group's members and assignment come from
ConsumerGroupDescribe. describe --state prints a row per group instead:
GROUP, TYPE (classic or consumer), STATE, ASSIGNMENT-STRATEGY (a classic
group's protocol, a consumer group's server assignor), #MEMBERS and, for a
consumer group, GROUP-EPOCH and TARGET-ASSIGNMENT-EPOCH; describe --members
a row per member: GROUP, CONSUMER-ID, HOST, CLIENT-ID, #PARTITIONS and, for
a consumer group, its EPOCH, its ASSIGNMENT (as topic(0,1)) and its
TARGET-ASSIGNMENT, the partitions it is still to get or give up showing
between the two.

reset-offsets commits new offsets for a group without active members
(Empty or Dead, as Kafka requires), on every partition of --topic T (or
T:0,2 for those) or, with --all-topics, of every topic the group has
committed offsets on: --to-earliest the log start, --to-latest the log
end, --to-datetime the first offset at or after TIME (2006-01-02T15:04:05.000,
local time, or with a zone as in RFC 3339; the log end when there is
none), --shift-by N the committed offset plus N (kept within the log; a
partition without a committed offset is an error). It prints GROUP, TOPIC,
PARTITION, NEW-OFFSET; only with --execute are the offsets committed
(--dry-run, the default, changes nothing), as kafka-consumer-groups.sh
--reset-offsets does.

delete deletes groups without active members and their committed offsets
(Kafka's DeleteGroups); a group with members is not deleted, and the exit
code is then 1.

delete-offsets deletes a group's committed offsets of --topic T (every
partition) or T:0,2 (those), as kafka-consumer-groups.sh --delete-offsets
does (Kafka's OffsetDelete): an empty group loses them all; an active
group keeps those of the topics its members consume, each answered "Error:
The group is subscribed to the topic." It prints TOPIC, PARTITION and
STATUS per partition; the exit code is 1 when any was not deleted.`

// groupsFlags are groups' flags.
type groupsFlags struct {
	groups    stringList
	topic     string
	allGroups bool
	listType  optionalList // list --type[=classic,consumer]
	listState optionalList // list --state[=Stable,...]; describe --state
	members   bool         // describe --members
	reset     resetFlags
}

// optionalList is a flag that may be given alone (--type) or with a
// comma-separated list of values (--type=consumer,classic), as Kafka's
// options with an optional argument.
type optionalList struct {
	set  bool
	vals []string
}

func (o *optionalList) String() string   { return strings.Join(o.vals, ",") }
func (o *optionalList) IsBoolFlag() bool { return true }
func (o *optionalList) Set(v string) error {
	o.set = true
	if v == "true" {
		return nil
	}
	for _, x := range strings.Split(v, ",") {
		if x = strings.TrimSpace(x); x != "" {
			o.vals = append(o.vals, x)
		}
	}
	return nil
}

// allows reports whether v is among the values given (case aside), or
// none were.
func (o *optionalList) allows(v string) bool {
	return len(o.vals) == 0 || slices.ContainsFunc(o.vals, func(x string) bool { return strings.EqualFold(x, v) })
}

// groupActions are groups' actions, as words or Kafka's flags.
var groupActions = []string{"list", "describe", "delete", "delete-offsets", "reset-offsets"}

func runGroups(e *env, args []string) (err error) {
	fs := newFlags(e, "groups", "--bootstrap-server ADDR|--data-dir DIR list|describe|delete|reset-offsets [--group G]... [--all-groups] [--topic T]", groupsHelp)
	var t target
	t.register(fs)
	var f groupsFlags
	fs.Var(&f.groups, "group", "`GROUP` to describe or delete; repeatable")
	fs.StringVar(&f.topic, "topic", "", "`NAME`: describe only this topic (default: every topic of the group); delete-offsets: T or T:P,P")
	fs.BoolVar(&f.allGroups, "all-groups", false, "describe, delete or reset every group")
	fs.Var(&f.listType, "type", "list: print each group's TYPE; `=TYPES` (classic,consumer) keeps those")
	fs.Var(&f.listState, "state", "list: print each group's STATE; `=STATES` (Empty,Stable,...) keeps those; describe: a row per group with its type, state, members and epochs")
	fs.BoolVar(&f.members, "members", false, "describe: a row per member with its partitions (and epoch and target assignment in a consumer group)")
	f.reset.register(fs)
	actions := map[string]*bool{}
	for _, a := range groupActions {
		actions[a] = fs.Bool(a, false, "the "+a+" action (Kafka's flag form)")
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	var chosen []string
	for _, a := range groupActions {
		if *actions[a] {
			chosen = append(chosen, a)
		}
	}
	for _, p := range pos {
		if _, ok := actions[p]; !ok {
			return usagef("unknown action %q (want list, describe, delete, delete-offsets or reset-offsets)", p)
		}
		chosen = append(chosen, p)
	}
	if len(chosen) != 1 {
		return usagef("want one action: list, describe, delete, delete-offsets or reset-offsets")
	}
	action := chosen[0]
	switch {
	case action == "list" && (len(f.groups) > 0 || f.allGroups || f.topic != ""):
		return usagef("list takes no --group, --all-groups or --topic")
	case action != "list" && f.listType.set:
		return usagef("--type is list's")
	case action != "list" && action != "describe" && f.listState.set:
		return usagef("--state is list's and describe's")
	case action == "describe" && f.listState.set && len(f.listState.vals) > 0:
		return usagef("describe --state takes no states")
	case action != "describe" && f.members:
		return usagef("--members is describe's")
	case f.members && f.listState.set:
		return usagef("give --members or --state, not both")
	case action != "reset-offsets" && f.reset.any():
		return usagef("--to-*, --shift-by, --execute, --dry-run and --all-topics are reset-offsets'")
	case action != "list" && len(f.groups) > 0 && f.allGroups:
		return usagef("give --group or --all-groups, not both")
	case action != "list" && len(f.groups) == 0 && !f.allGroups:
		return usagef("%s needs --group or --all-groups", action)
	case action == "delete" && f.topic != "":
		return usagef("delete deletes whole groups: no --topic (delete-offsets deletes a topic's offsets)")
	case action == "delete-offsets" && (f.allGroups || len(f.groups) != 1 || f.topic == ""):
		return usagef("delete-offsets needs one --group and --topic T or T:P,P...")
	}
	if err := t.check(); err != nil {
		return err
	}
	c, err := openClient(e, &t)
	if err != nil {
		return err
	}
	defer c.close(&err)
	g := &groupsAdmin{c: c, t: &t}
	defer g.close()
	if action == "reset-offsets" {
		if err := f.reset.check(f.topic); err != nil {
			return err
		}
	}
	ids := []string(f.groups)
	if action == "list" || f.allGroups {
		all, err := g.list()
		if err != nil {
			return err
		}
		if action == "list" {
			printListing(e, all, &f)
			return nil
		}
		ids = ids[:0]
		for _, l := range all {
			ids = append(ids, l.Group)
		}
	}
	switch action {
	case "delete":
		return g.delete(e, ids)
	case "delete-offsets":
		return g.deleteOffsets(e, ids[0], f.topic) // groups_delete_offsets.go
	case "reset-offsets":
		return g.resetOffsets(e, ids, f.topic, &f.reset)
	}
	if f.topic != "" {
		if _, err := c.topicPartitions(f.topic); err != nil {
			return err
		}
	}
	var rows strings.Builder
	header := "GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID"
	for _, id := range ids {
		var err error
		switch {
		case f.listState.set:
			header = "GROUP\tTYPE\tSTATE\tASSIGNMENT-STRATEGY\t#MEMBERS\tGROUP-EPOCH\tTARGET-ASSIGNMENT-EPOCH"
			err = g.describeState(&rows, id)
		case f.members:
			header = "GROUP\tCONSUMER-ID\tHOST\tCLIENT-ID\t#PARTITIONS\tEPOCH\tASSIGNMENT\tTARGET-ASSIGNMENT"
			err = g.describeMembers(&rows, id)
		default:
			err = g.describe(&rows, id, f.topic, !f.allGroups)
		}
		if err != nil {
			return err
		}
	}
	w := bufio.NewWriter(e.stdout)
	fmt.Fprintln(w, header)
	w.WriteString(rows.String())
	return w.Flush()
}

// groupsAdmin does the groups actions on a data dir's coordinator or over
// the Kafka protocol.
type groupsAdmin struct {
	c *client
	t *target
	a *admin // over Kafka, dialed at the first use
}

func (g *groupsAdmin) close() {
	if g.a != nil {
		g.a.Close()
	}
}

func (g *groupsAdmin) admin() (*admin, error) {
	if g.a == nil {
		a, err := dialAdmin(g.t)
		if err != nil {
			return nil, err
		}
		g.a = a
	}
	return g.a, nil
}

// list returns every group, sorted by id, with its type and state: the
// data dir's coordinator's, or ListGroups of every broker (v5: with the
// group type).
func (g *groupsAdmin) list() ([]group.Listing, error) {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if g.c.broker != nil {
		return g.c.broker.ListGroups(ctx)
	}
	ls, err := g.c.kafka.ListGroups(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w (a broker that does not serve ListGroups closes the connection)", err)
	}
	return ls, nil
}

// printListing prints list's answer: ids, or the columns asked for.
func printListing(e *env, all []group.Listing, f *groupsFlags) {
	w := bufio.NewWriter(e.stdout)
	defer w.Flush()
	if !f.listType.set && !f.listState.set {
		for _, l := range all {
			fmt.Fprintln(w, l.Group)
		}
		return
	}
	header := "GROUP"
	if f.listType.set {
		header += "\tTYPE"
	}
	if f.listState.set {
		header += "\tSTATE"
	}
	fmt.Fprintln(w, header)
	for _, l := range all {
		typ := l.Type
		if typ == "" {
			typ = group.TypeClassic
		}
		if !f.listType.allows(typ) || !f.listState.allows(string(l.State)) {
			continue
		}
		row := l.Group
		if f.listType.set {
			row += "\t" + typ
		}
		if f.listState.set {
			row += "\t" + string(l.State)
		}
		fmt.Fprintln(w, row)
	}
}

// groupState is what describe prints of a group.
type groupState struct {
	members   []group.MemberDescription // with Assignment decoded
	committed map[log.TopicPartition]int64
	classic   group.Description               // of a classic group
	consumer  *group.ConsumerGroupDescription // of a consumer-protocol group, else nil
}

func (g *groupsAdmin) state(ctx context.Context, id string) (groupState, error) {
	if g.c.broker != nil {
		gc := g.c.broker.GroupCoordinator()
		if d, ok := gc.DescribeConsumerGroup(id); ok {
			return groupState{members: consumerMembers(d), committed: gc.Committed(id, nil), consumer: &d}, nil
		}
		d, _ := gc.Describe(id)
		return groupState{members: d.Members, committed: gc.Committed(id, nil), classic: d}, nil
	}
	a, err := g.admin()
	if err != nil {
		return groupState{}, err
	}
	var st groupState
	if st.classic, err = a.describeGroup(g.t, id); err != nil {
		return groupState{}, err
	}
	st.members = st.classic.Members
	if len(st.members) == 0 {
		// Not a classic group with members: a consumer-protocol group's
		// are described by ConsumerGroupDescribe.
		d, ok, err := a.describeConsumerGroup(g.t, id)
		if err != nil {
			return groupState{}, err
		}
		if ok {
			st.members, st.consumer = consumerMembers(d), &d
		}
	}
	if st.committed, err = g.c.kafka.FetchOffsets(ctx, id, nil); err != nil {
		return groupState{}, fmt.Errorf("group %s: offsets: %w", id, err)
	}
	return st, nil
}

// describeState prints describe --state's row of group id: its type,
// state, assignment strategy (the protocol of a classic group, the server
// assignor of a consumer group), member count and, for a consumer group,
// its epoch and target assignment epoch.
func (g *groupsAdmin) describeState(w *strings.Builder, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	st, err := g.state(ctx, id)
	if err != nil {
		return err
	}
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	if d := st.consumer; d != nil {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%d\n", id, group.TypeConsumer, d.State, dash(d.Assignor), len(d.Members), d.Epoch, d.AssignmentEpoch)
		return nil
	}
	state := st.classic.State
	if state == "" {
		state = group.StateDead
	}
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t-\t-\n", id, group.TypeClassic, state, dash(st.classic.Protocol), len(st.members))
	return nil
}

// describeMembers prints describe --members' rows of group id: a member a
// row, with its partitions (Kafka's topic(0,1) form) and, for a consumer
// group, its epoch and target assignment.
func (g *groupsAdmin) describeMembers(w *strings.Builder, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	st, err := g.state(ctx, id)
	if err != nil {
		return err
	}
	epochs, targets := map[string]string{}, map[string]string{}
	if d := st.consumer; d != nil {
		for _, m := range d.Members {
			epochs[m.MemberID], targets[m.MemberID] = fmt.Sprint(m.MemberEpoch), assignmentColumn(m.TargetAssignment)
		}
	}
	for i := range st.members {
		m := &st.members[i]
		epoch, target := "-", "-"
		if e, ok := epochs[m.ID]; ok {
			epoch, target = e, targets[m.ID]
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\n", id, memberColumns(m), len(m.Assignment), epoch, assignmentColumn(m.Assignment), target)
	}
	return nil
}

// assignmentColumn prints partitions as Kafka's tool does: t(0,1),u(2);
// "-" for none.
func assignmentColumn(tps []log.TopicPartition) string {
	if len(tps) == 0 {
		return "-"
	}
	sorted := slices.Clone(tps)
	slices.SortFunc(sorted, func(a, b log.TopicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return a.Partition - b.Partition
	})
	var b strings.Builder
	for i, tp := range sorted {
		switch {
		case i == 0:
			fmt.Fprintf(&b, "%s(%d", tp.Topic, tp.Partition)
		case sorted[i-1].Topic != tp.Topic:
			fmt.Fprintf(&b, "),%s(%d", tp.Topic, tp.Partition)
		default:
			fmt.Fprintf(&b, ",%d", tp.Partition)
		}
	}
	b.WriteString(")")
	return b.String()
}

// describe prints the rows of group id (of topic only, unless ""). A
// group with neither committed offsets nor members is an error when
// named, and prints nothing with --all-groups.
func (g *groupsAdmin) describe(w *strings.Builder, id, topic string, named bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	st, err := g.state(ctx, id)
	if err != nil {
		return err
	}
	owner := map[log.TopicPartition]*group.MemberDescription{}
	rows := map[log.TopicPartition]bool{}
	for tp := range st.committed {
		rows[tp] = true
	}
	var idle []*group.MemberDescription // members without partitions (of topic)
	for i := range st.members {
		m := &st.members[i]
		n := 0
		for _, tp := range m.Assignment {
			if topic != "" && tp.Topic != topic {
				continue
			}
			owner[tp], rows[tp] = m, true
			n++
		}
		if n == 0 {
			idle = append(idle, m)
		}
	}
	tps := slices.SortedFunc(maps.Keys(rows), func(a, b log.TopicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return a.Partition - b.Partition
	})
	tps = slices.DeleteFunc(tps, func(tp log.TopicPartition) bool { return topic != "" && tp.Topic != topic })
	if len(tps) == 0 && len(st.members) == 0 {
		if !named {
			return nil
		}
		where := "any topic"
		if topic != "" {
			where = "topic " + topic
		}
		return fmt.Errorf("group %s has no committed offsets on %s and no members", id, where)
	}
	for _, tp := range tps {
		cur, endCol, lag := "-", "-", "-"
		end, err := g.c.ListOffset(ctx, tp, log.LatestOffset)
		switch {
		case errors.Is(err, log.ErrUnknownTopic) || errors.Is(err, log.ErrUnknownPartition):
			// An offset committed on a topic deleted since: no end.
		case err != nil:
			return fmt.Errorf("group %s: %s-%d: %w", id, tp.Topic, tp.Partition, err)
		default:
			endCol = fmt.Sprint(end)
		}
		if off, ok := st.committed[tp]; ok {
			cur = fmt.Sprint(off)
			if err == nil {
				lag = fmt.Sprint(max(0, end-off))
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", id, tp.Topic, tp.Partition, cur, endCol, lag, memberColumns(owner[tp]))
	}
	for _, m := range idle {
		fmt.Fprintf(w, "%s\t-\t-\t-\t-\t-\t%s\n", id, memberColumns(m))
	}
	return nil
}

// consumerMembers are a consumer-protocol group's members as describe
// prints them.
func consumerMembers(d group.ConsumerGroupDescription) []group.MemberDescription {
	out := make([]group.MemberDescription, 0, len(d.Members))
	for _, m := range d.Members {
		out = append(out, group.MemberDescription{ID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost, Assignment: m.Assignment})
	}
	return out
}

// memberColumns are the CONSUMER-ID, HOST and CLIENT-ID columns of m.
func memberColumns(m *group.MemberDescription) string {
	if m == nil {
		return "-\t-\t-"
	}
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	return dash(m.ID) + "\t" + dash(m.ClientHost) + "\t" + dash(m.ClientID)
}

// delete deletes the groups ids and reports each, as
// kafka-consumer-groups.sh --delete does: exit 1 when one failed.
func (g *groupsAdmin) delete(e *env, ids []string) error {
	if len(ids) == 0 {
		fmt.Fprintln(e.stdout, "No consumer groups to delete.")
		return nil
	}
	failed := map[string]error{}
	for _, id := range ids {
		var err error
		if g.c.broker != nil {
			ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
			err = g.c.broker.GroupCoordinator().Delete(ctx, id)
			cancel()
			switch {
			case errors.Is(err, group.ErrNonEmptyGroup):
				err = fmt.Errorf("NON_EMPTY_GROUP: the group has active members (%w)", err)
			case errors.Is(err, group.ErrGroupNotFound):
				err = fmt.Errorf("GROUP_ID_NOT_FOUND: no such group (%w)", err)
			}
		} else {
			var a *admin
			if a, err = g.admin(); err == nil {
				err = a.deleteGroup(g.t, id)
			}
		}
		if err != nil {
			failed[id] = err
		}
	}
	var ok []string
	for _, id := range ids {
		if failed[id] == nil {
			ok = append(ok, "'"+id+"'")
		}
	}
	if len(ok) > 0 {
		fmt.Fprintf(e.stdout, "Deletion of requested consumer groups (%s) was successful.\n", strings.Join(ok, ", "))
	}
	if len(failed) == 0 {
		return nil
	}
	fmt.Fprintln(e.stderr, "Deletion of some consumer groups failed:")
	for _, id := range ids {
		if err := failed[id]; err != nil {
			fmt.Fprintf(e.stderr, "* Group '%s' could not be deleted due to: %v\n", id, err)
		}
	}
	return errProblems
}
