package kafka

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/kerr"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/share"
)

// Share groups (KIP-932): ShareGroupHeartbeat and ShareGroupDescribe to
// the group's coordinator, ShareFetch and ShareAcknowledge to the
// partitions' leader (share_fetch.go), and the share-group offsets admin
// (share_admin.go), served by a backend with a share coordinator
// (ShareBackend: a standalone *log.Broker). Topics are named by id on
// the wire, by name in the coordinator.

const (
	shareGroupHeartbeatKey       int16 = 76
	shareGroupDescribeKey        int16 = 77
	shareFetchKey                int16 = 78
	shareAcknowledgeKey          int16 = 79
	describeShareGroupOffsetsKey int16 = 90
	alterShareGroupOffsetsKey    int16 = 91
	deleteShareGroupOffsetsKey   int16 = 92
)

// shareAPIs are served with a ShareBackend. Kafka 4.1 made v1 the first
// of ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch and
// ShareAcknowledge (v0 was the early access); ShareFetch and
// ShareAcknowledge v2 (Kafka 4.2) renew locks (KIP-1222).
var shareAPIs = []api{
	{key: shareGroupHeartbeatKey, min: 1, max: 1, handle: handleShareGroupHeartbeat},
	{key: shareGroupDescribeKey, min: 1, max: 1, handle: handleShareGroupDescribe},
	{key: shareFetchKey, min: 1, max: 2, handle: handleShareFetch},
	{key: shareAcknowledgeKey, min: 1, max: 2, handle: handleShareAcknowledge},
	{key: describeShareGroupOffsetsKey, min: 0, max: 1, handle: handleDescribeShareGroupOffsets},
	{key: alterShareGroupOffsetsKey, min: 0, max: 0, handle: handleAlterShareGroupOffsets},
	{key: deleteShareGroupOffsetsKey, min: 0, max: 0, handle: handleDeleteShareGroupOffsets},
}

// ShareBackend is a backend with share groups (*log.Broker).
type ShareBackend interface {
	ShareCoordinator() *share.Coordinator
}

var _ ShareBackend = (*log.Broker)(nil)

// Kafka's share-session error codes.
const (
	errShareSessionNotFound      = kerr.ShareSessionNotFound
	errInvalidShareSessionEpoch  = kerr.InvalidShareSessionEpoch
	errShareSessionLimitReached  = 133
	errInvalidRecordState        = kerr.InvalidRecordState
	maxShareSessions             = 2000 // group.share.max.share.sessions
	defaultShareMaxRecords       = 500  // a ShareFetch without MaxRecords
	maxShareMemberIDLen          = 36   // a UUID, as Kafka checks it
	defaultShareFetchMaxBytesCap = 50 << 20
)

// shareServer is a server's share groups: its coordinator and the share
// sessions of its clients.
type shareServer struct {
	b ShareBackend // its ShareCoordinator is read when used: resolving must not call the backend

	mu       sync.Mutex
	sessions map[shareSessionKey]*shareSession
}

func newShareServer(b ShareBackend) *shareServer {
	return &shareServer{b: b, sessions: map[shareSessionKey]*shareSession{}}
}

func (s *shareServer) coord() *share.Coordinator { return s.b.ShareCoordinator() }

type shareSessionKey struct{ group, member string }

// shareSession is a share session (Kafka's ShareSession): the partitions
// a member fetches from this broker and the epoch its next request
// carries. It belongs to the connection that made it: when that closes,
// the member's records are released, as Kafka's disconnect listener does.
type shareSession struct {
	epoch int32
	parts []log.TopicPartition // in the order they were added
	turn  int                  // the partition the next fetch starts with
	conn  *conn
	stop  func() bool // of the connection's close hook
}

func (ss *shareSession) add(t log.TopicPartition) {
	if !slices.Contains(ss.parts, t) {
		ss.parts = append(ss.parts, t)
	}
}

// unhook stops the connection's close hook, if it has not run.
func (ss *shareSession) unhook() {
	if ss.stop() {
		ss.conn.s.wg.Done()
	}
}

// next moves the session to its next epoch (1 after the largest).
func (ss *shareSession) next() {
	if ss.epoch == 1<<31-1 {
		ss.epoch = 1
		return
	}
	ss.epoch++
}

