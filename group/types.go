package group

import (
	"errors"
	"time"

	"github.com/strata-log/strata/internal/errs"
	"github.com/strata-log/strata/tp"
)

// TopicPartition names one partition of a topic (package tp).
type TopicPartition = tp.TopicPartition

// Errors of the group protocol. Test for them with errors.Is.
var (
	// ErrRebalanceInProgress: the group is rebalancing; rejoin (commit first).
	ErrRebalanceInProgress = errors.New("group: rebalance in progress")
	// ErrUnknownMember: the member is not in the group (it left or was
	// removed after its session timed out); rejoin with no member id.
	ErrUnknownMember = errors.New("group: unknown member")
	// ErrIllegalGeneration: the request carries a stale generation; a commit
	// from it is refused.
	ErrIllegalGeneration = errors.New("group: illegal generation")
	// ErrInvalidSessionTimeout: outside [MinSessionTimeout, MaxSessionTimeout].
	ErrInvalidSessionTimeout = errors.New("group: invalid session timeout")
	// ErrClosed: the coordinator is closed.
	ErrClosed = errs.Mark("group: coordinator closed", errs.ErrClosed) // matches log.ErrClosed
	// ErrInvalidGroup: the group id is empty or too long.
	ErrInvalidGroup = errors.New("group: invalid group id")
	// ErrInvalidRequest: a request field is out of range (a negative
	// rebalance timeout, a commit of a negative offset or partition, an empty
	// or over-long topic name). The request changes nothing.
	ErrInvalidRequest = errs.Mark("group: invalid request", errs.ErrInvalidRequest) // matches log.ErrInvalidRequest
	// ErrInvalidConfig: New was given a Config it cannot work with.
	ErrInvalidConfig = errs.Mark("group: invalid config", errs.ErrInvalidConfig) // matches log.ErrInvalidConfig
	// ErrCorruptOffsetRecord: DecodeOffsetRecord was given bytes that are
	// not a well-formed offset commit key and value.
	ErrCorruptOffsetRecord = errs.Mark("group: corrupt offset record", errs.ErrCorrupt) // matches log.ErrCorrupt
	// ErrInconsistentGroupProtocol (Kafka's INCONSISTENT_GROUP_PROTOCOL): a
	// Join with no protocol type or no protocols, with another protocol type
	// than the group's members, or with none of the protocols that all of
	// them support; a Sync naming another protocol than the generation's.
	// The request changes nothing.
	ErrInconsistentGroupProtocol = errors.New("group: inconsistent group protocol")
	// ErrMemberIDRequired (Kafka's MEMBER_ID_REQUIRED, KIP-394): a first
	// Join with RequireKnownMemberID is answered with the member id it is
	// to join with, in JoinResponse.MemberID, and this error.
	ErrMemberIDRequired = errors.New("group: member id required")
	// ErrFencedInstanceID (Kafka's FENCED_INSTANCE_ID, KIP-345): a Join
	// with a group instance id that another member id holds now (a newer
	// instance of the static member replaced this one), or with a member id
	// registered under another instance id.
	ErrFencedInstanceID = errors.New("group: fenced instance id")
	// ErrGroupMaxSizeReached (Kafka's GROUP_MAX_SIZE_REACHED): a new
	// member's Join to a group of Config.MaxSize members.
	ErrGroupMaxSizeReached = errors.New("group: group max size reached")
	// ErrNonEmptyGroup (Kafka's NON_EMPTY_GROUP): Delete of a group that
	// has members.
	ErrNonEmptyGroup = errors.New("group: group is not empty")
	// ErrGroupNotFound (Kafka's GROUP_ID_NOT_FOUND): Delete of a group the
	// coordinator knows nothing of.
	ErrGroupNotFound = errors.New("group: group not found")
	// ErrNotOffsetRecord: the key is a well-formed __consumer_offsets key of
	// another kind (group metadata, key version 2 and up); skip the record.
	ErrNotOffsetRecord = errors.New("group: not an offset commit record")
)

// Limits of names, as Kafka's.
const (
	// MaxNameLen is the longest group id and topic name accepted.
	MaxNameLen = 249
)

// JoinRequest asks to join (or rejoin) a group: Kafka's JoinGroup.
//
// A member of Kafka's classic protocol names its ProtocolType ("consumer"
// for consumers) and its Protocols, most preferred first: for a consumer,
// its assignors with its subscription in each one's metadata. The
// coordinator does not read the metadata.
//
// A request with neither ProtocolType nor Protocols is a member that
// leaves the assignment to the coordinator (the protocol before SyncGroup
// existed here): Join then joins with the protocol "range" and Topics as its
// subscription, runs Kafka's range assignor (package assign) if it is made
// the leader, syncs, and returns the member's partitions in
// JoinResponse.Assignment. Such members and Kafka consumers speaking "range"
// share a group.
type JoinRequest struct {
	Group      string
	MemberID   string // "" on the first join: the coordinator assigns one
	ClientID   string // prefix of an assigned member id; may be ""
	ClientHost string // shown by Describe; may be ""
	// GroupInstanceID makes the member static (KIP-345, group.instance.id):
	// a first Join (MemberID "") with an instance id that a member holds
	// takes that member's place under a new member id — the old id is
	// fenced (ErrFencedInstanceID) — and, for a follower of a stable group
	// with the same protocols, without a rebalance: a restarted static
	// member gets its assignment back. "" → a dynamic member.
	GroupInstanceID string
	// Topics is the subscription of a member without Protocols; ignored
	// with them.
	Topics       []string
	ProtocolType string
	Protocols    []Protocol
	// RequireKnownMemberID: a first Join (MemberID "") is not added but
	// answered ErrMemberIDRequired with the member id to join with (KIP-394,
	// JoinGroup v4 and later).
	RequireKnownMemberID bool
	SessionTimeout       time.Duration // 0 → 45 s (Kafka's session.timeout.ms)
	RebalanceTimeout     time.Duration // 0 → 5 min (Kafka's max.poll.interval.ms)
}

