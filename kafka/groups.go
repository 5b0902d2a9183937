package kafka

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/strata-log/strata/group"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The membership APIs of Kafka's classic group protocol, served by the
// backend's group.Coordinator: FindCoordinator names this node for every
// group (on a GroupRouter, the node it names for the group, and the other
// APIs answer NOT_COORDINATOR for a group this node does not coordinate:
// coordinator_backend.go); JoinGroup, SyncGroup, Heartbeat and LeaveGroup map one to one
// onto Join, Sync, Heartbeat and Leave.
//
// A JoinGroup (and a follower's SyncGroup) waits for the rebalance: its
// handler blocks, but the connection goes on reading and handling the
// requests behind it (a Heartbeat of another group renews that member's
// session at once); only their responses wait, as Kafka's ordering rule
// says.

// Coordinator key types of FindCoordinator.
const (
	coordinatorGroup int8 = 0
)

// groupCode is errorCode for the coordinator's answers: a request the
// connection gave up on (ctx done) is answered COORDINATOR_NOT_AVAILABLE,
// which makes a client look for the coordinator again.
func groupCode(ctx context.Context, err error) int16 {
	if err != nil && ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return errCoordinatorNotAvailable
	}
	return errorCode(err)
}

func handleFindCoordinator(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	answer := func(key string) (node int32, host string, port int32, code int16, msg *string) {
		if req.CoordinatorType == coordinatorTransaction {
			return c.s.findTxnCoordinator(ctx, key)
		}
		if req.CoordinatorType != coordinatorGroup {
			// Transactions and share groups are not served.
			return -1, "", -1, errInvalidRequest, kmsg.StringPtr("only group coordinators (key type 0) are served")
		}
		node, host, port, code = c.s.findCoordinator(ctx, key)
		return node, host, port, code, nil
	}
	if req.Version < 4 {
		resp.NodeID, resp.Host, resp.Port, resp.ErrorCode, resp.ErrorMessage = answer(req.CoordinatorKey)
		return reply{resp: resp}
	}
	for _, key := range req.CoordinatorKeys {
		rc := kmsg.NewFindCoordinatorResponseCoordinator()
		rc.Key = key
		rc.NodeID, rc.Host, rc.Port, rc.ErrorCode, rc.ErrorMessage = answer(key)
		resp.Coordinators = append(resp.Coordinators, rc)
	}
	return reply{resp: resp}
}

func handleJoinGroup(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.JoinGroupRequest)
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation, resp.MemberID = -1, req.MemberID
	if req.ProtocolType == "" || len(req.Protocols) == 0 {
		// Kafka's answer; group.Coordinator would take a Join with neither
		// as one it is to assign itself, which is not Kafka's protocol.
		resp.ErrorCode = errInconsistentGroupProtocol
		return reply{resp: resp}
	}
	if c.s.isShareGroup(req.Group) { // a share group's id (share.go)
		resp.MemberID, resp.ErrorCode = "", errInconsistentGroupProtocol
		return reply{resp: resp}
	}
	jr := group.JoinRequest{
		Group:        req.Group,
		MemberID:     req.MemberID,
		ClientHost:   c.remoteHost(),
		ProtocolType: req.ProtocolType,
		// KIP-394: from v4 a first join is told its member id and joins
		// again with it.
		RequireKnownMemberID: req.Version >= 4,
		SessionTimeout:       time.Duration(req.SessionTimeoutMillis) * time.Millisecond,
		RebalanceTimeout:     time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond,
	}
	if h := requestHeader(ctx); h != nil && h.clientID != nil {
		jr.ClientID = *h.clientID
	}
	if req.Version < 1 {
		jr.RebalanceTimeout = jr.SessionTimeout // as Kafka: v0 has none
	}
	if req.InstanceID != nil {
		jr.GroupInstanceID = *req.InstanceID
	}
	if jr.SessionTimeout <= 0 {
		resp.ErrorCode = errInvalidSessionTimeout // 0 would be the coordinator's default
		return reply{resp: resp}
	}
	if jr.RebalanceTimeout <= 0 {
		jr.RebalanceTimeout = jr.SessionTimeout
	}
	for _, p := range req.Protocols {
		jr.Protocols = append(jr.Protocols, group.Protocol{Name: p.Name, Metadata: p.Metadata})
	}
	gc, code := c.s.coordinatorFor(ctx, req.Group)
	if code != errNone {
		resp.ErrorCode = code
		return reply{resp: resp}
	}
	jresp, err := gc.Join(ctx, jr)
	if err != nil {
		resp.ErrorCode = groupCode(ctx, err)
		if errors.Is(err, group.ErrMemberIDRequired) {
			resp.MemberID = jresp.MemberID
		}
		return reply{resp: resp}
	}
	resp.Generation, resp.MemberID, resp.LeaderID = jresp.Generation, jresp.MemberID, jresp.Leader
	resp.ProtocolType, resp.Protocol = kmsg.StringPtr(jresp.ProtocolType), kmsg.StringPtr(jresp.Protocol)
	for _, m := range jresp.MemberMetadata {
		rm := kmsg.NewJoinGroupResponseMember()
		rm.MemberID, rm.ProtocolMetadata = m.ID, m.Metadata
		if m.InstanceID != "" {
			rm.InstanceID = kmsg.StringPtr(m.InstanceID)
		}
		resp.Members = append(resp.Members, rm)
	}
	return reply{resp: resp}
}

