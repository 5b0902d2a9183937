// Package machine holds the replication state machines of one partition on
// one broker, without IO (the shape of etcd's raft: (state, event) →
// (state, actions)): PartitionMachine, the leader's side, and
// FollowerMachine, the follower's. Time comes in with each event: a machine
// reads no clock, starts no goroutine and touches no log. Package replica's
// Broker is the driver that carries out the actions.
//
// # PartitionMachine: the leader side
//
// One per partition on every broker. NewPartitionMachine(id, cache, cfg)
// starts passive; a Metadata event naming this broker the leader (from the
// controller's image: leader, leader epoch, partition epoch, replicas, ISR,
// min ISR, plus the local log's end, HW and start) makes it lead. The driver
// steps it with every event for the partition, in order, from one goroutine,
// with the time of the event:
//
//	Metadata              the partition changed in the metadata image
//	Appended              the leader appended; the log ends at LogEnd
//	LogStartMoved         retention moved the log start
//	FollowerFetch         a follower's Fetch (offset, last fetched epoch, epoch)
//	Tick                  time passed (every ReplicaLagTime/2 at least)
//	AlterPartitionAnswer  the controller answered a ProposeISR
//	AwaitProduce          an acks=all produce was appended; wait for the HW
//	CancelProduce         its timeout ended the wait
//
// and carries out the actions each Step returns, in order, before the next
// Step:
//
//	StartEpoch       record (epoch, start offset) in the log's epoch cache
//	SetHW            set the log's HW (consumers read below it)
//	ProposeISR       send controller.AlterPartition with the ISR and epochs;
//	                 answer with AlterPartitionAnswer (AlterResultOf maps the
//	                 controller's errors); retry transient failures as is
//	CompleteProduce  answer the waiting produce Token with Err
//	FetchAnswer      answer the follower: records from its offset with HW and
//	                 log start, or the diverging epoch, or the error
//
// Before appending an acks=all produce the driver asks CheckProduce, which
// refuses with ErrNotEnoughReplicas when the ISR is below MinInSyncReplicas.
//
// The rules are Kafka's (Partition.scala):
//
//   - A fetch at or past the leader's LEO makes the follower caught up now; a
//     fetch at or past the leader's LEO as of the follower's previous fetch
//     makes it caught up as of that previous fetch. A follower in the ISR that
//     has not caught up for ReplicaLagTime is proposed out (on a Tick).
//   - A follower outside the ISR whose LEO is at least the HW and the start
//     offset of the leader's epoch is proposed in (on its fetch), unless the
//     metadata lists it Ineligible (fenced or shutting down). The driver
//     sends a Metadata event when a replica's fencing changes too.
//   - At most one AlterPartition is in flight. While it is, the HW is computed
//     over the maximal ISR (the committed ISR plus the proposal's members,
//     KIP-497): during an expansion it waits for the new member, during a
//     shrink for the members leaving. An accepted answer commits the new ISR
//     and partition epoch; a rejected one reverts to the committed ISR; a
//     stale one keeps the change in flight until newer metadata replaces it.
//   - HW = the least LEO over the leader, the maximal ISR and the followers
//     outside it that are caught up within the lag time (they are about to
//     join). It never moves back while leading, and does not move while the
//     ISR is smaller than MinInSyncReplicas (KIP-966).
//   - A waiting acks=all produce completes when the HW reaches it: with nil if
//     the maximal ISR still has MinInSyncReplicas members, else with
//     ErrNotEnoughReplicasAfterAppend; with ErrNotLeader if leadership goes.
//   - A fetch whose last fetched epoch is unknown to the leader's epoch cache,
//     or ends before the fetch offset, is answered with the diverging epoch
//     (KIP-320) and does not count as progress.
//
// # FollowerMachine: the follower side
//
// One per partition this broker follows. BecomeFollower (leader, leader
// epoch and the local log's end, HW, start and latest epoch) decides how to
// start: fetch from the log end with the latest epoch (KIP-320), or ask the
// leader's OffsetForLeaderEpoch first (KIP-101/KIP-279, when the leader does
// not truncate on fetch), or, with no epochs in the log, truncate to the HW.
// Each answer of the leader is an event (FetchResponse,
// EpochEndResponse); the driver reports the outcome of each truncation or
// append it was asked for (Truncated, FollowerAppended) before any other
// event. Its actions are Truncate, TruncateFully, AppendRecords,
// SetFollowerHW, SetLogStart, Fetch and FetchEpochEnd.
//
// A diverging epoch (e, end) from the leader truncates the log to
// min(end, the follower's own end of e) when the follower knows e; when it
// does not, to the end of its own largest epoch below e, and it asks again
// with that epoch. The epochs the machine sends are the cache's latest
// (Kafka's latestEpoch), which may be an epoch this broker led without
// appending; such an entry is dropped by a truncation at the log end before
// older records are appended after it. The leader's HW (at most the
// follower's LEO) and log start are adopted from every fetch answer.
//
// # What the driver does with each action
//
//	StartEpoch       log: assign (Epoch, StartOffset) in the epoch cache
//	SetHW            log: set the HW; wake consumers waiting below it
//	ProposeISR       controller.AlterPartition{LeaderEpoch, PartitionEpoch,
//	                 ISR}; step AlterResultOf's answer, or retry if unknown
//	CompleteProduce  answer the produce request (nil: acknowledged)
//	FetchAnswer      read records from the fetch offset (sendfile) unless
//	                 Err or Diverging; send them with HW, LogStart, LogEnd
//	Fetch            add the partition to the next Fetch to Leader
//	FetchEpochEnd    send OffsetForLeaderEpoch to Leader
//	Truncate         log: TruncateTo(To), then step Truncated
//	TruncateFully    log: empty it, start at StartAt, then step Truncated
//	AppendRecords    log: AppendAsFollower(the records), then step
//	                 FollowerAppended (on error: BecomeFollower again)
//	SetFollowerHW    log: set the HW
//	SetLogStart      log: move the log start up
//
// On an error answer to Fetch or FetchEpochEnd the machine does nothing:
// the driver sends the same request again after a backoff, unless new
// metadata comes first.
//
// # Tests
//
// The machines are tested (in package replica's tests) with scripts after
// Kafka's PartitionTest and AbstractFetcherThread cases, and with randomized
// runs replayable from a seed (STRATA_SEED): one leader and 2–4 followers
// with crashes, restarts and AlterPartition answers delayed, rejected or
// lost; and 3–5 brokers with failovers, zombie leaders, late metadata and
// unclean elections, checked for lost acknowledged records and diverging
// logs. Package machinetest has an in-memory epoch cache with Kafka's
// semantics.
package machine
