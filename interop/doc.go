// Package interop holds tests of Strata against real Kafka clients (franz-go's kgo
// and kfake, IBM/sarama). It is a module of its own so that their dependencies never
// reach the users of Strata.
//
//	cd interop && go test ./...
//
// STRATA_GOLDEN=1 also regenerates the golden batches of segment/batch/testdata/golden
// from the clients (see golden_test.go).
package interop
