package kafka

import (
	"maps"
	"testing"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/log"
	"github.com/stretchr/testify/require"
)

// capsBase is a Backend with no optional capability (its methods are never
// called here); gc is what GroupCoordinator returns.
type capsBase struct {
	Backend
	gc *group.Coordinator
}

func (b capsBase) GroupCoordinator() *group.Coordinator { return b.gc }

// One type per optional interface: capsBase plus that interface alone.
type (
	capsReplica struct {
		capsBase
		ReplicaBackend
	}
	capsReplicaBatches struct {
		capsBase
		ReplicaBatchesBackend
	}
	capsCluster struct {
		capsBase
		ClusterBackend
	}
	capsListener struct {
		capsBase
		ListenerBackend
	}
	capsGroupRouter struct {
		capsBase
		GroupRouter
	}
	capsProducerIDs struct {
		capsBase
		ProducerIDBackend
	}
	capsPartitions struct {
		capsBase
		PartitionCreator
	}
	capsConfigs struct {
		capsBase
		TopicConfigAlterer
	}
	capsRecords struct {
		capsBase
		RecordsDeleter
	}
	capsEpochs struct {
		capsBase
		EpochEndOffsetter
	}
	capsEpochsReplica struct {
		capsBase
		EpochEndOffsetter
		ReplicaBackend
	}
	capsACLs struct {
		capsBase
		ACLBackend
	}
	capsSCRAM struct {
		capsBase
		SCRAMBackend
	}
	capsQuotas struct {
		capsBase
		QuotaBackend
	}
	capsTxns struct {
		capsBase
		ProducerIDBackend
		TxnBackend
	}
	capsBorrower struct{ capsBase }
	capsAll      struct {
		capsBase
		ReplicaBatchesBackend
		ClusterBackend
		ListenerBackend
		GroupRouter
		ProducerIDBackend
		PartitionCreator
		TopicConfigAlterer
		RecordsDeleter
		EpochEndOffsetter
		ACLBackend
		SCRAMBackend
		QuotaBackend
		ShareBackend
	}
	capsShares struct {
		capsBase
		ShareBackend
	}
)

func (capsBorrower) BorrowsBatches() bool { return true }
func (capsAll) BorrowsBatches() bool      { return true }

