package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/group/assign"
	"github.com/strata-log/strata/log"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The consumer-group part of the Client (log.GroupClient): each request
// goes to the group's coordinator, found with FindCoordinator and cached
// until a broker says it moved (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
// COORDINATOR_LOAD_IN_PROGRESS) or its connection breaks; then it is looked
// up again and the request retried.
//
// JoinGroup and SyncGroup wait for a rebalance, and a broker answers a
// connection's requests in order: each goes on a connection of its own
// (taken from a small pool), so that heartbeats, commits and fetches on the
// shared connections are never held behind one. The others go on the
// control connection, apart from fetches (a long poll would hold them
// back) and produces.

// Versions of the group APIs the client speaks at most.
const (
	clientFindCoordinatorMax = 4
	clientJoinGroupMax       = 9
	clientSyncGroupMax       = 5
	clientHeartbeatMax       = 4
	clientLeaveGroupMax      = 5
	clientOffsetCommitMax    = 9
	clientOffsetFetchMax     = 9
)

// maxIdleExclusive is how many idle connections of the pool for joins and
// syncs are kept per broker.
const maxIdleExclusive = 2

// coordinatorMoved reports whether a group request's error code means the
// coordinator is elsewhere or not ready: look it up again and retry.
func coordinatorMoved(code int16) bool {
	switch code {
	case errNotCoordinator, errCoordinatorNotAvailable, errCoordinatorLoadInProgress:
		return true
	}
	return false
}

// coordinator returns the address of the group's coordinator.
func (c *Client) coordinator(ctx context.Context, groupID string) (string, error) {
	c.mu.Lock()
	addr, ok := c.coordinators[groupID]
	c.mu.Unlock()
	if ok {
		return addr, nil
	}
	addr, err := c.findCoordinator(ctx, 0, "group", groupID)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	c.coordinators[groupID] = addr
	c.mu.Unlock()
	return addr, nil
}

// findCoordinator asks a broker for the address of the coordinator of
// key, a group (keyType 0) or a transactional id (clientTxnKeyType); what
// names the key in errors.
func (c *Client) findCoordinator(ctx context.Context, keyType int8, what, key string) (string, error) {
	bc, err := c.anyConn(ctx)
	if err != nil {
		return "", err
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType = keyType
	req.CoordinatorKey, req.CoordinatorKeys = key, []string{key}
	resp, err := bc.do(ctx, req, clientFindCoordinatorMax)
	if err != nil {
		return "", fmt.Errorf("kafka: find coordinator of %s %q: %w", what, key, err)
	}
	r := resp.(*kmsg.FindCoordinatorResponse)
	code, host, port := r.ErrorCode, r.Host, r.Port
	if r.Version >= 4 {
		if len(r.Coordinators) != 1 {
			return "", fmt.Errorf("kafka: find coordinator of %s %q: %d coordinators in the response", what, key, len(r.Coordinators))
		}
		rc := r.Coordinators[0]
		code, host, port = rc.ErrorCode, rc.Host, rc.Port
	}
	if err := codeError(code); err != nil {
		return "", fmt.Errorf("kafka: find coordinator of %s %q: %w", what, key, err)
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port))), nil
}

// forgetCoordinator drops the cached coordinator of a group if it is addr.
func (c *Client) forgetCoordinator(groupID, addr string) {
	c.mu.Lock()
	if c.coordinators[groupID] == addr {
		delete(c.coordinators, groupID)
	}
	c.mu.Unlock()
}

// groupDo sends req to the group's coordinator — on a connection of its
// own if exclusive — and returns the response, retrying while the
// coordinator moves, loads or cannot be reached, within ctx (see
// client_retry.go). code extracts the response's error code that says so.
func (c *Client) groupDo(ctx context.Context, groupID string, exclusive bool, req kmsg.Request, max int16, code func(kmsg.Response) int16) (kmsg.Response, error) {
	r := retrier{ctx: ctx}
	for {
		addr, err := c.coordinator(ctx, groupID)
		if err == nil {
			var resp kmsg.Response
			resp, err = c.doOn(ctx, addr, exclusive, req, max)
			if err == nil && coordinatorMoved(code(resp)) {
				err = codeError(code(resp))
			}
			if err == nil {
				return resp, nil
			}
			if retriable(err) || isNetError(err) {
				// Moved, loading, or its broker stopped: look the
				// coordinator up again.
				c.forgetCoordinator(groupID, addr)
			}
		}
		if isNetError(err) && ctx.Err() == nil {
			err = fmt.Errorf("%w: %w", errDial, err)
		}
		if err := r.retry(err); err != nil {
			return nil, err
		}
		c.refreshQuiet(ctx)
	}
}

