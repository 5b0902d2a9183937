package kafka

import "github.com/strata-log/strata/clock"

// capabilities are the optional interfaces a Server's backend implements,
// resolved once by Listen: a nil field is a capability the backend does
// not have. Handlers use these fields, never a type assertion on the
// backend, and an API is advertised in ApiVersions exactly when the
// capability it needs is here (optionalAPIs). Adding an API is a field
// here, a line in resolveCapabilities and optionalAPIs, and its handler
// file. A backend that wraps another by embedding it (logmetrics.Backend
// embeds *log.Broker) has the capabilities of what it embeds: method
// promotion makes the wrapper implement the same interfaces.
type capabilities struct {
	replica        ReplicaBackend        // follower Fetch, OffsetForLeaderEpoch v3+
	replicaBatches ReplicaBatchesBackend // follower Fetch answered with handles
	cluster        ClusterBackend        // brokers, leaders and ISRs of a cluster
	listener       ListenerBackend       // one of several listeners
	groupRouter    GroupRouter           // groups coordinated across nodes
	producerIDs    ProducerIDBackend     // InitProducerId
	partitions     PartitionCreator      // CreatePartitions
	configs        TopicConfigAlterer    // IncrementalAlterConfigs, config sources
	records        RecordsDeleter        // DeleteRecords
	epochs         EpochEndOffsetter     // OffsetForLeaderEpoch of a standalone node
	borrower       BatchBorrower         // produce frames may be recycled
	acls           ACLBackend            // DescribeAcls, CreateAcls, DeleteAcls; the ACLs enforced
	unregister     BrokerUnregisterer    // UnregisterBroker (unregister.go)
	quorum         QuorumBackend         // DescribeQuorum, AddRaftVoter, RemoveRaftVoter (quorum.go)
	scram          SCRAMBackend          // Describe/AlterUserScramCredentials; runtime SCRAM users
	elector        LeaderElector         // ElectLeaders (elect.go)
	reassigner     Reassigner            // Alter/ListPartitionReassignments (reassign.go)
	quotas         *quotaManager         // DescribeClientQuotas, AlterClientQuotas; the quotas enforced
	shares         *shareServer          // share groups (share.go)
	txnOffsets     TxnOffsetCommitter    // TxnOffsetCommit (offsets.go)
	offsetsTopic   OffsetsTopicCreator   // FindCoordinator creates __consumer_offsets (standalone)
	txns           TxnBackend            // the transaction APIs (txn.go)
	txnRouter      TxnRouter             // with txns: transactional ids coordinated across nodes (txn_router.go)
	txnEnds        *txnEndLocks          // with txns: EndTxn waits for the produces it verified (txn_produce.go)
	logDirs        LogDirDescriber       // DescribeLogDirs (logdirs.go)
	brokerConfigs  BrokerConfigAlterer   // dynamic broker configs: AlterConfigs, DescribeConfigs (alterconfigs.go)
	throttles      ThrottleConfigBackend // replication throttles as dynamic configs (alterconfigs_throttle.go)
	txnConfigs     TxnConfiger           // the transaction coordinator's settings in DescribeConfigs (txn_configs.go)
}

