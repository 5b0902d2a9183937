package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/log"
)

// resetFlags are reset-offsets' flags, kafka-consumer-groups.sh's.
type resetFlags struct {
	toEarliest bool
	toLatest   bool
	toDatetime string
	shiftBy    int64
	execute    bool
	dryRun     bool
	allTopics  bool
	shiftSet   bool
}

func (r *resetFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&r.toEarliest, "to-earliest", false, "reset-offsets: to the log start offset")
	fs.BoolVar(&r.toLatest, "to-latest", false, "reset-offsets: to the log end offset")
	fs.StringVar(&r.toDatetime, "to-datetime", "", "reset-offsets: to the first offset at or after `TIME` (2006-01-02T15:04:05.000, local, or RFC 3339)")
	fs.Func("shift-by", "reset-offsets: move the committed offsets by `N` (negative: back)", func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("not a number of records: %q", v)
		}
		r.shiftBy, r.shiftSet = n, true
		return nil
	})
	fs.BoolVar(&r.execute, "execute", false, "reset-offsets: commit the new offsets (else only print them)")
	fs.BoolVar(&r.dryRun, "dry-run", false, "reset-offsets: only print the new offsets (the default)")
	fs.BoolVar(&r.allTopics, "all-topics", false, "reset-offsets: every topic the group has committed offsets on")
}

// any reports whether one of reset-offsets' flags was given.
func (r *resetFlags) any() bool {
	return r.toEarliest || r.toLatest || r.toDatetime != "" || r.shiftSet || r.execute || r.dryRun || r.allTopics
}

// check checks the flags of a reset (topic is --topic).
func (r *resetFlags) check(topic string) error {
	n := 0
	for _, set := range []bool{r.toEarliest, r.toLatest, r.toDatetime != "", r.shiftSet} {
		if set {
			n++
		}
	}
	switch {
	case n != 1:
		return usagef("reset-offsets wants one of --to-earliest, --to-latest, --to-datetime, --shift-by")
	case (topic == "") == !r.allTopics:
		return usagef("reset-offsets wants --topic or --all-topics (one of them)")
	case r.execute && r.dryRun:
		return usagef("give --execute or --dry-run, not both")
	}
	if r.toDatetime != "" {
		if _, err := parseDatetime(r.toDatetime); err != nil {
			return usagef("--to-datetime: %v", err)
		}
	}
	return nil
}

// parseDatetime reads --to-datetime as Kafka's tool does: a local time
// 2006-01-02T15:04:05[.000], or one with a zone (RFC 3339, or Kafka's
// +hh:mm / Z suffix).
func parseDatetime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.000Z07:00", "2006-01-02T15:04:05Z0700"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	for _, layout := range []string{"2006-01-02T15:04:05.000", "2006-01-02T15:04:05"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time such as 2006-01-02T15:04:05.000 (local) or 2006-01-02T15:04:05Z", s)
}

// errGroupActive refuses a reset of a group with active members.
var errGroupActive = errors.New("the group is active")