// isNetError reports whether err is a network operation's (a dial refused,
// a connection reset).
func isNetError(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe)
}

// doOn sends req to the broker at addr on the connection shared by group
// requests or, if exclusive, on one of its own.
func (c *Client) doOn(ctx context.Context, addr string, exclusive bool, req kmsg.Request, max int16) (kmsg.Response, error) {
	if !exclusive {
		bc, err := c.conn(ctx, addr)
		if err != nil {
			return nil, err
		}
		return bc.do(ctx, req, max)
	}
	bc, err := c.takeExclusive(ctx, addr)
	if err != nil {
		return nil, err
	}
	resp, err := bc.do(ctx, req, max)
	// A connection whose request got no answer (ctx ended) still has it
	// pending at the broker: it is not reused.
	c.putExclusive(addr, bc, err == nil)
	return resp, err
}

// takeExclusive returns an idle connection of the pool to addr, or dials
// one.
func (c *Client) takeExclusive(ctx context.Context, addr string) (*brokerConn, error) {
	var stale []*brokerConn
	defer func() {
		for _, bc := range stale {
			bc.close()
		}
	}()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, fmt.Errorf("kafka: client: %w", log.ErrClosed)
	}
	for idle := c.idle[addr]; len(idle) > 0; idle = c.idle[addr] {
		bc := idle[len(idle)-1]
		c.idle[addr] = idle[:len(idle)-1]
		if !bc.broken() {
			c.mu.Unlock()
			return bc, nil
		}
		delete(c.exclusive, bc)
		stale = append(stale, bc)
	}
	c.mu.Unlock()
	bc, err := dialBroker(ctx, addr, c.cfg)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		stale = append(stale, bc)
		return nil, fmt.Errorf("kafka: client: %w", log.ErrClosed)
	}
	c.exclusive[bc] = struct{}{}
	return bc, nil
}

// putExclusive gives a connection back to the pool, or closes it.
func (c *Client) putExclusive(addr string, bc *brokerConn, reusable bool) {
	c.mu.Lock()
	if reusable && !c.closed && !bc.broken() && len(c.idle[addr]) < maxIdleExclusive {
		c.idle[addr] = append(c.idle[addr], bc)
		c.mu.Unlock()
		return
	}
	_, mine := c.exclusive[bc]
	delete(c.exclusive, bc)
	c.mu.Unlock()
	if mine {
		bc.close() // else Close closed it
	}
}

