package main

import (
	"bufio"
	"context"
	"fmt"

	"github.com/strata-log/strata/log"
)

const groupsHelp = `
Describes a consumer group's committed offsets and lag on a data dir or a
Kafka-protocol broker (there --topic is required), as
kafka-consumer-groups.sh --describe does: for every partition of the
group's topics (or of --topic) with a committed offset, the offset, the
log end offset and the lag between them.

  strata groups --data-dir DIR describe --group G [--topic T]
  strata groups --bootstrap-server ADDR describe --group G --topic T

  strata groups --bootstrap-server ADDR|--data-dir DIR list

list prints the id of every group the broker or data dir knows, one per
line.`

func runGroups(e *env, args []string) (err error) {
	fs := newFlags(e, "groups", "--bootstrap-server ADDR|--data-dir DIR list|describe [--group G] [--topic T]", groupsHelp)
	var t target
	t.register(fs)
	group := fs.String("group", "", "`GROUP` to describe (required)")
	topic := fs.String("topic", "", "`NAME`: only this topic (default: every topic with a committed offset)")
	describe := fs.Bool("describe", false, "the describe action (Kafka's flag form)")
	list := fs.Bool("list", false, "the list action (Kafka's flag form)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	action := ""
	switch {
	case len(pos) == 1 && !*describe && !*list:
		action = pos[0]
	case len(pos) == 0 && *describe != *list:
		action = map[bool]string{true: "describe", false: "list"}[*describe]
	default:
		return usagef("want one action: describe or list")
	}
	switch action {
	case "list":
		if err := t.check(); err != nil {
			return err
		}
		var ids []string
		if t.bootstrap != "" {
			a, err := dialAdmin(&t)
			if err != nil {
				return err
			}
			defer a.Close()
			if ids, err = a.listGroups(); err != nil {
				return fmt.Errorf("%w (a broker that does not serve ListGroups closes the connection)", err)
			}
		} else {
			b, err := openBroker(e, &t, false)
			if err != nil {
				return err
			}
			defer closeBroker(b, &err)
			ids = b.GroupCoordinator().Groups()
		}
		for _, g := range ids {
			fmt.Fprintln(e.stdout, g)
		}
		return nil
	case "describe":
	default:
		return usagef("unknown action %q (want describe or list)", action)
	}
	if *group == "" {
		return usagef("describe needs --group")
	}
	c, err := openClient(e, &t)
	if err != nil {
		return err
	}
	defer c.close(&err)
	var topics []string
	switch {
	case *topic != "":
		if _, err := c.topicPartitions(*topic); err != nil {
			return err
		}
		topics = []string{*topic}
	case c.broker != nil:
		topics = c.broker.Topics()
	default:
		return usagef("over --bootstrap-server describe needs --topic")
	}
	var tps []log.TopicPartition
	for _, name := range topics {
		n, err := c.Partitions(context.Background(), name)
		if err != nil {
			return err
		}
		for i := range n {
			tps = append(tps, log.TopicPartition{Topic: name, Partition: i})
		}
	}
	committed, err := c.FetchOffsets(context.Background(), *group, tps)
	if err != nil {
		return err
	}
	if len(committed) == 0 {
		return fmt.Errorf("group %s has no committed offsets on %s", *group, map[bool]string{true: "topic " + *topic, false: "any topic"}[*topic != ""])
	}
	w := bufio.NewWriter(e.stdout)
	fmt.Fprintln(w, "GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG")
	for _, tp := range tps {
		off, ok := committed[tp]
		if !ok {
			continue
		}
		end, err := c.ListOffset(context.Background(), tp, log.LatestOffset)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\n", *group, tp.Topic, tp.Partition, off, end, max(0, end-off))
	}
	return w.Flush()
}
