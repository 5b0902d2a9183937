package kafka

import (
	"context"
	"errors"
	"net"

	"github.com/strata-log/strata/group"
)

// GroupRouter is implemented by a Backend whose consumer groups are
// spread over the nodes of a cluster (a replica member's adapter): each group has
// one coordinator, on one node, and it moves. A server over a GroupRouter
// asks it for each group: FindCoordinator answers the node it names, and
// the group APIs (JoinGroup … OffsetFetch, DescribeGroups, DeleteGroups)
// are served by the coordinator it returns, or answered NOT_COORDINATOR
// when the group is another node's (COORDINATOR_LOAD_IN_PROGRESS when it
// is this node's but not loaded yet, COORDINATOR_NOT_AVAILABLE when no
// node is known), so that Kafka clients find it again. A Backend without
// it serves every group with its GroupCoordinator, as one node.
type GroupRouter interface {
	// CoordinatorFor returns the coordinator of groupID when this node
	// runs it (c non-nil), else the node that coordinates it (c nil); ok
	// false when no node is known now. It may first create what
	// coordination needs (Kafka's __consumer_offsets), bounded by ctx.
	CoordinatorFor(ctx context.Context, groupID string) (c *group.Coordinator, node int32, ok bool)
	// Coordinators returns every coordinator this node runs now: ListGroups
	// lists their groups, as a Kafka broker lists those it coordinates.
	Coordinators() []*group.Coordinator
}

// groupsServed reports whether the server serves the group APIs.
func (s *Server) groupsServed() bool {
	return s.caps.groupRouter != nil || s.groups != nil
}

// coordinatorFor returns this server's coordinator of groupID, or the
// Kafka error code that sends the client to look for it again.
func (s *Server) coordinatorFor(ctx context.Context, groupID string) (*group.Coordinator, int16) {
	r := s.caps.groupRouter
	if r == nil {
		if s.groups == nil {
			return nil, errCoordinatorNotAvailable
		}
		return s.groups, errNone
	}
	c, node, ok := r.CoordinatorFor(ctx, groupID)
	switch {
	case !ok:
		return nil, errCoordinatorNotAvailable
	case c != nil:
		return c, errNone
	case node == s.cfg.NodeID:
		return nil, errCoordinatorLoadInProgress
	}
	return nil, errNotCoordinator
}

// localCoordinator is coordinatorFor without a wait: nil if the group is
// not this server's now.
func (s *Server) localCoordinator(groupID string) *group.Coordinator {
	ctx, cancel := context.WithCancel(s.ctx)
	cancel() // nothing is created for a question about a member
	c, _ := s.coordinatorFor(ctx, groupID)
	return c
}

// coordinators returns every coordinator this server runs.
func (s *Server) coordinators() []*group.Coordinator {
	if r := s.caps.groupRouter; r != nil {
		return r.Coordinators()
	}
	if s.groups == nil {
		return nil
	}
	return []*group.Coordinator{s.groups}
}

// findCoordinator answers FindCoordinator for one group: the node that
// coordinates it and its address.
func (s *Server) findCoordinator(ctx context.Context, groupID string) (node int32, host string, port int32, code int16) {
	r := s.caps.groupRouter
	if r == nil {
		if oc := s.caps.offsetsTopic; oc != nil && oc.CreateOffsetsTopic() != nil {
			return -1, "", -1, errCoordinatorNotAvailable // as Kafka's while it cannot create it
		}
		host, port := s.advertised()
		return s.cfg.NodeID, host, port, errNone
	}
	_, node, ok := r.CoordinatorFor(ctx, groupID)
	if !ok {
		return -1, "", -1, errCoordinatorNotAvailable
	}
	if node == s.cfg.NodeID {
		host, port := s.advertised()
		return node, host, port, errNone
	}
	if cb := s.caps.cluster; cb != nil {
		for _, b := range cb.ClusterBrokers() {
			if b.ID == node {
				return node, b.Host, b.Port, errNone
			}
		}
	}
	return -1, "", -1, errCoordinatorNotAvailable // its address is not known (yet)
}

// CoordinatorMoved reports whether err, from one of a Client's group
// calls, says that the group's coordinator moved, is loading or could not
// be reached: find it again and retry (the Client retries a few times
// itself before it returns such an error).
func CoordinatorMoved(err error) bool {
	var ke *Error
	if errors.As(err, &ke) && coordinatorMoved(ke.Code) {
		return true
	}
	var oe *net.OpError
	return errors.Is(err, ErrNotCoordinator) || errors.Is(err, errConnClosed) || errors.As(err, &oe)
}

// ErrNotCoordinator (Kafka's NOT_COORDINATOR): the node does not
// coordinate the group (any more). A GroupRouter's coordinator whose
// OffsetStore lost the partition it writes to returns it (wrapped), and
// the server answers the commit NOT_COORDINATOR, as Kafka's does.
var ErrNotCoordinator = errNotCoordinatorErr