// JoinGroup joins a group with Kafka's JoinGroup at its coordinator. A
// first join that the broker asks for a known member id (KIP-394) is
// answered ErrMemberIDRequired if req.RequireKnownMemberID, and joined
// again with that id otherwise. A request without Protocols joins with the
// protocol "range" and, as group.Coordinator.Join does, syncs too (the
// client computing the range assignment if it is made the leader).
// JoinResponse.Members is the group's size for the leader only: the
// protocol tells the others nothing of it.
func (c *Client) JoinGroup(ctx context.Context, req group.JoinRequest) (group.JoinResponse, error) {
	if req.ProtocolType == "" && len(req.Protocols) == 0 {
		return c.joinAndSync(ctx, req)
	}
	session, rebalance := req.SessionTimeout, req.RebalanceTimeout
	if session <= 0 {
		session = group.DefaultSessionTimeout
	}
	if rebalance <= 0 {
		rebalance = group.DefaultRebalanceTimeout
	}
	kr := kmsg.NewPtrJoinGroupRequest()
	kr.Group, kr.MemberID, kr.ProtocolType = req.Group, req.MemberID, req.ProtocolType
	kr.SessionTimeoutMillis = int32(min(session.Milliseconds(), 1<<31-1))
	kr.RebalanceTimeoutMillis = int32(min(rebalance.Milliseconds(), 1<<31-1))
	if req.GroupInstanceID != "" {
		kr.InstanceID = kmsg.StringPtr(req.GroupInstanceID)
	}
	for _, p := range req.Protocols {
		kp := kmsg.NewJoinGroupRequestProtocol()
		kp.Name, kp.Metadata = p.Name, p.Metadata
		kr.Protocols = append(kr.Protocols, kp)
	}
	for {
		resp, err := c.groupDo(ctx, req.Group, true, kr, clientJoinGroupMax, func(r kmsg.Response) int16 { return r.(*kmsg.JoinGroupResponse).ErrorCode })
		if err != nil {
			return group.JoinResponse{}, fmt.Errorf("kafka: join group %q: %w", req.Group, err)
		}
		r := resp.(*kmsg.JoinGroupResponse)
		if r.ErrorCode == errMemberIDRequired && !req.RequireKnownMemberID && kr.MemberID == "" && r.MemberID != "" {
			kr.MemberID = r.MemberID
			continue
		}
		if r.ErrorCode == errUnknownMemberID && req.MemberID == "" && kr.MemberID != "" {
			// The id the coordinator gave is gone (it moved, or the
			// rebalance expired it): a caller that joined without one
			// never saw it, so join anew, as Kafka's consumers do.
			kr.MemberID = ""
			continue
		}
		if err := codeError(r.ErrorCode); err != nil {
			var out group.JoinResponse
			if r.ErrorCode == errMemberIDRequired {
				out.MemberID = r.MemberID
			}
			return out, fmt.Errorf("kafka: join group %q: %w", req.Group, err)
		}
		out := group.JoinResponse{
			MemberID:   r.MemberID,
			Generation: r.Generation,
			Members:    len(r.Members),
			Leader:     r.LeaderID,
		}
		if r.ProtocolType != nil {
			out.ProtocolType = *r.ProtocolType
		} else {
			out.ProtocolType = req.ProtocolType // before v7 it is the request's
		}
		if r.Protocol != nil {
			out.Protocol = *r.Protocol
		}
		for _, m := range r.Members {
			mm := group.MemberMetadata{ID: m.MemberID, Metadata: m.ProtocolMetadata}
			if m.InstanceID != nil {
				mm.InstanceID = *m.InstanceID
			}
			out.MemberMetadata = append(out.MemberMetadata, mm)
		}
		slices.SortFunc(out.MemberMetadata, func(a, b group.MemberMetadata) int {
			switch {
			case a.ID < b.ID:
				return -1
			case a.ID > b.ID:
				return 1
			}
			return 0
		})
		return out, nil
	}
}

// joinAndSync joins with the range protocol and req.Topics and syncs, as
// group.Coordinator.Join does for a request without Protocols.
func (c *Client) joinAndSync(ctx context.Context, req group.JoinRequest) (group.JoinResponse, error) {
	req.ProtocolType = assign.ProtocolType
	req.Protocols = []group.Protocol{{Name: assign.RangeProtocol, Metadata: assign.EncodeSubscription(req.Topics)}}
	resp, err := c.JoinGroup(ctx, req)
	if err != nil {
		return resp, err
	}
	var assignments map[string][]byte
	if resp.Leader == resp.MemberID {
		subs := map[string][]string{}
		partitions := map[string]int{}
		for _, m := range resp.MemberMetadata {
			topics, err := assign.DecodeSubscription(m.Metadata)
			if err != nil {
				return group.JoinResponse{}, fmt.Errorf("kafka: join group %q: member %s: %w", req.Group, m.ID, err)
			}
			subs[m.ID] = topics
			for _, t := range topics {
				if _, ok := partitions[t]; ok {
					continue
				}
				if n, err := c.Partitions(ctx, t); err == nil {
					partitions[t] = n
				}
			}
		}
		assignments = map[string][]byte{}
		for id, tps := range assign.Range(subs, partitions) {
			assignments[id] = assign.EncodeAssignment(tps)
		}
	}
	s, err := c.SyncGroup(ctx, group.SyncRequest{
		Group: req.Group, MemberID: resp.MemberID, Generation: resp.Generation,
		ProtocolType: resp.ProtocolType, Protocol: resp.Protocol, Assignments: assignments,
	})
	if err != nil {
		return group.JoinResponse{}, err
	}
	if resp.Assignment, err = assign.DecodeAssignment(s.Assignment); err != nil {
		return group.JoinResponse{}, fmt.Errorf("kafka: join group %q: the assignment: %w", req.Group, err)
	}
	if resp.Assignment == nil {
		resp.Assignment = []log.TopicPartition{}
	}
	return resp, nil
}

