package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const reassignHelp = `
Moves partitions between brokers (kafka-reassign-partitions.sh; Kafka's
AlterPartitionReassignments and ListPartitionReassignments):

  strata reassign --bootstrap-server ADDR --generate --topics-to-move-json-file FILE --broker-list 1,2,3
  strata reassign --bootstrap-server ADDR --execute --reassignment-json-file FILE [--additional]
  strata reassign --bootstrap-server ADDR --verify --reassignment-json-file FILE
  strata reassign --bootstrap-server ADDR --cancel --reassignment-json-file FILE
  strata reassign --bootstrap-server ADDR --list

--generate prints the current assignment of the topics in FILE
({"version":1,"topics":[{"topic":"t"}]}) and a proposed one over the
brokers of --broker-list (Kafka's rack-unaware round robin from a random
start); nothing changes. --execute starts the moves of a reassignment
file ({"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[4,2,3]}]})
and prints the current assignment, to keep for a rollback; it refuses while
other moves are in progress unless --additional. The new replicas copy the
partition from its leader, join the ISR, and then the old ones are
deleted; a removed leader hands leadership to the first new replica.
--verify prints each partition's state and exits 1 while a move is in
progress (or the replicas differ from the file's); --cancel stops the
moves of the file still in progress, back to the replicas before them;
--list prints the moves in progress.

--execute --throttle BYTES/S caps the bytes a move copies per second, as
kafka-reassign-partitions.sh does with Kafka's dynamic configs: the
brokers of the moves get leader.replication.throttled.rate and
follower.replication.throttled.rate, the topics
leader.replication.throttled.replicas (the partitions' current replicas)
and follower.replication.throttled.replicas (the new ones). --verify
removes them once every move of the file is done (the rates from every
broker), unless --preserve-throttles.`

// reassignmentFile is kafka-reassign-partitions.sh's reassignment JSON.
type reassignmentFile struct {
	Version    int                 `json:"version"`
	Partitions []reassignPartition `json:"partitions"`
}

type reassignPartition struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Replicas  []int32  `json:"replicas"`
	LogDirs   []string `json:"log_dirs,omitempty"`
}

func runReassign(e *env, args []string) error {
	fs := newFlags(e, "reassign", "--bootstrap-server ADDR (--generate | --execute | --verify | --cancel | --list) ...", reassignHelp)
	var t target
	t.register(fs)
	var generate, execute, verify, cancel, list, additional, preserve bool
	var topicsFile, reassignFile, brokerList, throttle string
	fs.BoolVar(&generate, "generate", false, "propose an assignment of the topics of --topics-to-move-json-file over --broker-list")
	fs.BoolVar(&execute, "execute", false, "start the moves of --reassignment-json-file")
	fs.BoolVar(&verify, "verify", false, "print the state of the moves of --reassignment-json-file; exit 1 while any is not done")
	fs.BoolVar(&cancel, "cancel", false, "cancel the moves of --reassignment-json-file still in progress")
	fs.BoolVar(&list, "list", false, "list the moves in progress")
	fs.BoolVar(&additional, "additional", false, "with --execute: start while other moves are in progress")
	fs.BoolVar(&preserve, "preserve-throttles", false, "with --verify: keep the replication throttles when the moves are done")
	fs.StringVar(&topicsFile, "topics-to-move-json-file", "", "`FILE`: the topics to move ({\"version\":1,\"topics\":[{\"topic\":\"t\"}]})")
	fs.StringVar(&reassignFile, "reassignment-json-file", "", "`FILE`: the target replicas ({\"version\":1,\"partitions\":[...]})")
	fs.StringVar(&brokerList, "broker-list", "", "`IDS`: with --generate, the brokers to assign to, comma-separated")
	fs.StringVar(&throttle, "throttle", "", "`BYTES/S`: with --execute, the replication throttle of the moves (removed by --verify once they are done)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if t.dataDir != "" || t.bootstrap == "" {
		return usagef("reassign works on a running cluster: give --bootstrap-server")
	}
	n := 0
	for _, b := range []bool{generate, execute, verify, cancel, list} {
		if b {
			n++
		}
	}
	if n != 1 {
		return usagef("give one of --generate, --execute, --verify, --cancel, --list")
	}
	var rate int64
	if throttle != "" {
		if !execute {
			return usagef("--throttle goes with --execute")
		}
		// Kafka's default, -1, is none.
		if rate, err = strconv.ParseInt(throttle, 10, 64); err != nil || rate < 1 && rate != -1 {
			return usagef("--throttle %q: bytes per second, 1 or more", throttle)
		}
		rate = max(rate, 0)
	}
	var moves reassignmentFile
	switch {
	case generate:
		if topicsFile == "" || brokerList == "" {
			return usagef("--generate needs --topics-to-move-json-file and --broker-list")
		}
	case execute, verify, cancel:
		if reassignFile == "" {
			return usagef("--reassignment-json-file is required")
		}
		if moves, err = readReassignmentFile(reassignFile); err != nil {
			return err
		}
	}
	a, err := dialAdmin(&t)
	if err != nil {
		return err
	}
	defer a.Close()
	switch {
	case generate:
		return reassignGenerate(e, a, topicsFile, brokerList)
	case execute:
		return reassignExecute(e, a, moves, additional, rate)
	case verify:
		return reassignVerify(e, a, moves, preserve)
	case cancel:
		return reassignCancel(e, a, moves)
	}
	return reassignList(e, a)
}