// Protocol is one of a member's protocols: for a consumer, an assignor's
// name and the member's subscription in the assignor's metadata format.
type Protocol struct {
	Name     string
	Metadata []byte
}

// Kafka's client defaults for a JoinRequest's zero fields.
const (
	DefaultSessionTimeout   = 45 * time.Second
	DefaultRebalanceTimeout = 5 * time.Minute
)

// JoinResponse is the outcome of a rebalance's joining for one member:
// Kafka's JoinGroup response.
type JoinResponse struct {
	MemberID   string
	Generation int32
	// Assignment is this member's partitions, sorted, for a Join without
	// Protocols (which syncs too); nil otherwise: the member learns its
	// assignment from Sync.
	Assignment   []TopicPartition
	Members      int    // group size in this generation
	ProtocolType string // the group's
	Protocol     string // the protocol the members voted for
	Leader       string // the member id of the generation's leader
	// MemberMetadata, to the leader only: every member of the generation,
	// sorted by id, with its metadata for Protocol. The leader computes the
	// assignment from them and sends it with its Sync. The Metadata bytes
	// are the coordinator's own, not copies (a group's may be large): read
	// them, never write them.
	MemberMetadata []MemberMetadata
}

// MemberMetadata is one member's metadata for the chosen protocol.
type MemberMetadata struct {
	ID         string
	InstanceID string // its GroupInstanceID; "" for a dynamic member
	Metadata   []byte
}

// SyncRequest is Kafka's SyncGroup: the leader's carries the generation's
// assignment, by member id (a member it leaves out gets an empty one); the
// others', none.
type SyncRequest struct {
	Group      string
	MemberID   string
	Generation int32
	// ProtocolType and Protocol, when not "", must be the generation's
	// (SyncGroup v5): ErrInconsistentGroupProtocol otherwise.
	ProtocolType string
	Protocol     string
	Assignments  map[string][]byte
}

// SyncResponse carries a member's assignment in its generation.
type SyncResponse struct {
	ProtocolType string
	Protocol     string
	Assignment   []byte // the coordinator's own bytes: read only
}

// OffsetStore makes commits durable. The broker appends the offsets, one
// record per partition encoded by EncodeOffsetRecord, to __consumer_offsets
// as one batch and returns once it is durable.
//
// Store is called for one group at a time (commits of a group are
// serialized, so the order of Store calls is the order in which commits take
// effect), with no lock of the Coordinator held; it must not call back into
// the Coordinator. It must not modify offsets and may not retain it after it
// returns. If it returns an error, the commit fails and changes nothing.
//
// A negative offset deletes the partition's commit: Delete stores -1 for
// each partition of a group it deletes, and the broker writes a tombstone
// (a null value) for it.
type OffsetStore interface {
	Store(group string, offsets map[TopicPartition]int64) error
}

// State is the state of a group, as Kafka names it.
type State string

const (
	StateEmpty               State = "Empty"               // no members (it may hold committed offsets)
	StatePreparingRebalance  State = "PreparingRebalance"  // waiting for members to (re)join
	StateCompletingRebalance State = "CompletingRebalance" // waiting for the leader's assignment (its Sync)
	StateStable              State = "Stable"              // a generation is in effect, with its assignment
	StateDead                State = "Dead"                // no such group (Kafka's answer for an unknown or deleted one)
)

// Description is a snapshot of a group (Kafka's DescribeGroups).
type Description struct {
	Group        string
	State        State
	Generation   int32
	ProtocolType string
	Protocol     string // the generation's ("" when empty)
	Leader       string
	Members      []MemberDescription // sorted by ID
}

// MemberDescription is one member of a Description.
type MemberDescription struct {
	ID         string
	InstanceID string // its GroupInstanceID; "" for a dynamic member
	ClientID   string
	ClientHost string
	// MemberMetadata is its metadata for the generation's protocol, and
	// MemberAssignment what the leader gave it (nil before). Both are nil
	// for a member not yet in a generation.
	MemberMetadata   []byte
	MemberAssignment []byte
	// Topics and Assignment decode them for the protocol type "consumer"
	// (Kafka's ConsumerProtocol); nil when they do not decode.
	Topics     []string
	Assignment []TopicPartition
	Joining    bool // its Join is pending (a rebalance is in progress)
}