// SyncGroup sends Kafka's SyncGroup to the group's coordinator; a
// follower's waits for the leader's.
func (c *Client) SyncGroup(ctx context.Context, req group.SyncRequest) (group.SyncResponse, error) {
	kr := kmsg.NewPtrSyncGroupRequest()
	kr.Group, kr.MemberID, kr.Generation = req.Group, req.MemberID, req.Generation
	if req.ProtocolType != "" {
		kr.ProtocolType = kmsg.StringPtr(req.ProtocolType)
	}
	if req.Protocol != "" {
		kr.Protocol = kmsg.StringPtr(req.Protocol)
	}
	ids := make([]string, 0, len(req.Assignments))
	for id := range req.Assignments {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		a := kmsg.NewSyncGroupRequestGroupAssignment()
		a.MemberID, a.MemberAssignment = id, req.Assignments[id]
		kr.GroupAssignment = append(kr.GroupAssignment, a)
	}
	resp, err := c.groupDo(ctx, req.Group, true, kr, clientSyncGroupMax, func(r kmsg.Response) int16 { return r.(*kmsg.SyncGroupResponse).ErrorCode })
	if err != nil {
		return group.SyncResponse{}, fmt.Errorf("kafka: sync group %q: %w", req.Group, err)
	}
	r := resp.(*kmsg.SyncGroupResponse)
	if err := codeError(r.ErrorCode); err != nil {
		return group.SyncResponse{}, fmt.Errorf("kafka: sync group %q: %w", req.Group, err)
	}
	out := group.SyncResponse{ProtocolType: req.ProtocolType, Protocol: req.Protocol, Assignment: r.MemberAssignment}
	if r.ProtocolType != nil {
		out.ProtocolType = *r.ProtocolType
	}
	if r.Protocol != nil {
		out.Protocol = *r.Protocol
	}
	return out, nil
}

// Heartbeat sends Kafka's Heartbeat to the group's coordinator.
func (c *Client) Heartbeat(ctx context.Context, groupID, memberID string, generation int32) error {
	kr := kmsg.NewPtrHeartbeatRequest()
	kr.Group, kr.MemberID, kr.Generation = groupID, memberID, generation
	resp, err := c.groupDo(ctx, groupID, false, kr, clientHeartbeatMax, func(r kmsg.Response) int16 { return r.(*kmsg.HeartbeatResponse).ErrorCode })
	if err == nil {
		err = codeError(resp.(*kmsg.HeartbeatResponse).ErrorCode)
	}
	if err != nil {
		return fmt.Errorf("kafka: heartbeat to group %q: %w", groupID, err)
	}
	return nil
}

// LeaveGroup sends Kafka's LeaveGroup for one member.
func (c *Client) LeaveGroup(ctx context.Context, groupID, memberID string) error {
	kr := kmsg.NewPtrLeaveGroupRequest()
	kr.Group, kr.MemberID = groupID, memberID // v0–v2
	m := kmsg.NewLeaveGroupRequestMember()
	m.MemberID = memberID
	kr.Members = append(kr.Members, m) // v3+
	code := func(r kmsg.Response) int16 {
		lr := r.(*kmsg.LeaveGroupResponse)
		if lr.ErrorCode == errNone && len(lr.Members) == 1 {
			return lr.Members[0].ErrorCode
		}
		return lr.ErrorCode
	}
	resp, err := c.groupDo(ctx, groupID, false, kr, clientLeaveGroupMax, code)
	if err == nil {
		err = codeError(code(resp))
	}
	if err != nil {
		return fmt.Errorf("kafka: leave group %q: %w", groupID, err)
	}
	return nil
}

