package kafka

import (
	"context"
	"math"
	"slices"
	"strings"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/log"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupOperations is the bit field of the operations on a group a client
// may perform (DescribeGroups v3+, when asked): READ, DELETE and DESCRIBE
// (Kafka's AclOperation codes 3, 6 and 8). Strata has no ACLs.
const groupOperations int32 = 1<<3 | 1<<6 | 1<<8

// handleListGroups lists every group the node's coordinators know (on a
// GroupRouter, those of the groups it coordinates now, as a Kafka broker
// answers), classic and consumer-protocol (KIP-848), those with only
// committed offsets included (classic, state Empty), filtered by state
// (v4+: a consumer group's Empty, Assigning, Reconciling or Stable too)
// and type (v5+, KIP-1043: classic or consumer), case-insensitive as
// Kafka's.
func handleListGroups(_ context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	match := func(filter []string, v string) bool {
		return len(filter) == 0 || slices.ContainsFunc(filter, func(f string) bool { return strings.EqualFold(strings.TrimSpace(f), v) })
	}
	for _, gc := range c.s.coordinators() {
		for _, l := range gc.List() {
			if !match(req.StatesFilter, string(l.State)) || !match(req.TypesFilter, l.Type) {
				continue
			}
			g := kmsg.NewListGroupsResponseGroup()
			g.Group, g.ProtocolType, g.GroupState, g.GroupType = l.Group, l.ProtocolType, string(l.State), l.Type
			resp.Groups = append(resp.Groups, g)
		}
	}
	c.s.listShareGroups(resp, match, req.StatesFilter, req.TypesFilter) // KIP-932 (share.go)
	return reply{resp: resp}
}

// handleDescribeGroups describes each group as Kafka's classic coordinator
// does: members' metadata and assignments and the protocol only while the
// group is Stable; a group the coordinator does not know, or a
// consumer-protocol group (KIP-848: ConsumerGroupDescribe describes it),
// is Dead (and, from v6, GROUP_ID_NOT_FOUND with Kafka's message, KIP-1043).
func handleDescribeGroups(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		g := kmsg.NewDescribeGroupsResponseGroup()
		g.Group = id
		if req.IncludeAuthorizedOperations {
			g.AuthorizedOperations = groupOperations
		} else {
			g.AuthorizedOperations = math.MinInt32
		}
		if id == "" || len(id) > group.MaxNameLen {
			g.ErrorCode = errInvalidGroupID
			resp.Groups = append(resp.Groups, g)
			continue
		}
		gc, code := c.s.coordinatorFor(ctx, id)
		if code != errNone {
			g.ErrorCode = code
			resp.Groups = append(resp.Groups, g)
			continue
		}
		d, ok := gc.Describe(id)
		g.State, g.ProtocolType = string(d.State), d.ProtocolType
		if !ok && req.Version >= 6 {
			g.ErrorCode, g.ErrorMessage = errGroupIDNotFound, kmsg.StringPtr("Group "+id+" not found.")
			if typ, known := gc.Type(id); known && typ != group.TypeClassic {
				g.ErrorMessage = kmsg.StringPtr("Group " + id + " is not a classic group.")
			}
		}
		stable := d.State == group.StateStable
		if stable {
			g.Protocol = d.Protocol
		}
		for _, m := range d.Members {
			gm := kmsg.NewDescribeGroupsResponseGroupMember()
			gm.MemberID, gm.ClientID, gm.ClientHost = m.ID, m.ClientID, m.ClientHost
			if m.InstanceID != "" {
				gm.InstanceID = kmsg.StringPtr(m.InstanceID)
			}
			gm.ProtocolMetadata, gm.MemberAssignment = []byte{}, []byte{}
			if stable {
				if m.MemberMetadata != nil {
					gm.ProtocolMetadata = m.MemberMetadata
				}
				if m.MemberAssignment != nil {
					gm.MemberAssignment = m.MemberAssignment
				}
			}
			g.Members = append(g.Members, gm)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return reply{resp: resp}
}

// handleDeleteGroups deletes groups without members and their committed
// offsets: NON_EMPTY_GROUP for one with members, GROUP_ID_NOT_FOUND for one
// the coordinator does not know.
func handleDeleteGroups(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range req.Groups {
		g := kmsg.NewDeleteGroupsResponseGroup()
		g.Group = id
		gc, code := c.s.coordinatorFor(ctx, id)
		if code == errNone {
			code = groupCode(ctx, gc.Delete(ctx, id))
		}
		if shareCode, ok := c.s.deleteShareGroup(ctx, id); ok && code == errGroupIDNotFound {
			code = shareCode // KIP-932 (share.go)
		}
		g.ErrorCode = code
		resp.Groups = append(resp.Groups, g)
	}
	return reply{resp: resp}
}

// sortedTPs returns the keys of m, by topic then partition.
func sortedTPs(m map[log.TopicPartition]int64) []log.TopicPartition {
	out := make([]log.TopicPartition, 0, len(m))
	for tp := range m {
		out = append(out, tp)
	}
	slices.SortFunc(out, func(a, b log.TopicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return a.Partition - b.Partition
	})
	return out
}