// TestCapabilitiesAdvertised pins which API keys (and versions) ApiVersions
// lists for a backend with and without each optional capability, and that
// every key it lists is one the server serves.
func TestCapabilitiesAdvertised(t *testing.T) {
	base := map[int16][2]int16{
		produceKey: {3, 13}, fetchKey: {4, 16}, listOffsetsKey: {1, 6},
		metadataKey: {0, 12}, apiVersionsKey: {0, 3}, createTopicsKey: {0, 7},
		deleteTopicsKey: {0, 6}, describeConfigsKey: {0, 4}, describeClusterKey: {0, 1},
		describeTopicPartitionsKey: {0, 0},
	}
	groups := map[int16][2]int16{
		findCoordinatorKey: {0, 6}, joinGroupKey: {0, 9}, syncGroupKey: {0, 5},
		heartbeatKey: {0, 4}, leaveGroupKey: {0, 5}, offsetCommitKey: {0, 9},
		offsetFetchKey: {0, 9}, listGroupsKey: {0, 5}, describeGroupsKey: {0, 6},
		deleteGroupsKey: {0, 2}, consumerGroupHeartbeatKey: {0, 1}, consumerGroupDescribeKey: {0, 1},
		offsetDeleteKey: {0, 0},
	}
	sasl := map[int16][2]int16{saslHandshakeKey: {0, 1}, saslAuthenticateKey: {0, 2}}
	replicaEpoch := map[int16][2]int16{offsetForLeaderEpochKey: {3, 4}}
	acls := map[int16][2]int16{describeACLsKey: {0, 3}, createACLsKey: {0, 3}, deleteACLsKey: {0, 3}}
	scram := map[int16][2]int16{describeUserSCRAMKey: {0, 0}, alterUserSCRAMKey: {0, 0}}
	quotas := map[int16][2]int16{describeClientQuotasKey: {0, 1}, alterClientQuotasKey: {0, 1}}
	shares := map[int16][2]int16{shareGroupHeartbeatKey: {1, 1}, shareGroupDescribeKey: {1, 1}, shareFetchKey: {1, 2},
		shareAcknowledgeKey: {1, 2}, describeShareGroupOffsetsKey: {0, 1}, alterShareGroupOffsetsKey: {0, 0}, deleteShareGroupOffsetsKey: {0, 0}}
	with := func(extra ...map[int16][2]int16) map[int16][2]int16 {
		out := maps.Clone(base)
		for _, e := range extra {
			maps.Copy(out, e)
		}
		return out
	}
	b := capsBase{}
	for _, tc := range []struct {
		name string
		b    Backend
		sasl bool
		want map[int16][2]int16
	}{
		{"none", b, false, base},
		{"coordinator", capsBase{gc: &group.Coordinator{}}, false, with(groups)},
		{"sasl", b, true, with(sasl)},
		{"ReplicaBackend", capsReplica{capsBase: b}, false, with(replicaEpoch)},
		{"ReplicaBatchesBackend", capsReplicaBatches{capsBase: b}, false, with(replicaEpoch)},
		{"ClusterBackend", capsCluster{capsBase: b}, false, base},
		{"ListenerBackend", capsListener{capsBase: b}, false, base},
		{"GroupRouter", capsGroupRouter{capsBase: b}, false, with(groups)},
		{"ProducerIDBackend", capsProducerIDs{capsBase: b}, false, with(map[int16][2]int16{initProducerIDKey: {0, 5}})},
		{"PartitionCreator", capsPartitions{capsBase: b}, false, with(map[int16][2]int16{createPartitionsKey: {0, 3}})},
		{"TopicConfigAlterer", capsConfigs{capsBase: b}, false, with(map[int16][2]int16{incrementalAlterConfigsKey: {0, 1}, legacyAlterConfigsKey: {0, 2}})},
		{"RecordsDeleter", capsRecords{capsBase: b}, false, with(map[int16][2]int16{deleteRecordsKey: {0, 2}})},
		{"EpochEndOffsetter", capsEpochs{capsBase: b}, false, with(map[int16][2]int16{offsetForLeaderEpochKey: {0, 4}})},
		{"EpochEndOffsetter+ReplicaBackend", capsEpochsReplica{capsBase: b}, false, with(replicaEpoch)},
		{"BatchBorrower", capsBorrower{capsBase: b}, false, base},
		{"ACLBackend", capsACLs{capsBase: b}, false, with(acls)},
		{"SCRAMBackend", capsSCRAM{capsBase: b}, false, with(scram)},
		{"QuotaBackend", capsQuotas{capsBase: b}, false, with(quotas)},
		{"TxnBackend", capsTxns{capsBase: b}, false, with(map[int16][2]int16{initProducerIDKey: {0, 5},
			addPartitionsToTxnKey: {0, 5}, addOffsetsToTxnKey: {0, 4}, endTxnKey: {0, 5}, writeTxnMarkersKey: {0, 2},
			describeProducersKey: {0, 0}, describeTransactionsKey: {0, 0}, listTransactionsKey: {0, 2}})},
		{"ShareBackend", capsShares{capsBase: b}, false, with(shares)},
		{"all", capsAll{capsBase: b}, true, with(groups, sasl, replicaEpoch, acls, scram, quotas, shares, map[int16][2]int16{
			initProducerIDKey: {0, 5}, createPartitionsKey: {0, 3},
			incrementalAlterConfigsKey: {0, 1}, legacyAlterConfigsKey: {0, 2}, deleteRecordsKey: {0, 2},
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{}
			if tc.sasl {
				cfg.SASL = &SASLConfig{Plain: func(string) (string, bool) { return "", false }}
			}
			s, err := Listen("127.0.0.1:0", tc.b, cfg)
			require.NoError(t, err)
			defer s.Close()
			got := map[int16][2]int16{}
			for _, k := range s.apiVersions(errNone).ApiKeys {
				got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
				require.NotNil(t, s.apis.lookup(k.ApiKey), "key %d advertised but not served", k.ApiKey)
			}
			require.Equal(t, tc.want, got)
			for key := range len(s.apis) {
				if _, ok := tc.want[int16(key)]; !ok {
					require.Nil(t, s.apis.lookup(int16(key)), "key %d served but not advertised", key)
				}
			}
		})
	}
}

// capsPresent names the capabilities resolved, by field.
func capsPresent(c capabilities) map[string]bool {
	return map[string]bool{
		"replica": c.replica != nil, "replicaBatches": c.replicaBatches != nil,
		"cluster": c.cluster != nil, "listener": c.listener != nil,
		"groupRouter": c.groupRouter != nil, "producerIDs": c.producerIDs != nil,
		"partitions": c.partitions != nil, "configs": c.configs != nil,
		"records": c.records != nil, "epochs": c.epochs != nil,
		"borrower": c.borrower != nil, "acls": c.acls != nil,
		"scram":  c.scram != nil,
		"quotas": c.quotas != nil,
		"shares": c.shares != nil,
	}
}

// TestCapabilitiesResolved checks resolveCapabilities field by field, and
// that a backend wrapping a *log.Broker by embedding it (as
// logmetrics.Backend does) keeps the broker's capabilities.
func TestCapabilitiesResolved(t *testing.T) {
	none := capsPresent(capabilities{})
	all := maps.Clone(none)
	for k := range all {
		all[k] = true
	}
	require.Equal(t, none, capsPresent(resolveCapabilities(capsBase{})))
	require.Equal(t, all, capsPresent(resolveCapabilities(capsAll{})))
	broker := maps.Clone(none)
	for _, k := range []string{"producerIDs", "partitions", "configs", "records", "epochs", "borrower", "acls", "scram",
		"quotas", "shares"} {
		broker[k] = true
	}
	require.Equal(t, broker, capsPresent(resolveCapabilities((*log.Broker)(nil))))
	type wrapped struct{ *log.Broker }
	require.Equal(t, broker, capsPresent(resolveCapabilities(wrapped{})))
}
