package kafka

import (
	"context"
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// QuorumBackend is a cluster member that describes and changes its
// controller quorum (KIP-853): DescribeQuorum, AddRaftVoter and
// RemoveRaftVoter, forwarded to the active controller. Its errors: one
// that errors.Is ErrDuplicateVoter (DUPLICATE_VOTER), ErrVoterNotFound
// (VOTER_NOT_FOUND), ErrQuorumChangeTimedOut or context.DeadlineExceeded
// (REQUEST_TIMED_OUT: the new voter did not catch up in time, or another
// change is under way); others as errorCode maps them.
type QuorumBackend interface {
	DescribeQuorum(ctx context.Context) (QuorumDescription, error)
	AddRaftVoter(ctx context.Context, id int) error
	RemoveRaftVoter(ctx context.Context, id int) error
}

// QuorumDescription is the controller quorum as DescribeQuorum gives it.
type QuorumDescription struct {
	LeaderID      int
	LeaderEpoch   int32 // the Raft term
	HighWatermark int64 // the Raft commit index
	Voters        []QuorumReplica
	Observers     []QuorumReplica // brokers that follow the metadata without a vote
}

// QuorumReplica is one member of the quorum.
type QuorumReplica struct {
	ID int
	// LogEndOffset is the metadata it has applied; -1 unknown.
	LogEndOffset int64
	// Addr is its controller (Raft) host:port, given to clients as the
	// CONTROLLER listener of the voters.
	Addr string
}

// The quorum errors a QuorumBackend reports.
var (
	ErrDuplicateVoter       = errors.New("kafka: already a voter")
	ErrVoterNotFound        = errors.New("kafka: not a voter")
	ErrQuorumChangeTimedOut = errors.New("kafka: voter change timed out")
)

const (
	describeQuorumKey  int16 = 55
	addRaftVoterKey    int16 = 80
	removeRaftVoterKey int16 = 81

	codeRequestTimedOut        int16 = 7
	codeUnknownTopicPartition  int16 = 3
	codeDuplicateVoter         int16 = 126
	codeVoterNotFound          int16 = 127
	metadataTopic                    = "__cluster_metadata"
	quorumChangeDefaultTimeout       = 30 * time.Second
)

var quorumAPIs = []api{
	{key: describeQuorumKey, min: 0, max: 2, handle: handleDescribeQuorum},
	{key: addRaftVoterKey, min: 0, max: 1, handle: handleAddRaftVoter},
	{key: removeRaftVoterKey, min: 0, max: 0, handle: handleRemoveRaftVoter},
}

// quorumCode is the Kafka error code of a QuorumBackend's error.
func quorumCode(err error) int16 {
	switch {
	case errors.Is(err, ErrDuplicateVoter):
		return codeDuplicateVoter
	case errors.Is(err, ErrVoterNotFound):
		return codeVoterNotFound
	case errors.Is(err, ErrQuorumChangeTimedOut), errors.Is(err, context.DeadlineExceeded):
		return codeRequestTimedOut
	}
	return errorCode(err)
}

// handleDescribeQuorum describes the metadata partition
// (__cluster_metadata-0); any other partition asked is
// UNKNOWN_TOPIC_OR_PARTITION.
func handleDescribeQuorum(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.DescribeQuorumRequest)
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	ctx, cancel := context.WithTimeout(ctx, quorumChangeDefaultTimeout)
	defer cancel()
	q, err := c.s.caps.quorum.DescribeQuorum(ctx)
	if err != nil {
		resp.ErrorCode = quorumCode(err)
		if req.Version >= 2 {
			resp.ErrorMessage = kmsg.StringPtr(err.Error())
		}
		return reply{resp: resp}
	}
	replicas := func(rs []QuorumReplica) []kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
		var out []kmsg.DescribeQuorumResponseTopicPartitionReplicaState
		for _, x := range rs {
			s := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
			s.ReplicaID, s.LogEndOffset = int32(x.ID), x.LogEndOffset
			s.LastFetchTimestamp, s.LastCaughtUpTimestamp = -1, -1
			out = append(out, s)
		}
		return out
	}
	for _, rt := range req.Topics {
		t := kmsg.NewDescribeQuorumResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewDescribeQuorumResponseTopicPartition()
			p.Partition = rp.Partition
			if rt.Topic != metadataTopic || rp.Partition != 0 {
				p.ErrorCode = codeUnknownTopicPartition
				t.Partitions = append(t.Partitions, p)
				continue
			}
			p.LeaderID, p.LeaderEpoch, p.HighWatermark = int32(q.LeaderID), q.LeaderEpoch, q.HighWatermark
			p.CurrentVoters, p.Observers = replicas(q.Voters), replicas(q.Observers)
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	if req.Version >= 2 {
		for _, v := range q.Voters {
			n := kmsg.NewDescribeQuorumResponseNode()
			n.NodeID = int32(v.ID)
			if host, port, err := net.SplitHostPort(v.Addr); err == nil {
				if p, err := strconv.ParseUint(port, 10, 16); err == nil {
					l := kmsg.NewDescribeQuorumResponseNodeListener()
					l.Name, l.Host, l.Port = "CONTROLLER", host, uint16(p)
					n.Listeners = append(n.Listeners, l)
				}
			}
			resp.Nodes = append(resp.Nodes, n)
		}
	}
	return reply{resp: resp}
}

// handleAddRaftVoter promotes a member that follows the metadata to a
// voter. The member's address is the one it joined with: Listeners and
// the directory id are not used.
func handleAddRaftVoter(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.AddRaftVoterRequest)
	resp := req.ResponseKind().(*kmsg.AddRaftVoterResponse)
	ctx, cancel := quorumContext(ctx, req.TimeoutMillis)
	defer cancel()
	if err := c.s.caps.quorum.AddRaftVoter(ctx, int(req.VoterID)); err != nil {
		resp.ErrorCode, resp.ErrorMessage = quorumCode(err), kmsg.StringPtr(err.Error())
	}
	return reply{resp: resp}
}

// handleRemoveRaftVoter removes a voter.
func handleRemoveRaftVoter(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.RemoveRaftVoterRequest)
	resp := req.ResponseKind().(*kmsg.RemoveRaftVoterResponse)
	ctx, cancel := quorumContext(ctx, 0)
	defer cancel()
	if err := c.s.caps.quorum.RemoveRaftVoter(ctx, int(req.VoterID)); err != nil {
		resp.ErrorCode, resp.ErrorMessage = quorumCode(err), kmsg.StringPtr(err.Error())
	}
	return reply{resp: resp}
}

// quorumContext bounds a voter change by the request's timeout (30 s
// when it has none).
func quorumContext(ctx context.Context, timeoutMS int32) (context.Context, context.CancelFunc) {
	d := quorumChangeDefaultTimeout
	if timeoutMS > 0 {
		d = time.Duration(timeoutMS) * time.Millisecond
	}
	return context.WithTimeout(ctx, d)
}