// resetOffsets computes (and with --execute commits) new offsets for each
// group of ids, on topic's partitions or, with --all-topics, on those the
// group has offsets on, and prints them.
func (g *groupsAdmin) resetOffsets(e *env, ids []string, topic string, r *resetFlags) error {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if !r.execute && !r.dryRun {
		fmt.Fprintln(e.stderr, "No offsets are committed without --execute (a dry run): add --dry-run to say so.")
	}
	var partitions []log.TopicPartition // of --topic
	if topic != "" {
		name, parts, err := parseTopicPartitions(topic)
		if err != nil {
			return err
		}
		n, err := g.c.topicPartitions(name)
		if err != nil {
			return err
		}
		if parts == nil {
			for p := range n {
				parts = append(parts, p)
			}
		}
		for _, p := range parts {
			if p >= n {
				return fmt.Errorf("%w: %s has %d partitions, no %d", log.ErrUnknownPartition, name, n, p)
			}
			partitions = append(partitions, log.TopicPartition{Topic: name, Partition: p})
		}
	}
	states := map[string]group.State{}
	if all, err := g.list(); err == nil {
		for _, l := range all {
			states[l.Group] = l.State
		}
	} else {
		return err
	}
	var rows strings.Builder
	for _, id := range ids {
		if st, ok := states[id]; ok && st != group.StateEmpty && st != group.StateDead {
			return fmt.Errorf("%w: assignments can only be reset if the group '%s' is inactive, but the current state is %s", errGroupActive, id, st)
		}
		committed, err := g.committed(ctx, id)
		if err != nil {
			return err
		}
		tps := partitions
		if r.allTopics {
			tps = slices.SortedFunc(maps.Keys(committed), func(a, b log.TopicPartition) int {
				if c := strings.Compare(a.Topic, b.Topic); c != 0 {
					return c
				}
				return a.Partition - b.Partition
			})
		}
		next := make(map[log.TopicPartition]int64, len(tps))
		for _, tp := range tps {
			off, err := g.newOffset(ctx, tp, committed, r)
			if err != nil {
				return fmt.Errorf("group %s: %s-%d: %w", id, tp.Topic, tp.Partition, err)
			}
			next[tp] = off
			fmt.Fprintf(&rows, "%s\t%s\t%d\t%d\n", id, tp.Topic, tp.Partition, off)
		}
		if r.execute && len(next) > 0 {
			if err := g.commit(ctx, id, next); err != nil {
				return fmt.Errorf("group %s: commit the new offsets: %w", id, err)
			}
		}
	}
	w := bufio.NewWriter(e.stdout)
	fmt.Fprintln(w, "GROUP\tTOPIC\tPARTITION\tNEW-OFFSET")
	w.WriteString(rows.String())
	return w.Flush()
}

// parseTopicPartitions reads --topic T or T:0,2 (nil partitions: all).
func parseTopicPartitions(s string) (string, []int, error) {
	name, list, ok := strings.Cut(s, ":")
	if !ok {
		return name, nil, nil
	}
	var parts []int
	for _, x := range strings.Split(list, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(x))
		if err != nil || p < 0 {
			return "", nil, usagef("--topic %s: %q is not a partition", s, x)
		}
		parts = append(parts, p)
	}
	return name, parts, nil
}

// newOffset is the offset tp is reset to.
func (g *groupsAdmin) newOffset(ctx context.Context, tp log.TopicPartition, committed map[log.TopicPartition]int64, r *resetFlags) (int64, error) {
	switch {
	case r.toEarliest:
		return g.c.ListOffset(ctx, tp, log.EarliestOffset)
	case r.toLatest:
		return g.c.ListOffset(ctx, tp, log.LatestOffset)
	case r.toDatetime != "":
		at, _ := parseDatetime(r.toDatetime) // checked
		off, err := g.c.ListOffset(ctx, tp, at.UnixMilli())
		if err != nil {
			return 0, err
		}
		end, err := g.c.ListOffset(ctx, tp, log.LatestOffset)
		if err != nil {
			return 0, err
		}
		if off < 0 || off > end {
			return end, nil // nothing at or after it: the end, as Kafka's tool
		}
		return off, nil
	}
	cur, ok := committed[tp]
	if !ok {
		return 0, fmt.Errorf("cannot shift the offset: the group has no committed offset on it")
	}
	start, err := g.c.ListOffset(ctx, tp, log.EarliestOffset)
	if err != nil {
		return 0, err
	}
	end, err := g.c.ListOffset(ctx, tp, log.LatestOffset)
	if err != nil {
		return 0, err
	}
	return min(max(cur+r.shiftBy, start), end), nil
}

// committed returns the group's committed offsets.
func (g *groupsAdmin) committed(ctx context.Context, id string) (map[log.TopicPartition]int64, error) {
	if g.c.broker != nil {
		return g.c.broker.GroupCoordinator().Committed(id, nil), nil
	}
	offs, err := g.c.kafka.FetchOffsets(ctx, id, nil)
	if err != nil {
		return nil, fmt.Errorf("group %s: offsets: %w", id, err)
	}
	return offs, nil
}

// commit commits offsets for the group as an admin (no member, generation
// -1), as Kafka's tool does; the coordinator takes it only from a group
// without members.
func (g *groupsAdmin) commit(ctx context.Context, id string, offsets map[log.TopicPartition]int64) error {
	if g.c.broker != nil {
		return g.c.broker.GroupCoordinator().Commit(ctx, id, "", -1, offsets)
	}
	return g.c.kafka.CommitOffsets(ctx, id, "", -1, offsets)
}
