package main

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/log"
)

// Kafka error codes a group request is retried on: its coordinator is
// loading, not there yet, or moved.
const (
	codeCoordinatorLoading      = 14
	codeCoordinatorNotAvailable = 15
	codeNotCoordinator          = 16
)

// coordinatorWait bounds how long a group request retries a coordinator
// that is loading, not available or moved.
const coordinatorWait = 10 * time.Second

// onCoordinator finds the coordinator of group id (FindCoordinator) and
// calls do with an admin connected to it, retrying with Kafka's backoff
// (100 ms doubling to 1 s) while the answer's code says the coordinator is
// loading, not available or moved.
func (a *admin) onCoordinator(t *target, id string, do func(*admin) (int16, *string, error)) error {
	deadline := time.Now().Add(coordinatorWait)
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		code, msg, err := a.tryOnCoordinator(t, id, do)
		if err != nil {
			return err
		}
		retriable := code == codeCoordinatorLoading || code == codeCoordinatorNotAvailable || code == codeNotCoordinator
		if !retriable || time.Now().Add(backoff).After(deadline) {
			return kafkaCodeError(code, msg)
		}
		time.Sleep(backoff) // a backoff between asks, as Kafka's clients: nothing to await
	}
}

func (a *admin) tryOnCoordinator(t *target, id string, do func(*admin) (int16, *string, error)) (int16, *string, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey, req.CoordinatorKeys = id, []string{id} // v0–v3, v4+
	r, err := a.do(req, 4)
	if err != nil {
		return 0, nil, err
	}
	resp := r.(*kmsg.FindCoordinatorResponse)
	code, msg, host, port := resp.ErrorCode, resp.ErrorMessage, resp.Host, resp.Port
	if resp.GetVersion() >= 4 {
		if len(resp.Coordinators) != 1 {
			return 0, nil, fmt.Errorf("FindCoordinator: %d coordinators for one group", len(resp.Coordinators))
		}
		c := resp.Coordinators[0]
		code, msg, host, port = c.ErrorCode, c.ErrorMessage, c.Host, c.Port
	}
	if code != 0 {
		return code, msg, nil
	}
	addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
	if seeds := t.seeds(); len(seeds) == 1 && seeds[0] == addr {
		return do(a) // the one broker asked is the coordinator
	}
	ct := *t
	ct.bootstrap = addr
	ca, err := dialAdmin(&ct)
	if err != nil {
		return 0, nil, fmt.Errorf("group %s's coordinator: %w", id, err)
	}
	defer ca.Close()
	return do(ca)
}

// describeGroup describes group id, its members' assignments decoded
// (Kafka's consumer protocol), from DescribeGroups on its coordinator. A
// group the coordinator does not know has no members (and no state).
func (a *admin) describeGroup(t *target, id string) (group.Description, error) {
	var d group.Description
	err := a.onCoordinator(t, id, func(ca *admin) (int16, *string, error) {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{id}
		r, err := ca.do(req, 5)
		if err != nil {
			return 0, nil, err
		}
		resp := r.(*kmsg.DescribeGroupsResponse)
		if len(resp.Groups) != 1 {
			return 0, nil, fmt.Errorf("DescribeGroups: %d groups for one", len(resp.Groups))
		}
		g := resp.Groups[0]
		const groupIDNotFound = 69 // v6+: a group the coordinator does not know
		if g.ErrorCode == groupIDNotFound {
			return 0, nil, nil
		}
		if g.ErrorCode != 0 {
			return g.ErrorCode, g.ErrorMessage, nil
		}
		d = group.Description{Group: id, State: group.State(g.State), ProtocolType: g.ProtocolType, Protocol: g.Protocol}
		for _, m := range g.Members {
			md := group.MemberDescription{ID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost}
			if g.ProtocolType == "consumer" && len(m.MemberAssignment) > 0 {
				var as kmsg.ConsumerMemberAssignment
				if err := as.ReadFrom(m.MemberAssignment); err == nil {
					for _, at := range as.Topics {
						for _, p := range at.Partitions {
							md.Assignment = append(md.Assignment, log.TopicPartition{Topic: at.Topic, Partition: int(p)})
						}
					}
				}
			}
			d.Members = append(d.Members, md)
		}
		return 0, nil, nil
	})
	if err != nil {
		return group.Description{}, fmt.Errorf("describe group %s: %w", id, err)
	}
	return d, nil
}

// deleteGroup deletes group id (DeleteGroups on its coordinator).
func (a *admin) deleteGroup(t *target, id string) error {
	return a.onCoordinator(t, id, func(ca *admin) (int16, *string, error) {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = []string{id}
		r, err := ca.do(req, 2)
		if err != nil {
			return 0, nil, err
		}
		resp := r.(*kmsg.DeleteGroupsResponse)
		if len(resp.Groups) != 1 {
			return 0, nil, fmt.Errorf("DeleteGroups: %d answers for one group", len(resp.Groups))
		}
		return resp.Groups[0].ErrorCode, nil, nil
	})
}

// describeConsumerGroup describes a consumer-protocol group (KIP-848) with
// ConsumerGroupDescribe on its coordinator; false when the coordinator
// knows no such group (GROUP_ID_NOT_FOUND) or does not serve the API.
func (a *admin) describeConsumerGroup(t *target, id string) (group.ConsumerGroupDescription, bool, error) {
	var d group.ConsumerGroupDescription
	found := false
	err := a.onCoordinator(t, id, func(ca *admin) (int16, *string, error) {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{id}
		r, err := ca.do(req, 1)
		if err != nil {
			if strings.Contains(err.Error(), "does not serve") {
				return 0, nil, nil // a broker before Kafka 4: no consumer groups
			}
			return 0, nil, err
		}
		resp := r.(*kmsg.ConsumerGroupDescribeResponse)
		if len(resp.Groups) != 1 {
			return 0, nil, fmt.Errorf("ConsumerGroupDescribe: %d groups for one", len(resp.Groups))
		}
		g := resp.Groups[0]
		const groupIDNotFound = 69
		if g.ErrorCode == groupIDNotFound {
			return 0, nil, nil
		}
		if g.ErrorCode != 0 {
			return g.ErrorCode, g.ErrorMessage, nil
		}
		found = true
		d = group.ConsumerGroupDescription{Group: g.Group, State: g.State, Epoch: g.Epoch, AssignmentEpoch: g.AssignmentEpoch, Assignor: g.AssignorName}
		for _, m := range g.Members {
			md := group.ConsumerMemberDescription{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost, MemberEpoch: m.MemberEpoch}
			for _, tp := range m.Assignment.TopicPartitions {
				for _, p := range tp.Partitions {
					md.Assignment = append(md.Assignment, log.TopicPartition{Topic: tp.Topic, Partition: int(p)})
				}
			}
			for _, tp := range m.TargetAssignment.TopicPartitions {
				for _, p := range tp.Partitions {
					md.TargetAssignment = append(md.TargetAssignment, log.TopicPartition{Topic: tp.Topic, Partition: int(p)})
				}
			}
			d.Members = append(d.Members, md)
		}
		return 0, nil, nil
	})
	if err != nil {
		return d, false, fmt.Errorf("describe consumer group %s: %w", id, err)
	}
	return d, found, nil
}