// headerKey is the context key of the header of the request a handler
// serves.
type headerKey struct{}

// requestHeader returns the header of the request being handled, nil if
// none is known.
func requestHeader(ctx context.Context) *header {
	h, _ := ctx.Value(headerKey{}).(*header)
	return h
}

// remoteHost is the client's host, as Kafka shows it in DescribeGroups.
func (c *conn) remoteHost() string {
	if host, _, err := net.SplitHostPort(c.remote); err == nil {
		return "/" + host
	}
	return c.remote
}

// fenced reports whether a request of a static member (KIP-345) comes
// from an instance that a newer member id took over: Kafka answers it
// FENCED_INSTANCE_ID (the coordinator knows members by id only).
func (s *Server) fenced(groupID string, instanceID *string, memberID string) bool {
	if instanceID == nil {
		return false
	}
	gc := s.localCoordinator(groupID)
	if gc == nil {
		return false
	}
	d, ok := gc.Describe(groupID)
	if !ok {
		return false
	}
	for _, m := range d.Members {
		if m.InstanceID == *instanceID {
			return m.ID != memberID
		}
	}
	return false
}

func handleSyncGroup(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.SyncGroupRequest)
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	if c.s.fenced(req.Group, req.InstanceID, req.MemberID) {
		resp.ErrorCode, resp.MemberAssignment = errFencedInstanceID, []byte{}
		return reply{resp: resp}
	}
	sr := group.SyncRequest{Group: req.Group, MemberID: req.MemberID, Generation: req.Generation}
	if req.ProtocolType != nil {
		sr.ProtocolType = *req.ProtocolType
	}
	if req.Protocol != nil {
		sr.Protocol = *req.Protocol
	}
	if len(req.GroupAssignment) > 0 {
		sr.Assignments = make(map[string][]byte, len(req.GroupAssignment))
		for _, a := range req.GroupAssignment {
			sr.Assignments[a.MemberID] = a.MemberAssignment
		}
	}
	gc, code := c.s.coordinatorFor(ctx, req.Group)
	if code != errNone {
		resp.ErrorCode, resp.MemberAssignment = code, []byte{}
		return reply{resp: resp}
	}
	sresp, err := gc.Sync(ctx, sr)
	if err != nil {
		resp.ErrorCode = groupCode(ctx, err)
		resp.MemberAssignment = []byte{}
		return reply{resp: resp}
	}
	resp.ProtocolType, resp.Protocol = kmsg.StringPtr(sresp.ProtocolType), kmsg.StringPtr(sresp.Protocol)
	resp.MemberAssignment = sresp.Assignment
	if resp.MemberAssignment == nil {
		resp.MemberAssignment = []byte{}
	}
	return reply{resp: resp}
}

func handleHeartbeat(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if c.s.fenced(req.Group, req.InstanceID, req.MemberID) {
		resp.ErrorCode = errFencedInstanceID
		return reply{resp: resp}
	}
	gc, code := c.s.coordinatorFor(ctx, req.Group)
	if code != errNone {
		resp.ErrorCode = code
		return reply{resp: resp}
	}
	resp.ErrorCode = groupCode(ctx, gc.Heartbeat(ctx, req.Group, req.MemberID, req.Generation))
	return reply{resp: resp}
}

func handleLeaveGroup(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.LeaveGroupRequest)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	gc, code := c.s.coordinatorFor(ctx, req.Group)
	if code != errNone {
		resp.ErrorCode = code
		return reply{resp: resp}
	}
	if req.Version < 3 {
		resp.ErrorCode = groupCode(ctx, gc.Leave(ctx, req.Group, req.MemberID))
		return reply{resp: resp}
	}
	// v3+ (KIP-345): a batch of members, each by member id or, for a
	// static member, by instance id.
	var byInstance map[string]string // instance id → member id, when needed
	for _, m := range req.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = m.MemberID, m.InstanceID
		id := m.MemberID
		if m.InstanceID != nil {
			if byInstance == nil {
				byInstance = map[string]string{}
				if d, ok := gc.Describe(req.Group); ok {
					for _, dm := range d.Members {
						if dm.InstanceID != "" {
							byInstance[dm.InstanceID] = dm.ID
						}
					}
				}
			}
			holder, ok := byInstance[*m.InstanceID]
			switch {
			case !ok:
				rm.ErrorCode = errUnknownMemberID
			case id != "" && id != holder:
				rm.ErrorCode = errFencedInstanceID // a newer instance holds it
			default:
				id = holder
			}
		}
		if rm.ErrorCode == errNone {
			rm.ErrorCode = groupCode(ctx, gc.Leave(ctx, req.Group, id))
		}
		if rm.ErrorCode == errNotCoordinator || rm.ErrorCode == errCoordinatorNotAvailable {
			// The coordinator is moving (the leave could not be stored):
			// the request's error, which sends the client to the next
			// coordinator with it; a member's own is not retried.
			resp.ErrorCode, resp.Members = rm.ErrorCode, nil
			return reply{resp: resp}
		}
		resp.Members = append(resp.Members, rm)
	}
	return reply{resp: resp}
}