// resolveCapabilities finds b's optional interfaces.
func resolveCapabilities(b Backend) capabilities {
	var c capabilities
	c.replica, _ = b.(ReplicaBackend)
	c.replicaBatches, _ = b.(ReplicaBatchesBackend)
	c.cluster, _ = b.(ClusterBackend)
	c.listener, _ = b.(ListenerBackend)
	c.groupRouter, _ = b.(GroupRouter)
	c.producerIDs, _ = b.(ProducerIDBackend)
	c.partitions, _ = b.(PartitionCreator)
	c.configs, _ = b.(TopicConfigAlterer)
	c.records, _ = b.(RecordsDeleter)
	c.epochs, _ = b.(EpochEndOffsetter)
	c.borrower, _ = b.(BatchBorrower)
	c.acls, _ = b.(ACLBackend)
	c.unregister, _ = b.(BrokerUnregisterer)
	c.quorum, _ = b.(QuorumBackend)
	c.scram, _ = b.(SCRAMBackend)
	c.elector, _ = b.(LeaderElector)
	c.txnOffsets, _ = b.(TxnOffsetCommitter)
	c.offsetsTopic, _ = b.(OffsetsTopicCreator)
	c.reassigner, _ = b.(Reassigner)
	c.txns, _ = b.(TxnBackend)
	if c.txns != nil {
		c.txnRouter, _ = b.(TxnRouter)
	}
	if c.txns != nil {
		c.txnEnds = new(txnEndLocks)
	}
	if sb, ok := b.(ShareBackend); ok {
		c.shares = newShareServer(sb)
	}
	c.logDirs, _ = b.(LogDirDescriber)
	c.brokerConfigs, _ = b.(BrokerConfigAlterer)
	c.throttles, _ = b.(ThrottleConfigBackend)
	c.txnConfigs, _ = b.(TxnConfiger)
	if qb, ok := b.(QuotaBackend); ok {
		c.quotas = newQuotaManager(qb, clock.System())
	}
	return c
}

// optionalAPIs are the APIs served (and advertised) only when the server
// has what they need, in the order they are added to its table (a later
// entry's key replaces an earlier one's: none do today).
var optionalAPIs = []struct {
	served func(*Server) bool
	apis   []api
}{
	{func(s *Server) bool { return s.caps.replica != nil }, replicaAPIs},
	{func(s *Server) bool { return s.caps.partitions != nil }, createPartitionsAPIs},
	{func(s *Server) bool { return s.caps.configs != nil || s.caps.throttles != nil }, alterConfigsAPIs},
	{func(s *Server) bool { return s.caps.records != nil }, deleteRecordsAPIs},
	// A ReplicaBackend answers OffsetForLeaderEpoch whole (replicaAPIs).
	{func(s *Server) bool { return s.caps.epochs != nil && s.caps.replica == nil }, epochAPIs},
	{(*Server).groupsServed, groupAPIs},
	{(*Server).groupsServed, consumerGroupAPIs}, // KIP-848 (groups848.go)
	{(*Server).groupsServed, offsetDeleteAPIs},  // KIP-496 (offsetdelete.go)
	// A cluster member allocates producer ids through its controller
	// (blocks recorded in the metadata), unique cluster-wide.
	{func(s *Server) bool { return s.caps.producerIDs != nil }, idempotenceAPIs},
	{func(s *Server) bool { return s.cfg.SASL != nil }, saslAPIs},
	{func(s *Server) bool { return s.caps.acls != nil }, aclAPIs},
	{func(s *Server) bool { return s.caps.txnOffsets != nil && s.groupsServed() }, txnOffsetAPIs},
	{func(s *Server) bool { return s.caps.unregister != nil }, unregisterBrokerAPIs},
	{func(s *Server) bool { return s.caps.quorum != nil }, quorumAPIs},
	{func(s *Server) bool { return s.caps.scram != nil }, scramAdminAPIs},
	{func(s *Server) bool { return s.caps.elector != nil }, electLeadersAPIs},
	{func(s *Server) bool { return s.caps.reassigner != nil }, reassignAPIs},
	{func(s *Server) bool { return s.caps.quotas != nil }, quotaAPIs},
	// The coordinator hands out producer ids: both are needed.
	{func(s *Server) bool { return s.caps.txns != nil && s.caps.producerIDs != nil }, txnAPIs},
	{(*Server).shareGroupsServed, shareAPIs}, // KIP-932 (share.go)
	// Metadata's topic half, paged: every server.
	{func(*Server) bool { return true }, describeTopicPartitionsAPIs},
	{func(s *Server) bool { return s.caps.logDirs != nil }, describeLogDirsAPIs},
	{func(s *Server) bool { return s.caps.txns != nil }, txnAdminAPIs},
	{func(s *Server) bool { return s.caps.configs != nil || s.caps.throttles != nil }, legacyAlterConfigsAPIs},
}
