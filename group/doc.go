// Package group is Strata's consumer-group coordinator: membership,
// generations and committed offsets, in process, in Kafka's classic group
// protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit).
//
// A broker (log.Broker) owns one Coordinator, made with Open from a Config
// that says how to count a topic's partitions and an OffsetsLog: its
// partition of the internal topic __consumer_offsets, which the
// Coordinator replays at open and appends every commit and group change
// to (a cluster member runs one per partition it leads, over its replica).
// New makes one over any OffsetStore (or none: memory only). Consumers
// reach it through log.Client's JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup, CommitOffsets and FetchOffsets, which call Join, Sync,
// Heartbeat, Leave, Commit and Committed; a Kafka server's handlers call
// the same methods, and CommitWithMetadata and CommittedWithMetadata for
// OffsetCommit's leader epochs and metadata.
//
// # Joining, the leader and SyncGroup
//
// A member joins with Join and no member id; the coordinator gives it one,
// as Kafka does: its client id, a dash and a random UUID (with
// RequireKnownMemberID, as a JoinGroup v4+ server does, it only hands out
// the id, with ErrMemberIDRequired, and the member joins again with it:
// KIP-394). Every later request carries that id. A Join names a protocol
// type ("consumer" for consumers) and the member's protocols, most preferred
// first, each with metadata the coordinator does not read (for a consumer:
// an assignor's name and its subscription, Kafka's ConsumerProtocol bytes;
// package assign encodes them). A member whose protocol type differs from
// the group's, or that lists none of the protocols every other member
// supports, is refused with ErrInconsistentGroupProtocol.
//
// What a member costs is bounded: its protocols' names and metadata
// together by Config.MaxMemberMetadataBytes (1 MiB; ErrInvalidRequest
// past it), kept as one copy that the leader's answer and the group's
// metadata record share; a group's members by Config.MaxSize (Kafka's
// group.max.size, 2147483647 by default: ErrGroupMaxSizeReached).
//
// Join blocks until the rebalance it starts (or joins) has collected its
// members, then returns the generation — a number that grows with every
// rebalance — the protocol the members voted for (each votes for its most
// preferred protocol among those all support; the most votes win) and the
// leader: the previous one if it is still a member, else the member whose id
// sorts first. The leader's answer alone carries every member's metadata for
// that protocol. The leader computes the assignment and sends it, one
// opaque byte string per member, with its Sync; every other member calls
// Sync too, which waits for the leader's, and each gets its own bytes.
//
// A member with a GroupInstanceID is static (KIP-345): when it restarts, its
// first Join (no member id, the same instance id) takes the place of the
// member that held the instance id, under a new member id, and the old id is
// fenced (its pending Join or Sync, or a Join with it, fails with
// ErrFencedInstanceID). A follower of a stable group that comes back with the
// same protocols gets its generation and assignment back without a
// rebalance; otherwise the group rebalances as for any rejoin.
//
// A group is in one of four states, Kafka's: Empty (no members; it may hold
// committed offsets), PreparingRebalance (waiting for its members to join),
// CompletingRebalance (the generation is formed; waiting for the leader's
// Sync) and Stable (a generation and its assignment are in effect). A
// rebalance starts when a member joins for the first time, rejoins with
// other protocols, or is the leader and rejoins (that is how a leader asks
// for a new assignment, when partitions were added, say); when a member
// leaves or is removed because its session timed out — the leader too, in
// CompletingRebalance: the Syncs waiting for its assignment then fail with
// ErrRebalanceInProgress. The joining completes as soon as every member has
// joined again, or when the rebalance timeout passes — the longest
// RebalanceTimeout of the members (default 5 min, Kafka's
// max.poll.interval.ms) — and then the members that did not rejoin are
// removed. Completing increments the generation and answers every pending
// Join at once; with no members left the group goes back to Empty. If the
// leader sends no Sync within the rebalance timeout after that, the members
// that sent none are removed and the others rebalance. A Sync for another
// generation is ErrIllegalGeneration.
//
// The protocol is eager, Kafka's classic one: in every rebalance every
// member gives up all its partitions and rejoins. A member learns that a
// rebalance has started from Heartbeat's ErrRebalanceInProgress; it should
// stop consuming, commit what it has processed, and call Join again with its
// member id. Records it polled but did not commit are delivered again to the
// partition's next owner: delivery is at least once.
//
// A Join without protocols (and without a protocol type) is a member that
// leaves the assignment to the coordinator, as Strata's first protocol did:
// Join joins it with the protocol "range" and its Topics as ConsumerProtocol
// metadata, computes Kafka's RangeAssignor (assign.Range) if it is the
// leader, syncs, and returns the member's partitions in
// JoinResponse.Assignment. Such members, Strata's Consumers (whose leader
// runs the same assignor) and Kafka clients speaking "range" can share a
// group. For a topic of three partitions two members get [0 1] and [2];
// with two such topics, the first member gets [0 1] of each. A topic whose
// partition count is unknown to the leader is assigned to no one.
//
// InitialRebalanceDelay (Kafka's group.initial.rebalance.delay.ms, 3 s
// there, 0 here) holds an empty group's first rebalance open until no new
// member has joined for that long, so that members starting together form
// one generation rather than a succession of them.
//
// # Heartbeats and sessions
//
// A member must call Heartbeat (or Join, Sync or Commit) at least once per
// SessionTimeout (default 45 s, Kafka's session.timeout.ms; it must lie
// within the Config's [MinSessionTimeout, MaxSessionTimeout], 6 s to 30 min
// by default); a member that does not is removed and the others rebalance.
// Kafka's consumers heartbeat every 3 s (heartbeat.interval.ms), no more
// than a third of the session. A member whose Join is pending, or whose
// Sync waits for the leader's, is alive whatever its session. Heartbeat
// answers:
//
//	nil                    the member's generation is current (Stable or CompletingRebalance)
//	ErrRebalanceInProgress commit, then rejoin with the member id
//	ErrIllegalGeneration   the group moved on without it: rejoin
//	ErrUnknownMember       it was removed: rejoin with no member id
//
// Leave removes a member at once, sparing the others a session timeout's
// wait.
//
// # Commits and their durability
//
// Commit records, for some partitions, the offset of the next record the
// group should consume. It is accepted from a member of the current
// generation — also while a rebalance is in progress, so that a member told
// to rejoin can commit first — and refused with ErrIllegalGeneration when
// it carries an older generation (its partitions may belong to someone else
// now), ErrRebalanceInProgress while the group waits for the leader's
// assignment (as Kafka), or ErrUnknownMember from a non-member. A commit with no member id and
// generation -1 is accepted only while the group has no members, for
// consumers that assign partitions themselves, as Kafka does. A refused
// commit changes nothing.
//
// An accepted commit is made durable by the OffsetStore before it takes
// effect: Commit returns, and Committed shows the offsets, only after Store
// has returned without error; a Store error fails the commit and changes
// nothing. The commits of one group are serialized, so they take effect in
// the order they were stored and a restart reads back what Committed showed.
//
// Over an OffsetsLog (Open), each committed offset is a record of
// __consumer_offsets whose key and value are Kafka's
// (EncodeCommittedOffsetRecord; DecodeCommittedOffsetRecord reads them
// back, and also older value versions), one batch per commit. All
// integers are big-endian; a string is an int16 length and that many
// bytes:
//
//	key (OffsetCommitKey, version 1)       value (OffsetCommitValue, version 3)
//	int16  version = 1                     int16  version = 3
//	string group                           int64  offset
//	string topic                           int32  leader epoch (-1: unknown)
//	int32  partition                       string metadata ("" for Commit)
//	                                       int64  commit timestamp (ms since the epoch)
//
// A record with a null value is a tombstone: the partition's commit was
// deleted. A key whose version is 2 or more is not a commit (Kafka's group
// metadata) and decodes as ErrNotOffsetRecord. Open replays the
// partition from its start, the last record of a (group, topic, partition)
// winning, with its leader epoch and metadata, so they survive a restart
// and a coordinator move.
//
// Membership is persisted too (over an OffsetsLog, or when the Store is a
// GroupMetadataStore): when a generation completes (the leader's Sync
// makes the group Stable) the Coordinator stores the group's metadata record — Kafka's GroupMetadataKey
// version 2 (EncodeGroupMetadataKey) and GroupMetadataValue version 3:
// protocol type, generation, protocol, leader and, per member, its id,
// group instance id, client id and host, timeouts, subscription and
// assignment — and a tombstone (a nil value) when the group becomes Empty.
// No Sync of the generation, the leader's nor a follower's, returns before
// it is stored (the group stays CompletingRebalance meanwhile), so no
// member holds a generation that the group's next coordinator may not
// know; if the store fails, the generation does not stand (as Kafka's
// storeGroup callback): the Syncs fail with ErrRebalanceInProgress and the
// group rebalances.
// Open restores each group's last value (as Config.InitialGroups does):
// the group comes back Stable in its generation, each member's session
// restarted, so its members heartbeat and commit on after a restart or
// failover. A static
// member's replacement in a stable group is stored too (the new member id
// takes the old one's place in the record), and so is the removal of a
// member of the generation (it left, or its session expired), which Kafka
// does not store: the record then has no leader, and the next coordinator
// restores the group rebalancing, without the member that is gone (it
// would wait a session timeout for it) and telling the others to join
// again (the gone member's partitions are assigned to no one until they
// do; their sessions count from when the record was stored, not from the
// load, and end no sooner than MinSessionTimeout after it, so that a
// member that stopped without leaving is removed even while coordinators
// move more often than its session). Committed offsets never expire
// (offsets.retention.minutes is not implemented).
//
// # The consumer group protocol (KIP-848)
//
// ConsumerHeartbeat serves Kafka 4's consumer groups, where the
// coordinator computes the assignment: a member joins with epoch 0 and
// its subscription (topic names, or a regular expression in RE2 syntax
// matched against whole topic names), then heartbeats every
// HeartbeatInterval (5 s) with its epoch and the partitions it holds, and
// leaves with epoch -1 (a static member, with an instance id, may leave
// with -2 and come back under a new member id to its partitions). A join,
// a leave, a changed subscription or a grown topic bumps the group's
// epoch; the next heartbeat computes every member's target with the
// "uniform" (default) or "range" assignor (package assign), and each
// member moves to its target over its heartbeats: it is first told to give
// up what it loses, and only once it reports it no longer holds them are
// those partitions given to others, so no partition is held twice and
// members keep consuming what they keep. A member that misses its session
// (45 s) or does not give partitions up within its rebalance timeout is
// removed. Commits of such a group's members carry their epoch
// (ErrStaleMemberEpoch otherwise). Over an OffsetsLog every change is a
// record in Kafka 4's formats (ConsumerGroupMetadata, ...MemberMetadata,
// ...TargetAssignment..., ...CurrentMemberAssignment), and Open restores
// the groups from them. DescribeConsumerGroup describes a group.
//
// # Concurrency and time
//
// All methods may be called from any number of goroutines. The Coordinator
// starts no goroutine of its own: session and rebalance deadlines are timers
// of its Clock (the system clock, or grouptest.Clock in tests), one per
// member and one per rebalancing group, and Close stops them and waits for
// any callback already running, and for Store calls in progress (group
// metadata left to store then is dropped). Pending
// Joins and Syncs fail with ErrClosed.
//
// The logic of a group is a state machine without IO (machine.go): each
// request or timer is an event applied at a time, giving effects — replies
// to Joins and Syncs, timers to arm — that the Coordinator carries out. It is tested
// with scripted and random event sequences in virtual time; STRATA_SEED=n
// replays a random run and STRATA_SOAK=1 runs many more of them.
package group
