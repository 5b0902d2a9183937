package metrics

import "time"

// Hooks receives the figures that are pushed as they happen. Every method
// must be safe for concurrent use, cheap, and must not block: they are called
// on the append, fetch and request paths.
//
// The library takes a Hooks in its configs; nil there means none, at the
// cost of one predictable branch where a figure would be pushed (Nop is for
// code of one's own that wants a Hooks that is never nil). Who calls what:
//
//	kafka.Config.Metrics metrics.Hooks
//	  Request(key, d, failed)                 once per request answered, by the
//	                                          connection's writer once the response
//	                                          is written; d from the request's frame
//	                                          fully read (acks=0 produces: d to the
//	                                          end of the append); failed if the
//	                                          response carries an error code
//	  RequestBytes(key, in, out)              with it: the request frame's and the
//	                                          response frame's bytes (size prefix
//	                                          included; 0 out for acks=0)
//	  Produced(topic, numRecords, len(batch)) per partition appended without error
//	  Fetched(topic, n, replicaID >= 0)       per partition, n record bytes sent
//	log.Config.Metrics, log.StoreConfig.Metrics metrics.Hooks
//	  Fsync(d)                                once per flush of a partition that
//	                                          fsyncs it (Kafka's Log.flush: the
//	                                          .log, the indexes of sealed segments,
//	                                          producer snapshots, the directory)
//	  Purgatory("Fetch", size)                after a fetch parks in the purgatory
//	                                          and after it leaves it
//	  Cleaned(topic, p, read, written, d)     at the end of a cleaner pass over a
//	                                          partition
//	replica.Config.Metrics metrics.Hooks      (also given to its store and server)
//	  ISRChanged(topic, p, len(isr), shrink)  once an ISR change this member
//	                                          proposed as leader is committed
//	                                          (Kafka's IsrShrinks/IsrExpands; the
//	                                          controller's own changes, such as
//	                                          fencing a stopped member, are not)
//	  Purgatory("Fetch"|"Produce", size)      after a fetch parks or leaves, and
//	                                          an acks=all produce starts or stops
//	                                          waiting for the ISR
//
// A server given a Hooks counts the traffic itself: build it on the plain
// broker, not on logmetrics.NewBackend, so that nothing is counted twice.
type Hooks interface {
	// Request reports one request answered: api is its Kafka API key
	// (0 Produce, 1 Fetch, 3 Metadata, ...), d the time from having read
	// it to having written its response (Kafka's RequestMetrics
	// TotalTimeMs), failed whether the response carries an error code.
	Request(api int16, d time.Duration, failed bool)
	// RequestBytes reports the size of one request and of its response,
	// frames whole (Kafka's RequestMetrics RequestBytes; the response side
	// is the bytes a listener sends).
	RequestBytes(api int16, request, response int64)
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
func (Nop) RequestBytes(int16, int64, int64)                 {}
func (Nop) Produced(string, int64, int64)                    {}
func (Nop) Fetched(string, int64, bool)                      {}
func (Nop) Fsync(time.Duration)                              {}
func (Nop) Purgatory(string, int)                            {}
func (Nop) Cleaned(string, int, int64, int64, time.Duration) {}
func (Nop) ISRChanged(string, int, int, bool)                {}