// open makes the session of key on c anew (epoch 0), with parts.
func (s *shareServer) open(c *conn, key shareSessionKey, parts []log.TopicPartition) (*shareSession, int16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.sessions[key]; old != nil {
		old.unhook()
		delete(s.sessions, key)
	}
	if len(s.sessions) >= maxShareSessions {
		return nil, errShareSessionLimitReached
	}
	ss := &shareSession{conn: c}
	for _, t := range parts {
		ss.add(t)
	}
	// The hook's goroutine is the server's: Close waits for it (s.wg is
	// above zero while this connection's request is served).
	c.s.wg.Add(1)
	ss.stop = context.AfterFunc(c.ctx, func() {
		defer c.s.wg.Done()
		s.dropped(key, ss)
	})
	s.sessions[key] = ss
	return ss, errNone
}

// dropped: the connection of session ss closed.
func (s *shareServer) dropped(key shareSessionKey, ss *shareSession) {
	s.mu.Lock()
	mine := s.sessions[key] == ss
	if mine {
		delete(s.sessions, key)
	}
	s.mu.Unlock()
	if mine {
		s.coord().ReleaseMember(key.group, key.member)
	}
}

// lookup returns the session of key if epoch is its epoch.
func (s *shareServer) lookup(key shareSessionKey, epoch int32) (*shareSession, int16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[key]
	switch {
	case ss == nil:
		return nil, errShareSessionNotFound
	case ss.epoch != epoch:
		return nil, errInvalidShareSessionEpoch
	}
	return ss, errNone
}

// exists reports whether key has a session.
func (s *shareServer) exists(key shareSessionKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[key] != nil
}

// close ends the session of key (epoch -1) and releases the member's
// records.
func (s *shareServer) close(key shareSessionKey) int16 {
	s.mu.Lock()
	ss := s.sessions[key]
	if ss != nil {
		ss.unhook()
		delete(s.sessions, key)
	}
	s.mu.Unlock()
	if ss == nil {
		return errShareSessionNotFound
	}
	s.coord().ReleaseMember(key.group, key.member)
	return errNone
}

func handleShareGroupHeartbeat(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.ShareGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	fail := func(code int16, err error) reply {
		resp.ErrorCode = code
		if err != nil {
			resp.ErrorMessage = kmsg.StringPtr(err.Error())
		}
		return reply{resp: resp}
	}
	switch {
	case req.GroupID == "":
		return fail(errInvalidGroupID, errors.New("GroupId can't be empty"))
	case req.MemberID == "":
		return fail(errInvalidRequest, errors.New("MemberId can't be empty"))
	case req.RackID != nil && *req.RackID == "":
		return fail(errInvalidRequest, errors.New("RackId can't be empty"))
	}
	hr := share.HeartbeatRequest{
		Group: req.GroupID, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch, RackID: req.RackID,
		SubscribedTopics: req.SubscribedTopicNames, ClientHost: c.remoteHost(),
	}
	if h := requestHeader(ctx); h != nil && h.clientID != nil {
		hr.ClientID = *h.clientID
	}
	gr, err := c.s.caps.shares.coord().Heartbeat(ctx, hr)
	if err != nil {
		if c.s.groups != nil && groupTaken(c.s, req.GroupID) {
			resp.ErrorCode, resp.ErrorMessage = errGroupIDNotFound, kmsg.StringPtr("Group "+req.GroupID+" is not a share group.")
			return reply{resp: resp}
		}
		return fail(groupCode(ctx, err), err)
	}
	resp.MemberID = kmsg.StringPtr(gr.MemberID)
	resp.MemberEpoch = gr.MemberEpoch
	resp.HeartbeatIntervalMillis = int32(gr.HeartbeatInterval / time.Millisecond)
	if gr.Assignment != nil {
		a := kmsg.NewShareGroupHeartbeatResponseAssignment()
		a.TopicPartitions = []kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{}
		for _, t := range byTopic(gr.Assignment) {
			tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			tp.TopicID, tp.Partitions = topicID(t.topic), t.partitions
			a.TopicPartitions = append(a.TopicPartitions, tp)
		}
		resp.Assignment = &a
	}
	return reply{resp: resp}
}

