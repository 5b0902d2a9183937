package controller

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// The forwarding RPC: a member that is not the active controller sends the
// request to the one that is, over a fresh connection to its RaftAddr
// (first byte streamRPC). Frames are a 4-byte big-endian length and a JSON
// body: requests are rare (registrations, heartbeats every few seconds,
// admin operations), so readable beats compact here. A member answers only
// for itself; it never forwards a forwarded request.

const (
	maxFrame = 4 << 20
	rpcAck   = 'A'
)

// Operation kinds.
const (
	opRegister         = "register_broker"
	opHeartbeat        = "heartbeat"
	opCreateTopic      = "create_topic"
	opCreatePartitions = "create_partitions"
	opDeleteTopic      = "delete_topic"
	opAlterPartition   = "alter_partition"
	// opAllocateProducerIDs is Kafka's AllocateProducerIds.
	opAllocateProducerIDs = "allocate_producer_ids"
	// opJoin adds a broker to the Raft configuration as a non-voter;
	// opUnregister is Kafka's UnregisterBroker (membership.go).
	opJoin       = "join"
	opUnregister = "unregister_broker"
	// The voter changes and DescribeQuorum (quorum.go); opApplied asks a
	// member what it has applied.
	opDescribeQuorum = "describe_quorum"
	opAddVoter       = "add_voter"
	opRemoveVoter    = "remove_voter"
	opApplied        = "applied"
	opElectLeaders   = "elect_leaders"       // elect.go
	opReassign       = "alter_reassignments" // reassign.go
)

// op is one request to the active controller.
type op struct {
	Kind      string                `json:"kind"`
	TimeoutMS int64                 `json:"timeout_ms,omitzero"`
	Register  BrokerRegistration    `json:"register,omitzero"`
	Heartbeat HeartbeatRequest      `json:"heartbeat,omitzero"`
	Topic     string                `json:"topic,omitzero"`
	Spec      TopicSpec             `json:"spec,omitzero"`
	Total     int                   `json:"total,omitzero"`
	Alter     AlterPartitionRequest `json:"alter,omitzero"`

	ProducerIDs AllocateProducerIDsRequest `json:"producer_ids,omitzero"`
	Join        Peer                       `json:"join,omitzero"`
	BrokerID    int                        `json:"broker_id,omitzero"`
	Version     int64                      `json:"version,omitzero"`
	Elect       electRequest               `json:"elect,omitzero"`
	Security    securityOp                 `json:"security,omitzero"` // security.go
	Reassign    []ReassignTarget           `json:"reassign,omitzero"`
	Configs     []ConfigAlteration         `json:"configs,omitzero"` // configs.go
}

// outcome is what an op yields.
type outcome struct {
	Epoch     int64             `json:"epoch,omitzero"`
	Heartbeat HeartbeatResponse `json:"heartbeat,omitzero"`
	Topic     TopicInfo         `json:"topic,omitzero"`
	Partition PartitionState    `json:"partition,omitzero"`

	ProducerIDs ProducerIDBlock  `json:"producer_ids,omitzero"`
	Quorum      QuorumInfo       `json:"quorum,omitzero"`
	Elections   []electResult    `json:"elections,omitzero"`
	Security    securityOutcome  `json:"security,omitzero"` // security.go
	Reassigned  []reassignResult `json:"reassigned,omitzero"`
	Configs     []configResult   `json:"configs,omitzero"` // configs.go
	// Version is the metadata version (Raft index) the op's records
	// committed at; 0 when it had none.
	Version uint64 `json:"version,omitzero"`
}

type rpcResponse struct {
	Code       string  `json:"code,omitzero"` // "" on success, else errorCode
	Message    string  `json:"message,omitzero"`
	LeaderID   int     `json:"leader_id,omitzero"`
	LeaderAddr string  `json:"leader_addr,omitzero"`
	Outcome    outcome `json:"outcome,omitzero"`
}

func writeFrame(w io.Writer, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(body) > maxFrame {
		return fmt.Errorf("%w: frame of %d bytes", ErrInvalidRequest, len(body))
	}
	buf := make([]byte, 4, 4+len(body))
	binary.BigEndian.PutUint32(buf, uint32(len(body)))
	_, err = w.Write(append(buf, body...))
	return err
}