// CommitOffsets sends Kafka's OffsetCommit: with memberID "" and
// generation -1, a commit outside of membership (a group without members
// takes it). An empty offsets map sends nothing.
func (c *Client) CommitOffsets(ctx context.Context, groupID, memberID string, generation int32, offsets map[log.TopicPartition]int64) error {
	if len(offsets) == 0 {
		return nil
	}
	kr := kmsg.NewPtrOffsetCommitRequest()
	kr.Group, kr.MemberID, kr.Generation = groupID, memberID, generation
	for _, tp := range sortedTPs(offsets) {
		if n := len(kr.Topics); n == 0 || kr.Topics[n-1].Topic != tp.Topic {
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = tp.Topic
			kr.Topics = append(kr.Topics, rt)
		}
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset = int32(tp.Partition), offsets[tp]
		rt := &kr.Topics[len(kr.Topics)-1]
		rt.Partitions = append(rt.Partitions, p)
	}
	code := func(r kmsg.Response) int16 {
		for _, t := range r.(*kmsg.OffsetCommitResponse).Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != errNone {
					return p.ErrorCode
				}
			}
		}
		return errNone
	}
	resp, err := c.groupDo(ctx, groupID, false, kr, clientOffsetCommitMax, code)
	if err == nil {
		err = codeError(code(resp))
	}
	if err != nil {
		return fmt.Errorf("kafka: commit offsets to group %q: %w", groupID, err)
	}
	return nil
}

// FetchOffsets sends Kafka's OffsetFetch and returns the committed offsets
// of the partitions that have one; tps nil asks for all of the group's.
func (c *Client) FetchOffsets(ctx context.Context, groupID string, tps []log.TopicPartition) (map[log.TopicPartition]int64, error) {
	kr := kmsg.NewPtrOffsetFetchRequest()
	kr.Group = groupID // v0–v7
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = groupID // v8+
	if tps != nil {
		kr.Topics, rg.Topics = []kmsg.OffsetFetchRequestTopic{}, []kmsg.OffsetFetchRequestGroupTopic{}
		sorted := slices.Clone(tps)
		slices.SortFunc(sorted, func(a, b log.TopicPartition) int {
			switch {
			case a.Topic != b.Topic && a.Topic < b.Topic:
				return -1
			case a.Topic != b.Topic:
				return 1
			}
			return a.Partition - b.Partition
		})
		for _, tp := range sorted {
			if n := len(kr.Topics); n == 0 || kr.Topics[n-1].Topic != tp.Topic {
				rt := kmsg.NewOffsetFetchRequestTopic()
				rt.Topic = tp.Topic
				kr.Topics = append(kr.Topics, rt)
				gt := kmsg.NewOffsetFetchRequestGroupTopic()
				gt.Topic = tp.Topic
				rg.Topics = append(rg.Topics, gt)
			}
			n := len(kr.Topics) - 1
			kr.Topics[n].Partitions = append(kr.Topics[n].Partitions, int32(tp.Partition))
			rg.Topics[n].Partitions = append(rg.Topics[n].Partitions, int32(tp.Partition))
		}
	}
	kr.Groups = append(kr.Groups, rg)
	// The group's answer, in either shape.
	type part struct {
		topic  string
		p      int32
		offset int64
		code   int16
	}
	parse := func(r *kmsg.OffsetFetchResponse) (int16, []part) {
		var out []part
		if r.Version >= 8 {
			if len(r.Groups) != 1 {
				return errUnknownServerError, nil
			}
			g := r.Groups[0]
			for _, t := range g.Topics {
				for _, p := range t.Partitions {
					out = append(out, part{t.Topic, p.Partition, p.Offset, p.ErrorCode})
				}
			}
			return g.ErrorCode, out
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				out = append(out, part{t.Topic, p.Partition, p.Offset, p.ErrorCode})
			}
		}
		return r.ErrorCode, out
	}
	code := func(r kmsg.Response) int16 {
		code, parts := parse(r.(*kmsg.OffsetFetchResponse))
		for _, p := range parts {
			if code == errNone {
				code = p.code
			}
		}
		return code
	}
	resp, err := c.groupDo(ctx, groupID, false, kr, clientOffsetFetchMax, code)
	if err == nil {
		err = codeError(code(resp))
	}
	if err != nil {
		return nil, fmt.Errorf("kafka: fetch offsets of group %q: %w", groupID, err)
	}
	_, parts := parse(resp.(*kmsg.OffsetFetchResponse))
	out := make(map[log.TopicPartition]int64, len(parts))
	for _, p := range parts {
		if p.offset >= 0 {
			out[log.TopicPartition{Topic: p.topic, Partition: int(p.p)}] = p.offset
		}
	}
	return out, nil
}
