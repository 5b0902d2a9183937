package kafka

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/log"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The Client's consumer group administration (log.GroupAdmin): ListGroups
// asks every broker (each lists the groups it coordinates), DeleteGroups
// goes to the group's coordinator.

var _ log.GroupAdmin = (*Client)(nil)

// Highest versions of the group admin requests the Client sends (v5 of
// ListGroups brings the group type, KIP-1043).
const (
	clientListGroupsMax   = 5
	clientDeleteGroupsMax = 2
)

// ListGroups returns every group the cluster's brokers coordinate, sorted
// by id: a broker that does not answer fails it.
func (c *Client) ListGroups(ctx context.Context) ([]group.Listing, error) {
	if err := c.refresh(ctx); err != nil {
		return nil, err
	}
	c.mu.Lock()
	addrs := make([]string, 0, len(c.brokers))
	for _, a := range c.brokers {
		addrs = append(addrs, a)
	}
	c.mu.Unlock()
	slices.Sort(addrs)
	var out []group.Listing
	for _, a := range addrs {
		bc, err := c.conn(ctx, a)
		if err != nil {
			return nil, fmt.Errorf("kafka: list groups: %w", err)
		}
		resp, err := bc.do(ctx, kmsg.NewPtrListGroupsRequest(), clientListGroupsMax)
		if err != nil {
			return nil, fmt.Errorf("kafka: list groups on %s: %w", a, err)
		}
		r := resp.(*kmsg.ListGroupsResponse)
		if err := codeError(r.ErrorCode); err != nil {
			return nil, fmt.Errorf("kafka: list groups on %s: %w", a, err)
		}
		for _, g := range r.Groups {
			l := group.Listing{Group: g.Group, ProtocolType: g.ProtocolType, State: group.State(g.GroupState), Type: g.GroupType}
			if r.Version < 5 {
				l.Type = group.TypeClassic // older brokers have classic groups only
			}
			out = append(out, l)
		}
	}
	slices.SortFunc(out, func(a, b group.Listing) int { return strings.Compare(a.Group, b.Group) })
	return out, nil
}

// DeleteGroup deletes a group without members and its committed offsets,
// asking its coordinator (group.ErrNonEmptyGroup, group.ErrGroupNotFound).
func (c *Client) DeleteGroup(ctx context.Context, groupID string) error {
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{groupID}
	code := func(r kmsg.Response) int16 {
		gs := r.(*kmsg.DeleteGroupsResponse).Groups
		if len(gs) != 1 {
			return errUnknownServerError
		}
		return gs[0].ErrorCode
	}
	resp, err := c.groupDo(ctx, groupID, false, req, clientDeleteGroupsMax, code)
	if err == nil {
		err = codeError(code(resp))
	}
	if err != nil {
		return fmt.Errorf("kafka: delete group %q: %w", groupID, err)
	}
	return nil
}