func readFrame(r io.Reader, v any) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFrame {
		return fmt.Errorf("%w: frame of %d bytes", ErrCorrupt, n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return nil
}

// serveRPC answers forwarded requests on conn until it closes.
func (c *Controller) serveRPC(conn net.Conn) {
	<-c.ready // a member restarting gets requests before its Raft node exists
	// The ack byte tells the caller its request will be read: a caller that
	// does not get it knows the request never arrived, and may retry.
	if _, err := conn.Write([]byte{rpcAck}); err != nil {
		return
	}
	r := bufio.NewReader(conn)
	for {
		var o op
		if err := readFrame(r, &o); err != nil {
			return
		}
		ctx, cancel := c.requestContext(context.Background(), o.TimeoutMS)
		out, err := c.serveLocal(ctx, o)
		cancel()
		if err != nil && c.ctx.Err() != nil {
			// This member is closing (its context ended the request):
			// say so, rather than a bare "context canceled".
			err = ErrClosed
		}
		resp := rpcResponse{Outcome: out}
		if err != nil {
			resp = rpcResponse{Code: wireCode(err), Message: err.Error()}
			var nc *NotControllerError
			if errors.As(err, &nc) {
				resp.LeaderID, resp.LeaderAddr = nc.LeaderID, nc.LeaderAddr
			}
		}
		if err := writeFrame(conn, resp); err != nil {
			return
		}
	}
}

// serveLocal answers o on this member: the Raft configuration changes
// here (membership.go), everything else through the event loop.
func (c *Controller) serveLocal(ctx context.Context, o op) (outcome, error) {
	switch o.Kind {
	case opJoin:
		return c.handleJoin(ctx, o)
	case opUnregister:
		return c.handleUnregister(ctx, o)
	case opDescribeQuorum:
		return c.handleDescribeQuorum(ctx)
	case opAddVoter:
		return c.handleAddVoter(ctx, o)
	case opRemoveVoter:
		return c.handleRemoveVoter(ctx, o)
	case opApplied:
		return c.handleApplied(ctx, o)
	}
	return c.handleLocal(ctx, o)
}

// requestContext bounds a forwarded request by its timeout and by Close.
func (c *Controller) requestContext(parent context.Context, timeoutMS int64) (context.Context, context.CancelFunc) {
	var ctx context.Context
	var cancel context.CancelFunc
	if timeoutMS > 0 {
		ctx, cancel = context.WithTimeout(parent, time.Duration(timeoutMS)*time.Millisecond)
	} else {
		ctx, cancel = context.WithCancel(parent)
	}
	stop := context.AfterFunc(c.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// forward sends o to member id at addr and returns its answer. A failure
// before the request was sent is a *NotControllerError (safe to retry).
func (c *Controller) forward(ctx context.Context, id int, addr string, o op) (outcome, error) {
	unreachable := func(err error) error {
		return &NotControllerError{LeaderID: id, LeaderAddr: addr, Err: fmt.Errorf("unreachable: %w", err)}
	}
	conn, err := c.mux.dial(ctx, addr, streamRPC)
	if err != nil {
		if ctx.Err() != nil {
			return outcome{}, ctx.Err()
		}
		return outcome{}, unreachable(err)
	}
	defer conn.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
		o.TimeoutMS = max(1, time.Until(d).Milliseconds())
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	r := bufio.NewReader(conn)
	if ack, err := r.ReadByte(); err != nil || ack != rpcAck {
		if ctx.Err() != nil {
			return outcome{}, ctx.Err()
		}
		if err == nil {
			err = fmt.Errorf("bad ack byte %q", ack)
		}
		return outcome{}, unreachable(err)
	}
	var resp rpcResponse
	if err := writeFrame(conn, o); err != nil {
		return outcome{}, c.forwardError(ctx, addr, err)
	}
	if err := readFrame(r, &resp); err != nil {
		return outcome{}, c.forwardError(ctx, addr, err)
	}
	if resp.Code == "" {
		return resp.Outcome, nil
	}
	if resp.Code == errorCode(ErrNotController) {
		return outcome{}, &NotControllerError{LeaderID: resp.LeaderID, LeaderAddr: resp.LeaderAddr}
	}
	if s := wireError(resp.Code); s != nil {
		return outcome{}, &remoteError{msg: resp.Message, sentinel: s}
	}
	return outcome{}, errors.New(resp.Message)
}

// forwardError: the request may have reached the active controller, so the
// caller cannot know whether it took effect: the same as an active
// controller losing its leadership before the change committed, and
// ErrLeadershipLost says so (callers whose change is safe to ask for again,
// like a producer-id block, retry it).
func (c *Controller) forwardError(ctx context.Context, addr string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("controller: forward to %s: %w (%w)", addr, ErrLeadershipLost, err)
}
