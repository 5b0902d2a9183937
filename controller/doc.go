// Package controller is the brain of a Strata cluster: a quorum of members
// that keeps the cluster metadata in a Raft log (github.com/hashicorp/raft
// with raft-boltdb/v2), elects the active controller (the Raft leader) and
// decides, as Kafka's KRaft controller does, which brokers are alive, where
// each partition's replicas live and who leads them, with which leader
// epoch and ISR.
//
// # Use
//
// Every member runs Start with the same Peers (the static voter list) and
// its own NodeID, Dir and RaftAddr:
//
//	c, err := controller.Start(controller.Config{
//		NodeID: 1, Dir: "/var/lib/strata/controller", RaftAddr: "10.0.0.1:9093",
//		Peers: []controller.Peer{{1, "10.0.0.1:9093"}, {2, "10.0.0.2:9093"}, {3, "10.0.0.3:9093"}},
//	})
//	defer c.Close()
//
// Brokers (package replica) call their local member: RegisterBroker once at
// start (the answer is the broker epoch), then Heartbeat every
// HeartbeatInterval, and AlterPartition when, as a partition leader, they
// shrink or expand its ISR, and AllocateProducerIDs for a block of producer
// ids. Admin calls are CreateTopic, CreatePartitions and DeleteTopic. Any member accepts any request: a member that is not the
// active controller forwards it there, retrying while no controller is known
// or reachable, until the context ends (then the error is a
// *NotControllerError, errors.Is ErrNotController). A change whose Raft
// entry was proposed but whose leader lost leadership before it was known
// committed fails with ErrLeadershipLost: it may or may not have happened.
//
// Everybody reads the metadata from its own member: Image returns the
// metadata as applied there (immutable, versioned by Raft index), and
// Wait(ctx, v) returns as soon as a version above v is applied — the way to
// watch for changes. Waiting never holds up the state machine.
//
// # Records
//
// The Raft log holds entries of records; each record says what happened,
// with every value it sets, and every member applies the same ones in the
// same order (Image.apply):
//
//	registerBroker   id, epoch, address       broker (re)registered, fenced, new epoch
//	fenceBroker      id, epoch                broker fenced
//	unfenceBroker    id, epoch                broker unfenced (alive)
//	topic            name, id, minISR,        topic created (its partitions follow
//	                 unclean, configs         in the same entry)
//	partition        topic id, full state     partition added: replicas, ISR, leader,
//	                                          leader epoch, partition epoch
//	partitionChange  topic id, partition,     leader and/or ISR changed; the partition
//	                 leader, ISR, epochs      epoch is +1, the leader epoch +1 iff the
//	                                          leader changed
//	removeTopic      topic id                 topic deleted
//	producerIDs      broker id, epoch,        a block of producer ids given to the
//	                 next producer id         broker: every id below next is used
//	partitionReassign topic id, partition,    replicas changed by a reassignment
//	                 replicas, adding,        (start, completion, cancel), with
//	                 removing, leader, ISR,   the leader and ISR that change with
//	                 epochs                   them; epochs as partitionChange
//
// A record that does not fit the image (a stale epoch, an unknown topic) is
// skipped, identically everywhere, and logged: the decisions never produce
// one.
//
// # Decisions
//
// The active controller's decisions are pure functions of (image, event) →
// records, in decide.go, tested with tables:
//
//   - Register: a new broker epoch (greater than any before); the broker
//     starts fenced. A broker that registers again while unfenced is fenced
//     first.
//   - Heartbeat: the broker epoch must be current (ErrStaleBrokerEpoch); a
//     fenced broker is unfenced unless it asks to stay fenced (WantFence,
//     for shutting down), and an unfenced one asking WantFence is fenced.
//     Unfencing elects leaders for leaderless partitions the broker can lead.
//   - Session expiry: an unfenced broker with no heartbeat for
//     SessionTimeout (Kafka: 9 s; brokers beat every 2 s) is fenced.
//   - Fencing a broker removes it from every ISR (never emptying one: the
//     last member stays, as the best candidate for when it returns) and
//     re-elects each partition it led: the first replica in assignment
//     order that is in the ISR and live; if none, the first live replica
//     when the topic allows unclean election (the ISR is then reset to it);
//     otherwise the partition is offline (Leader == NoLeader). Leader epoch
//     +1 when the leader changes, partition epoch +1 on every change.
//   - CreateTopic: Kafka's rack-unaware assignment over the live brokers
//     sorted by ID — leaders round-robin from a random start index, followers
//     at a shift from the leader that grows every round (AdminUtils'
//     replicaIndex rule); ReplicationFactor above the number of live brokers
//     is ErrInvalidReplicationFactor; leader = first replica, ISR = all.
//     Topic names follow Kafka's rules; IDs are random 16 bytes.
//   - CreatePartitions continues the assignment with Kafka's fixed start
//     index (the position of partition 0's first replica); DeleteTopic
//     removes the topic.
//   - AlterPartition (Kafka's): accepted only from the partition's current
//     leader with its current broker epoch, leader epoch and partition
//     epoch; the ISR must contain the leader and only live replicas; the
//     change bumps the partition epoch. A stale proposal is rejected
//     (ErrStalePartitionEpoch, ErrFencedLeaderEpoch, ErrNotPartitionLeader).
//   - AllocateProducerIDs (Kafka's, KIP-730): a registered broker at its
//     current epoch gets the next ProducerIDBlockSize (1000) ids; the
//     image's next id only grows, so no id is given twice, across
//     controller failovers and restarts (producerids.go).
//   - AlterPartitionReassignments (Kafka's, KIP-455; reassign.go): the
//     replicas become the target followed by the current ones it leaves
//     out (RemovingReplicas), the new ones AddingReplicas; the move
//     completes, in the same record as the ISR change that allows it,
//     once the ISR without the removing replicas holds the whole target:
//     replicas = target, the removing ones leave the ISR, and a removed
//     leader hands over to the first target replica in the ISR. Nil
//     target replicas cancel: back to the replicas without the adding
//     ones (refused when that needs an unclean election the topic does
//     not allow).
//   - Preferred leaders (Kafka's auto.leader.rebalance.enable), on the
//     active controller's timer every LeaderImbalanceCheckInterval (300 s):
//     for each live broker whose share of not-led preferred partitions
//     (those whose first replica it is) exceeds LeaderImbalancePercentage
//     (10%), each of those partitions whose ISR holds it gets it back as
//     leader, with a new leader epoch (rebalance.go).
//
// # Driver
//
// One event-loop goroutine runs on the active controller (loop.go). When
// the member becomes leader it waits for its state machine to apply every
// committed entry (a Raft barrier), copies the image as its working image
// and gives every live broker a full session. Then for each request it runs
// the decision on the working image, applies the records to it at once, and
// proposes the records of all requests waiting at that moment as one Raft
// entry (at most two entries in flight; while both are, requests queue and
// then share the next entry); Raft's BatchApplyCh batches entries further
// on disk. A completer goroutine answers the requests in log order once
// their entry is committed and applied. If a proposal fails, the working
// image is rebuilt from the committed one. Broker session deadlines are the
// loop's soft state, timed by Config.Clock; they are reset (to a full
// session) whenever a member takes over.
//
// The state machine (fsm.go) implements raft.BatchingFSM over a
// copy-on-write image: a snapshot is a cheap clone encoded while Apply goes
// on, and Restore replaces the image. Members bootstrap the quorum from
// Peers on their very first start only; later starts resume from Dir
// (raft.db: log and stable store; snapshots/: the last two snapshots).
//
// Each member listens on one address. The first byte of every connection
// says what it carries: 'R' for Raft's NetworkTransport, 'C' for a forwarded
// request (4-byte length + JSON, one request per connection; the server
// first writes an ack byte, so a caller that did not get it knows the
// request never arrived and may retry). Network is the seam: TCPNetwork by
// default, controllertest.Network in tests (loopback TCP with cuttable
// links). Raft's own logs go to Config.Logger (Info lowered to Debug).
// With Config.TLS every connection on the address is mutual TLS with
// certificates of the cluster's CA only (tls.go: MutualTLS, TLSNetwork);
// without it, the address must stay on a private network: anyone who
// reaches it can speak Raft and send controller requests.
//
// # Formats
//
// A Raft entry (codec.go): format byte 1, uvarint record count, then each
// record as a type byte (1..10; 11 a dynamic config, configs.go; 20 and 21
// for reassignments; 64..68 security, security_codec.go) and its
// fields in order — ints as zigzag varints (shortest form only), strings as
// uvarint length + bytes, the topic ID as 16 raw bytes, bools as one byte,
// int lists as uvarint count + varints, configs as uvarint count + (key,
// value) strings in key order. A snapshot: "STRATAMD", format byte 1,
// uvarint image version, varint last broker epoch, uvarint record count,
// the records that rebuild the image from empty, and a big-endian CRC-32C
// of everything before it. Decoding rejects anything malformed, truncated
// or trailing with ErrCorrupt (fuzzed: FuzzDecodeEntry, FuzzDecodeSnapshot).
//
// # Tests and benchmarks
//
// The cluster tests run 3- and 5-member quorums in-process on loopback TCP
// with LoopbackRaft timings; set STRATA_CONTROLLER_LOG=1 to see the
// members' logs. Benchmarks:
//
//	go test -run '^$' -bench MetadataWrites -benchtime 3s ./controller/
//	go test -run '^$' -bench Failover -benchtime 20x ./controller/
package controller