// readReassignmentFile reads and checks a reassignment file: every
// partition named once, with a topic, a partition >= 0 and replicas.
func readReassignmentFile(path string) (reassignmentFile, error) {
	var f reassignmentFile
	b, err := os.ReadFile(path)
	if err != nil {
		return f, usagef("--reassignment-json-file: %v", err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, usagef("--reassignment-json-file %s: %v", path, err)
	}
	if len(f.Partitions) == 0 {
		return f, usagef("--reassignment-json-file %s: no partitions", path)
	}
	seen := map[string]bool{}
	for _, p := range f.Partitions {
		tp := fmt.Sprintf("%s-%d", p.Topic, p.Partition)
		switch {
		case p.Topic == "" || p.Partition < 0:
			return f, usagef("--reassignment-json-file %s: each partition needs a topic and a partition >= 0", path)
		case len(p.Replicas) == 0:
			return f, usagef("--reassignment-json-file %s: %s has no replicas", path, tp)
		case seen[tp]:
			return f, usagef("--reassignment-json-file %s: %s is listed twice", path, tp)
		case len(p.LogDirs) > 0 && len(p.LogDirs) != len(p.Replicas):
			return f, usagef("--reassignment-json-file %s: %s has %d log_dirs for %d replicas", path, tp, len(p.LogDirs), len(p.Replicas))
		}
		for _, d := range p.LogDirs {
			if d != "any" {
				return f, usagef("--reassignment-json-file %s: %s: log_dirs other than \"any\" are not supported (one log dir per broker)", path, tp)
			}
		}
		seen[tp] = true
	}
	return f, nil
}

// topics returns the topics of the file's partitions, each once, in the
// file's order.
func (f reassignmentFile) topics() []string {
	var topics []string
	for _, p := range f.Partitions {
		if !slices.Contains(topics, p.Topic) {
			topics = append(topics, p.Topic)
		}
	}
	return topics
}

// currentAssignment returns the replicas of every partition of the topics,
// as Metadata has them, in the reassignment file's format.
func (a *admin) currentAssignment(topics []string) (reassignmentFile, error) {
	out := reassignmentFile{Version: 1, Partitions: []reassignPartition{}}
	ts, err := a.metadata(topics)
	if err != nil {
		return out, err
	}
	for _, t := range ts {
		for _, p := range t.partitions {
			out.Partitions = append(out.Partitions, reassignPartition{
				Topic: t.name, Partition: p.Partition, Replicas: slices.Clone(p.Replicas), LogDirs: anyDirs(len(p.Replicas)),
			})
		}
	}
	return out, nil
}

func anyDirs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "any"
	}
	return out
}

