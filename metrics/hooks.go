package metrics

import "time"

// Hooks receives the figures that are pushed as they happen. Every method
// must be safe for concurrent use, cheap, and must not block: they are called
// on the append, fetch and request paths. A nil Hooks is not allowed; use Nop.
//
// How the library is to call it (the wiring is for the owners of log, kafka
// and replica; until it is done, logmetrics.Backend feeds Request for
// Produce and Fetch, Produced and Fetched from outside package kafka):
//
//	kafka.Config.Metrics metrics.Hooks        // nil → Nop{}
//	  Request(key, d, errCode != 0)           once per request answered, by the
//	                                          connection's writer after the response
//	                                          is written; d from the request's frame
//	                                          fully read (acks=0 produces: after the
//	                                          append, d to then)
//	  Produced(topic, numRecords, len(batch)) per partition appended without error
//	  Fetched(topic, n, replicaID > 0)        per partition, n record bytes written
//	log.Config.Metrics metrics.Hooks          // nil → Nop{}
//	  Fsync(d)                                around every File.Sync of a segment,
//	                                          index, checkpoint or snapshot file
//	  Purgatory("Fetch"|"Produce", size)      after a delayed operation is added to
//	                                          or leaves a purgatory
//	  Cleaned(topic, p, read, written, d)     at the end of a cleaner pass over a
//	                                          partition
//	replica.Config.Metrics metrics.Hooks
//	  ISRChanged(topic, p, len(isr), shrink)  once the ISR change is committed
//
// Once kafka calls Request, Produced and Fetched itself, a server is built
// with logmetrics.NewBackendTraffic (or the plain broker) instead of
// logmetrics.NewBackend, so that nothing is counted twice.
type Hooks interface {
	// Request reports one request answered: api is its Kafka API key
	// (0 Produce, 1 Fetch, 3 Metadata, ...), d the time from having read
	// it to having written its response (Kafka's RequestMetrics
	// TotalTimeMs), failed whether the response carries an error code.
	Request(api int16, d time.Duration, failed bool)
	// Produced reports one record batch appended to a topic: its records
	// and bytes (Kafka's BrokerTopicMetrics MessagesInPerSec and
	// BytesInPerSec).
	Produced(topic string, records, bytes int64)
	// Fetched reports record bytes sent for a topic (BytesOutPerSec);
	// replica says a follower fetched them (ReplicationBytesOutPerSec).
	Fetched(topic string, bytes int64, replica bool)
	// Fsync reports one fsync of a segment, index or checkpoint file and
	// how long it took (Kafka's LogFlushStats LogFlushRateAndTimeMs).
	Fsync(d time.Duration)
	// Purgatory reports how many delayed operations wait in a purgatory
	// after a change: name is "Produce" or "Fetch" (Kafka's
	// DelayedOperationPurgatory PurgatorySize).
	Purgatory(name string, size int)
	// Cleaned reports one pass of the log cleaner over a partition: the
	// bytes it read and wrote and how long it took (Kafka's LogCleaner
	// metrics).
	Cleaned(topic string, partition int, bytesRead, bytesWritten int64, d time.Duration)
	// ISRChanged reports a partition's ISR after it shrank (shrink) or
	// grew (Kafka's ReplicaManager IsrShrinksPerSec and IsrExpandsPerSec).
	ISRChanged(topic string, partition int, isrSize int, shrink bool)
}

// Nop is the Hooks that does nothing: the default.
type Nop struct{}

var _ Hooks = Nop{}

func (Nop) Request(int16, time.Duration, bool)               {}
func (Nop) Produced(string, int64, int64)                    {}
func (Nop) Fetched(string, int64, bool)                      {}
func (Nop) Fsync(time.Duration)                              {}
func (Nop) Purgatory(string, int)                            {}
func (Nop) Cleaned(string, int, int64, int64, time.Duration) {}
func (Nop) ISRChanged(string, int, int, bool)                {}
