package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/internal/kerr"
)

// deleteOffsets deletes group id's committed offsets of topicArg (T: every
// partition, T:0,2: those) and prints each partition's outcome, as
// kafka-consumer-groups.sh --delete-offsets does.
func (g *groupsAdmin) deleteOffsets(e *env, id, topicArg string) error {
	topic, parts, err := parseTopicPartitions(topicArg)
	if err != nil {
		return err
	}
	if parts == nil {
		n, err := g.c.topicPartitions(topic)
		if err != nil {
			return err
		}
		for p := range n {
			parts = append(parts, p)
		}
	}
	var res map[int]error
	if g.c.broker != nil {
		res, err = deleteOffsetsLocal(g.c.broker.GroupCoordinator(), id, topic, parts)
	} else {
		var a *admin
		if a, err = g.admin(); err == nil {
			res, err = a.deleteOffsets(g.t, id, topic, parts)
		}
	}
	if err != nil {
		switch {
		case errors.Is(err, group.ErrGroupNotFound) || strings.HasPrefix(err.Error(), kerr.Name(kerr.GroupIDNotFound)):
			fmt.Fprintf(e.stderr, "Error: '%s' does not exist.\n", id)
		case errors.Is(err, group.ErrNonEmptyGroup) || strings.HasPrefix(err.Error(), kerr.Name(kerr.NonEmptyGroup)):
			fmt.Fprintf(e.stderr, "Error: Deleting offsets of a consumer group '%s' is forbidden if the group is not empty.\n", id)
		default:
			return err
		}
		return errProblems
	}
	failed := false
	for _, err := range res {
		failed = failed || err != nil
	}
	if failed {
		fmt.Fprintln(e.stderr, "Error: Encounter some partition level error, see the follow-up details:")
	} else {
		fmt.Fprintf(e.stdout, "Request succeed for deleting offsets with topic %s group %s\n", topic, id)
	}
	fmt.Fprintf(e.stdout, "\n%-30s %-15s %-15s\n", "TOPIC", "PARTITION", "STATUS")
	slices.Sort(parts)
	for _, p := range slices.Compact(parts) {
		fmt.Fprintf(e.stdout, "%-30s %-15d %-15s\n", topic, p, offsetStatus(res[p]))
	}
	if failed {
		return errProblems
	}
	return nil
}

// deleteOffsetsLocal deletes through a data dir's coordinator.
func deleteOffsetsLocal(gc *group.Coordinator, id, topic string, parts []int) (map[int]error, error) {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	tps := make([]group.TopicPartition, len(parts))
	for i, p := range parts {
		tps[i] = group.TopicPartition{Topic: topic, Partition: p}
	}
	got, err := gc.DeleteOffsets(ctx, id, tps)
	if err != nil {
		return nil, err
	}
	out := map[int]error{}
	for tp, err := range got {
		if errors.Is(err, group.ErrGroupSubscribedToTopic) {
			err = errSubscribedToTopic
		}
		out[tp.Partition] = err
	}
	return out, nil
}

// errSubscribedToTopic is GROUP_SUBSCRIBED_TO_TOPIC (offsetStatus prints
// it as Kafka's tool does).
var errSubscribedToTopic = errors.New("GROUP_SUBSCRIBED_TO_TOPIC")

// offsetStatus is a partition's STATUS.
func offsetStatus(err error) string {
	switch {
	case err == nil:
		return "Successful"
	case errors.Is(err, errSubscribedToTopic):
		return "Error: The group is subscribed to the topic."
	}
	return "Error: " + err.Error()
}

// deleteOffsets deletes group id's offsets of topic's parts with
// OffsetDelete on the group's coordinator: the per-partition errors, or
// the request's.
func (a *admin) deleteOffsets(t *target, id, topic string, parts []int) (map[int]error, error) {
	out := map[int]error{}
	err := a.onCoordinator(t, id, func(ca *admin) (int16, *string, error) {
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = id
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic = topic
		for _, p := range parts {
			rp := kmsg.NewOffsetDeleteRequestTopicPartition()
			rp.Partition = int32(p)
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		r, err := ca.do(req, 0)
		if err != nil {
			return 0, nil, err
		}
		resp := r.(*kmsg.OffsetDeleteResponse)
		if resp.ErrorCode != 0 {
			return resp.ErrorCode, nil, nil
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				var err error
				switch p.ErrorCode {
				case 0:
				case kerr.GroupSubscribedToTopic:
					err = errSubscribedToTopic
				default:
					err = kafkaCodeError(p.ErrorCode, nil)
				}
				out[int(p.Partition)] = err
			}
		}
		return 0, nil, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
