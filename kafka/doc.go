// Package kafka speaks the Kafka wire protocol. A Server serves a Strata
// broker (a Backend: a *log.Broker, or a cluster member through the adapter
// replica hands to Listen) to any Kafka client — franz-go, sarama, kafka-go, the Java client:
//
//	b, _ := log.Open(dir, log.Config{})
//	srv, _ := kafka.Listen("127.0.0.1:9092", b, kafka.Config{})
//	defer srv.Close()
//
// For tests, kafka/kafkatest starts an in-memory broker with a listener in
// one call.
//
// The other way round, Dial returns a Client, a log.Client over the Kafka
// protocol, so that Strata's Producer and Consumer run against any
// Kafka-protocol cluster (Strata, Apache Kafka, Redpanda):
//
//	c, _ := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{"kafka:9092"}})
//	p, _ := log.NewProducer(c, log.ProducerConfig{})
//
// It keeps three pipelined connections per broker — fetches, produces,
// and the rest (metadata, offsets, group requests) — so that a long-polling
// fetch holds back nothing else; it routes each request to the partition's
// leader from cached Metadata and retries when a leader moves.
// Group requests go to the group's coordinator, found with
// FindCoordinator, cached, and looked up again when it moves; JoinGroup
// and SyncGroup, which wait for a rebalance, each go on a connection of
// their own so that nothing waits behind them. A Consumer with a Group
// works over it as over a Broker.
//
// # What is served
//
// Every request and response is encoded and decoded by franz-go's kmsg;
// the server only frames them. ApiVersions lists exactly what works:
//
//	ApiVersions      v0–v3 (an unknown version is answered in v0 with
//	                 UNSUPPORTED_VERSION and the versions served, KIP-511)
//	Metadata         v0–v12 (this broker is the leader and only replica
//	                 of every partition; topic ids from v10)
//	Produce          v3–v13 (acks 0, 1 and -1; one record batch per
//	                 partition, as clients send it)
//	Fetch            v4–v16 (long polls park in the broker's purgatory;
//	                 fetch sessions are declined with session id 0)
//	ListOffsets      v1–v6 (earliest, latest, by timestamp)
//	CreateTopics     v0–v7, DeleteTopics v0–v6
//	DescribeConfigs  v0–v4 (topic configs, each DYNAMIC_TOPIC_CONFIG if
//	                 set on the topic, else DEFAULT_CONFIG; read-only
//	                 unless the backend is a TopicConfigAlterer)
//	CreatePartitions v0–v3, IncrementalAlterConfigs v0–v1 (topic configs:
//	                 SET, DELETE, APPEND and SUBTRACT on cleanup.policy),
//	                 DeleteRecords v0–v2, OffsetForLeaderEpoch v0–v4:
//	                 each when the backend implements its interface
//	                 (admin_backend.go), as *log.Broker does
//	DescribeCluster  v0–v1
//	FindCoordinator  v0–v6 (this node, for groups — on a GroupRouter, the
//	                 group's node, the others' group APIs answering
//	                 NOT_COORDINATOR; batched keys from v4, KIP-699;
//	                 transactions and share groups are not served)
//	JoinGroup        v0–v9 (MEMBER_ID_REQUIRED from v4, KIP-394; static
//	                 members from v5, KIP-345: a replaced instance's
//	                 Heartbeat, SyncGroup and OffsetCommit are fenced)
//	SyncGroup        v0–v5, Heartbeat v0–v4
//	LeaveGroup       v0–v5 (batched members, by member or instance id,
//	                 from v3)
//	OffsetCommit     v0–v9 (member "" and generation -1: a simple
//	                 consumer's, while the group has no members; v10
//	                 names topics by id and is not served; metadata, and
//	                 the leader epoch from v6, kept)
//	OffsetFetch      v0–v9 (several groups from v8)
//	ListGroups       v0–v5 (states filter v4, types filter v5: every
//	                 group is "classic"), DescribeGroups v0–v6,
//	                 DeleteGroups v0–v2
//	SaslHandshake    v0–v1 and SaslAuthenticate v0–v2, when Config.SASL
//	                 is set (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)
//
// Topic ids (Metadata v10+, Fetch and Produce v13+) are derived from topic
// names, so every server over the same topics gives the same ids.
//
// # Connections
//
// Each connection is served by long-lived goroutines of its own. The one
// reading passes the reading on to another once it has read a request for
// a handler, and runs the handler itself. The responses are written in the
// order of the requests (Kafka's rule): the goroutine whose response is the
// next due writes it, and those after it already done, as soon as it is
// done. At most Config.MaxInFlight
// requests of a connection are unanswered at once: then the reader stops
// reading, and TCP pushes back on the client. Produces to the same
// partition on one connection append in the order they were sent; others
// proceed concurrently. A produce with acks=0 gets no response; if it
// fails, the connection is closed, as Kafka does.
//
// Fetch responses are kmsg-encoded with each partition's record bytes cut
// out, and written as a list of buffers (writev) with the records between
// them: on a TCP connection a partition's records (16 KiB or more; fewer
// are cheaper copied into one writev) go from the segment files with
// sendfile, through the backend's handle (log.Batches), which keeps the
// segments open, even if retention or a topic deletion removes them
// meanwhile, until the response is written. Under TLS the worker copies
// them from the files in chunks. A response carries at most
// Config.FetchMaxBytes of records, a partition listed twice is fetched
// once, and a connection's responses hold at most 4 MiB of copied records.
//
// A connection's requests read and not yet answered hold at most
// Config.MaxRequestBytes; a request once begun must arrive whole within
// Config.RequestTimeout, a new connection authenticate within
// Config.AuthenticationTimeout; one address holds at most
// Config.MaxConnectionsPerIP connections. A failed authentication is
// answered, and the connection closed, Config.FailedAuthenticationDelay
// later.
//
// # Bad input
//
// A frame with a negative size, a size above Config.MaxRequestBytes or too
// small for a header, an unknown API key, a version not served, a header or
// body that does not decode: each closes that connection (after the
// responses already due) with a log line. Bad records (a wrong CRC, a
// truncated or malformed batch, a batch too large) get Kafka's error code
// for their partition and change nothing. Nothing a peer sends brings the
// server down.
//
// # Errors
//
// Strata's errors are log's sentinels (every layer's errors match them with
// errors.Is). They map to Kafka's error codes through one table, shared by
// the server, the Client and a cluster member's routing (ErrorCode), and
// back (CodeError, an *Error that unwraps to the Strata error: a client of
// any Kafka cluster gets log.ErrOffsetOutOfRange for OFFSET_OUT_OF_RANGE).
package kafka