type topicParts struct {
	topic      string
	partitions []int32
}

// byTopic groups sorted partitions by topic.
func byTopic(tps []log.TopicPartition) []topicParts {
	var out []topicParts
	for _, t := range tps {
		if n := len(out); n == 0 || out[n-1].topic != t.Topic {
			out = append(out, topicParts{topic: t.Topic})
		}
		out[len(out)-1].partitions = append(out[len(out)-1].partitions, int32(t.Partition))
	}
	return out
}

func handleShareGroupDescribe(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.ShareGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	for _, id := range req.GroupIDs {
		rg := kmsg.NewShareGroupDescribeResponseGroup()
		rg.GroupID = id
		if id == "" {
			rg.ErrorCode = errInvalidGroupID
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		// On a cluster only the group's coordinator answers (Kafka's
		// NOT_COORDINATOR elsewhere): another broker knows no members.
		if err := c.s.caps.shares.coord().Coordinates(id); err != nil {
			rg.ErrorCode, rg.ErrorMessage = groupCode(ctx, err), kmsg.StringPtr(err.Error())
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		d, ok := c.s.caps.shares.coord().Describe(id)
		if !ok {
			rg.ErrorCode = errGroupIDNotFound
			rg.ErrorMessage = kmsg.StringPtr("Group " + id + " not found.")
			if c.s.groups != nil {
				if _, other := c.s.groups.Type(id); other {
					rg.ErrorMessage = kmsg.StringPtr("Group " + id + " is not a share group.")
				}
			}
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		rg.GroupState, rg.GroupEpoch, rg.AssignmentEpoch, rg.Assignor = d.State, d.Epoch, d.AssignmentEpoch, d.Assignor
		for _, m := range d.Members {
			rm := kmsg.NewShareGroupDescribeResponseGroupMember()
			rm.MemberID, rm.MemberEpoch, rm.ClientID, rm.ClientHost = m.MemberID, m.MemberEpoch, m.ClientID, m.ClientHost
			rm.SubscribedTopicNames = m.SubscribedTopics
			if m.RackID != "" {
				rm.RackID = kmsg.StringPtr(m.RackID)
			}
			for _, t := range byTopic(m.Assignment) {
				tp := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
				tp.TopicID, tp.Topic, tp.Partitions = topicID(t.topic), t.topic, t.partitions
				rm.Assignment.TopicPartitions = append(rm.Assignment.TopicPartitions, tp)
			}
			rg.Members = append(rg.Members, rm)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return reply{resp: resp}
}

// isShareGroup reports whether id is a share group's, which a classic or
// consumer group cannot take: Kafka answers a JoinGroup for it
// INCONSISTENT_GROUP_PROTOCOL and a ConsumerGroupHeartbeat
// GROUP_ID_NOT_FOUND (the group types of KIP-932 and KIP-1043).
func (s *Server) isShareGroup(id string) bool {
	return s.caps.shares != nil && id != "" && s.caps.shares.coord().Exists(id)
}

// shareGroupsServed reports whether the server serves share groups.
func (s *Server) shareGroupsServed() bool { return s.caps.shares != nil }

// listShareGroups adds the share groups to a ListGroups answer.
func (s *Server) listShareGroups(resp *kmsg.ListGroupsResponse, match func(filter []string, v string) bool, states, types []string) {
	if s.caps.shares == nil {
		return
	}
	for _, l := range s.caps.shares.coord().List() {
		if !match(states, l.State) || !match(types, "share") {
			continue
		}
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState, g.GroupType = l.Group, "share", l.State, "share"
		resp.Groups = append(resp.Groups, g)
	}
}

// deleteShareGroup deletes id if it is a share group; handled is false
// if it is none.
func (s *Server) deleteShareGroup(ctx context.Context, id string) (code int16, handled bool) {
	if s.caps.shares == nil {
		return 0, false
	}
	if _, ok := s.caps.shares.coord().Describe(id); !ok {
		return 0, false
	}
	return groupCode(ctx, s.caps.shares.coord().DeleteGroup(ctx, id)), true
}
