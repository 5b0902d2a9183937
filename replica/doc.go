// Package replica replicates Strata's partitions between brokers as Kafka
// does: a leader per partition that followers fetch from, an in-sync replica
// set (ISR) kept with the controller, a high watermark (HW) below which
// records are committed, and acks=all produces that wait for it.
//
// # Using it
//
// Start(Config{ID, Dir, Addr, RaftAddr, Peers}) starts a cluster member, a
// *Broker: the same Peers on every member, the initial controller voters.
// A Broker is what an application calls:
//
//   - topics: CreateTopic (returns once every partition has a leader and
//     every live member has applied it), DeleteTopic, CreatePartitions,
//     Topics, TopicConfig, Partitions;
//   - records: it is a log.Client, so log.NewProducer and log.NewConsumer
//     work on any member; each call goes to the partition's current leader
//     (or the group's coordinator) and follows it across failovers;
//   - the cluster as this member knows it: ID, Addr (the Kafka-protocol
//     data plane), ListenerAddr, Controller, Leader, Partition (this
//     member's replica), Image and WaitImage (the metadata);
//   - Ready, closed once the member is registered, caught up and unfenced;
//     Close, a controlled shutdown that moves leadership off first.
//
// Kafka clients connect to Addr, or to the client Listeners, each with its
// own TLS and SASL. Errors are log's sentinels (log.ErrNotLeader,
// log.ErrUnknownTopic, ...) and this package's, all testable with errors.Is.
//
// # How a member works
//
// Start opens a log.Store in Dir/data, starts a controller voter
// (Dir/controller, Raft on RaftAddr) and a kafka.Server on Addr, registers
// with the controller and heartbeats. It returns once the member is ready
// (ready.go): registered, caught up with the metadata as of its
// registration and unfenced, as a KRaft broker starts; its listeners accept
// connections only from then on. The first members of a forming cluster,
// with no quorum of voters reachable, return at once and become ready when
// the quorum forms.
//
// The replication rules are state machines without IO (internal/machine,
// the shape of etcd's raft: (state, event) → (state, actions)); the member
// drives them and does the IO. One goroutine follows the metadata
// (controller Wait) and applies each image: it creates or opens the
// replicas this member holds, steps each partition's leader machine with
// the partition's metadata and, where another broker leads, its follower
// machine; it removes the replicas of deleted topics. Goroutines do not
// grow with partitions: one metadata follower, one heartbeat, one ticker,
// one AlterPartition sender (one proposal in flight per partition) and one
// fetcher per source broker, which sends one Fetch for all the partitions
// it follows there.
//
// The leader answers a follower's fetch with the records from the fetch
// offset below its log end, the HW, log start and any diverging epoch, and
// holds a fetch that finds nothing new until an append or FetchMaxWait: as
// in Kafka, a follower learns a HW move with its next answer. A produce is
// appended under the partition's lock and with acks=all waits until the HW
// covers it, or the produce timeout.
//
// Replication and forwarded client calls between members go over the Kafka
// protocol on the data plane: Fetch v12 with the replica id,
// CurrentLeaderEpoch and LastFetchedEpoch, OffsetForLeaderEpoch v4,
// Produce, Fetch and ListOffsets, on pooled connections to the leader's
// registered address. The leader's kafka.Server hands follower fetches to
// the member, which answers with handles on its segment files that the
// server sends with sendfile, as to consumers; a fetcher reads each answer
// into a buffer of its own and appends the batches from it
// (AppendAsFollower) without another copy. Config.Local (a
// replicatest.LocalNetwork) is the in-process twin, whose links tests cut.
// Config.Network (a testnet node in tests) carries Raft and, without Local,
// the data plane.
//
// Partitions move with AlterPartitionReassignments (reassign.go; the
// steps are the controller's, in its log): a member newly listed as a
// replica opens an empty one and follows, the leader adds it to the ISR
// once caught up, which completes the move, and a member no longer listed
// deletes its replica. Replication throttles (throttle.go, Kafka's
// dynamic configs in the metadata: throttle_config.go) cap the bytes a
// member sends to, and fetches for, replicas out of the ISR. The
// member's Kafka server appends a produce only where the member leads
// (kafka_produce.go): it never sends one on to another member.
//
// A consumer group's coordinator is the leader of its __consumer_offsets
// partition, GroupPartition(group, N), as in Kafka (groups.go). Close is a
// controlled shutdown: a WantFence heartbeat moves leadership off the
// member, which ends when the controller acknowledges it; the active
// controller then hands Raft leadership to another voter before it stops.
//
// # Tests
//
// The member is tested with three-member clusters in process (Raft over
// testnet, replication over both transports): replication batch for batch,
// controlled shutdown, restart with data and with an empty data dir,
// MinInSyncReplicas, a cut-off leader acknowledging nothing, a lagging
// follower leaving and rejoining the ISR, groups across members, and a loop
// of 50 leader failures (STRATA_SOAK=1: 500) with no acknowledged record
// lost. The state machines (internal/machine) are tested with scripts after
// Kafka's PartitionTest and AbstractFetcherThread cases and with randomized
// runs replayable from a seed (STRATA_SEED). Package replicatest has the
// in-process network (LocalNetwork) whose links tests cut.
package replica