func printJSON(e *env, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(e.stdout, "%s\n", b)
}

func reassignGenerate(e *env, a *admin, topicsFile, brokerList string) error {
	b, err := os.ReadFile(topicsFile)
	if err != nil {
		return usagef("--topics-to-move-json-file: %v", err)
	}
	var doc struct {
		Topics []struct {
			Topic string `json:"topic"`
		} `json:"topics"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return usagef("--topics-to-move-json-file %s: %v", topicsFile, err)
	}
	var topics []string
	for _, t := range doc.Topics {
		if t.Topic == "" {
			return usagef("--topics-to-move-json-file %s: a topic without a name", topicsFile)
		}
		if !slices.Contains(topics, t.Topic) {
			topics = append(topics, t.Topic)
		}
	}
	if len(topics) == 0 {
		return usagef("--topics-to-move-json-file %s: no topics", topicsFile)
	}
	var brokers []int32
	for _, s := range strings.Split(brokerList, ",") {
		id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
		if err != nil || id < 0 || slices.Contains(brokers, int32(id)) {
			return usagef("--broker-list %q: want distinct broker ids, comma-separated", brokerList)
		}
		brokers = append(brokers, int32(id))
	}
	slices.Sort(brokers)
	cur, err := a.currentAssignment(topics)
	if err != nil {
		return err
	}
	for _, name := range topics {
		if !slices.ContainsFunc(cur.Partitions, func(p reassignPartition) bool { return p.Topic == name }) {
			return fmt.Errorf("topic %s: UNKNOWN_TOPIC_OR_PARTITION", name)
		}
	}
	proposed := reassignmentFile{Version: 1}
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	for _, name := range topics {
		var parts []reassignPartition
		for _, p := range cur.Partitions {
			if p.Topic == name {
				parts = append(parts, p)
			}
		}
		rf := len(parts[0].Replicas)
		if rf > len(brokers) {
			return fmt.Errorf("topic %s: replication factor %d is larger than the %d brokers of --broker-list", name, rf, len(brokers))
		}
		asg := assignRoundRobin(brokers, len(parts), rf, rnd.IntN(len(brokers)), rnd.IntN(len(brokers)))
		for i, p := range parts {
			proposed.Partitions = append(proposed.Partitions, reassignPartition{
				Topic: name, Partition: p.Partition, Replicas: asg[i], LogDirs: anyDirs(rf),
			})
		}
	}
	fmt.Fprintln(e.stdout, "Current partition replica assignment")
	printJSON(e, cur)
	fmt.Fprintln(e.stdout)
	fmt.Fprintln(e.stdout, "Proposed partition reassignment configuration")
	printJSON(e, proposed)
	return nil
}

// assignRoundRobin is Kafka's rack-unaware assignment
// (AdminUtils.assignReplicasToBrokers): partition p's first replica is
// brokers[(start+p) % n], its others follow at a shift from it that grows
// by one every n partitions.
func assignRoundRobin(brokers []int32, partitions, rf, start, shift int) [][]int32 {
	n := len(brokers)
	out := make([][]int32, partitions)
	for p := range partitions {
		if p > 0 && p%n == 0 {
			shift++
		}
		first := (start + p) % n
		rs := []int32{brokers[first]}
		for j := 0; j < rf-1; j++ {
			rs = append(rs, brokers[(first+1+(shift+j)%(n-1))%n])
		}
		out[p] = rs
	}
	return out
}

// ongoing lists the reassignments in progress: the key is topic-partition.
func (a *admin) ongoing() (map[string]kmsg.ListPartitionReassignmentsResponseTopicPartition, error) {
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = int32(adminTimeout.Milliseconds())
	resp, err := a.do(req, 0)
	if err != nil {
		return nil, err
	}
	r := resp.(*kmsg.ListPartitionReassignmentsResponse)
	if err := kafkaCodeError(r.ErrorCode, r.ErrorMessage); err != nil {
		return nil, err
	}
	out := map[string]kmsg.ListPartitionReassignmentsResponseTopicPartition{}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			out[fmt.Sprintf("%s-%d", t.Topic, p.Partition)] = p
		}
	}
	return out, nil
}

// alterReassignments sends the targets (Replicas nil: cancel) and returns
// each partition's error by topic-partition, in the file's order.
func (a *admin) alterReassignments(parts []reassignPartition, cancel bool) ([]string, map[string]error, error) {
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.TimeoutMillis = int32(adminTimeout.Milliseconds())
	var order []string
	for _, p := range parts {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != p.Topic {
			rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
			rt.Topic = p.Topic
			req.Topics = append(req.Topics, rt)
		}
		rt := &req.Topics[len(req.Topics)-1]
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Partition = p.Partition
		if !cancel {
			rp.Replicas = p.Replicas
		}
		rt.Partitions = append(rt.Partitions, rp)
		order = append(order, fmt.Sprintf("%s-%d", p.Topic, p.Partition))
	}
	resp, err := a.do(req, 0)
	if err != nil {
		return nil, nil, err
	}
	r := resp.(*kmsg.AlterPartitionAssignmentsResponse)
	if err := kafkaCodeError(r.ErrorCode, r.ErrorMessage); err != nil {
		return nil, nil, err
	}
	errs := map[string]error{}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			errs[fmt.Sprintf("%s-%d", t.Topic, p.Partition)] = kafkaCodeError(p.ErrorCode, p.ErrorMessage)
		}
	}
	return order, errs, nil
}

func reassignExecute(e *env, a *admin, moves reassignmentFile, additional bool, throttle int64) error {
	ongoing, err := a.ongoing()
	if err != nil {
		return err
	}
	if len(ongoing) > 0 && !additional {
		return fmt.Errorf("cannot execute because there is an existing partition assignment; use --additional to start these moves in addition to the %d in progress", len(ongoing))
	}
	topics := moves.topics()
	cur, err := a.currentAssignment(topics)
	if err != nil {
		return err
	}
	// The rollback file holds the current replicas of the partitions moved.
	rollback := reassignmentFile{Version: 1, Partitions: []reassignPartition{}}
	for _, m := range moves.Partitions {
		i := slices.IndexFunc(cur.Partitions, func(p reassignPartition) bool { return p.Topic == m.Topic && p.Partition == m.Partition })
		if i < 0 {
			return fmt.Errorf("partition %s-%d: UNKNOWN_TOPIC_OR_PARTITION", m.Topic, m.Partition)
		}
		rollback.Partitions = append(rollback.Partitions, cur.Partitions[i])
	}
	fmt.Fprintln(e.stdout, "Current partition replica assignment")
	fmt.Fprintln(e.stdout)
	printJSON(e, rollback)
	fmt.Fprintln(e.stdout)
	fmt.Fprintln(e.stdout, "Save this to use as the --reassignment-json-file option during rollback")
	if throttle > 0 {
		// Set before the moves start, as Kafka's tool does (reassign_throttle.go).
		if err := a.setReassignThrottles(rollback, moves, throttle); err != nil {
			return err
		}
		fmt.Fprintln(e.stdout, "Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle is removed.")
		fmt.Fprintf(e.stdout, "The inter-broker throttle limit was set to %d B/s\n", throttle)
	}
	order, errs, err := a.alterReassignments(moves.Partitions, false)
	if err != nil {
		return err
	}
	var ok, failed []string
	for _, tp := range order {
		if err := errs[tp]; err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", tp, err))
		} else {
			ok = append(ok, tp)
		}
	}
	if len(ok) > 0 {
		fmt.Fprintf(e.stdout, "Successfully started partition reassignments for %s\n", strings.Join(ok, ","))
	}
	if len(failed) > 0 {
		fmt.Fprintln(e.stderr, "Error reassigning partitions:")
		for _, f := range failed {
			fmt.Fprintf(e.stderr, "  %s\n", f)
		}
		return errProblems
	}
	return nil
}

func reassignVerify(e *env, a *admin, moves reassignmentFile, preserveThrottles bool) error {
	ongoing, err := a.ongoing()
	if err != nil {
		return err
	}
	topics := moves.topics()
	cur, err := a.currentAssignment(topics)
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "Status of partition reassignment:")
	done := true
	for _, m := range moves.Partitions {
		tp := fmt.Sprintf("%s-%d", m.Topic, m.Partition)
		i := slices.IndexFunc(cur.Partitions, func(p reassignPartition) bool { return p.Topic == m.Topic && p.Partition == m.Partition })
		switch {
		case i < 0:
			fmt.Fprintf(e.stdout, "Partition %s does not exist.\n", tp)
			done = false
		case hasKey(ongoing, tp):
			fmt.Fprintf(e.stdout, "Reassignment of partition %s is still in progress.\n", tp)
			done = false
		case slices.Equal(cur.Partitions[i].Replicas, m.Replicas):
			fmt.Fprintf(e.stdout, "Reassignment of partition %s is completed.\n", tp)
		default:
			fmt.Fprintf(e.stdout, "There is no active reassignment of partition %s, but replica set is %v rather than %v.\n", tp, cur.Partitions[i].Replicas, m.Replicas)
			done = false
		}
	}
	if !done {
		return errProblems
	}
	if !preserveThrottles {
		return a.clearReassignThrottles(e, topics) // reassign_throttle.go
	}
	return nil
}

func hasKey[V any](m map[string]V, k string) bool { _, ok := m[k]; return ok }

func reassignCancel(e *env, a *admin, moves reassignmentFile) error {
	order, errs, err := a.alterReassignments(moves.Partitions, true)
	if err != nil {
		return err
	}
	var cancelled, failed []string
	for _, tp := range order {
		switch err := errs[tp]; {
		case err == nil:
			cancelled = append(cancelled, tp)
		case strings.HasPrefix(err.Error(), "NO_REASSIGNMENT_IN_PROGRESS"):
			// nothing to cancel: not an error, as in Kafka
		default:
			failed = append(failed, fmt.Sprintf("%s: %v", tp, err))
		}
	}
	if len(cancelled) > 0 {
		fmt.Fprintf(e.stdout, "Successfully cancelled partition reassignments for: %s\n", strings.Join(cancelled, ","))
	} else {
		fmt.Fprintln(e.stdout, "None of the specified partition reassignments are active.")
	}
	if len(failed) > 0 {
		fmt.Fprintln(e.stderr, "Error cancelling partition reassignments:")
		for _, f := range failed {
			fmt.Fprintf(e.stderr, "  %s\n", f)
		}
		return errProblems
	}
	return nil
}

func reassignList(e *env, a *admin) error {
	ongoing, err := a.ongoing()
	if err != nil {
		return err
	}
	if len(ongoing) == 0 {
		fmt.Fprintln(e.stdout, "No partition reassignments found.")
		return nil
	}
	keys := make([]string, 0, len(ongoing))
	for k := range ongoing {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintln(e.stdout, "Current partition reassignments:")
	for _, k := range keys {
		p := ongoing[k]
		fmt.Fprintf(e.stdout, "%s: replicas: %s. adding: %s. removing: %s.\n", k, joinInt32(p.Replicas), joinInt32(p.AddingReplicas), joinInt32(p.RemovingReplicas))
	}
	return nil
}
