// Package interop holds tests of Strata against real Kafka clients: franz-go's
// kgo and kadm, IBM/sarama and segmentio/kafka-go against Strata's Kafka
// server (kafka/kafkatest), and Strata's own Kafka client (kafka.Dial) against
// franz-go's kfake. It is a module of its own so that their dependencies never
// reach the users of Strata.
//
//	cd interop && go test ./...
//
// One file per client: kgo_test.go (and kgo_errors_test.go,
// kgo_group_test.go), kadm_test.go, sarama_test.go (sarama_group_test.go,
// sarama_admin_test.go), kafkago_test.go, strata_kfake_test.go and
// strata_group_test.go (Strata's Producer and Consumer over kafka.Dial);
// clients_test.go and sasl_test.go hold what several clients do against one
// server (a broker on disk served with sendfile, old protocol versions,
// several topics per request, auto-created topics, SASL).
//
// Every record a client produces is read back through Strata's own API
// (Partition.Read) with its key, value, headers and timestamp, and keyed
// records are checked against the partitioner the client uses (Kafka's
// murmur2, as log.KeyPartition computes it, where the client is
// Java-compatible; sarama's default and kafka-go's Hash are FNV-1a).
// readme_test.go holds the README's Kafka snippets as tested code.
//
// STRATA_GOLDEN=1 also regenerates the golden batches of segment/batch/testdata/golden
// from the clients (see golden_test.go). SARAMA_LOG=1 prints sarama's log.
package interop
