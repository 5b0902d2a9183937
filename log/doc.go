// Package log is Strata's standalone broker: topics of partitions, each an
// append-only log of segment files in Kafka's formats, with producers,
// consumers and consumer groups on top.
//
// # Use
//
//	b, err := log.Open("/var/lib/app/strata", log.Config{})
//	t, err := b.CreateTopic("orders", log.TopicConfig{Partitions: 3})
//	p, err := t.Partition(0)
//	off, err := p.Append(log.Record{Key: []byte("id-1"), Value: []byte("created")})
//	recs, err := p.Read(off, 1<<20)
//	err = b.Close()
//
// # Producers and consumers
//
// A Producer ([NewProducer]) batches records per partition (Linger,
// BatchBytes) and sends each batch as one RecordBatch through a [Client] —
// a *Broker here, a cluster member later. Keyed records go to the partition
// Kafka's Java client would pick (murmur2); records without a key stick to
// one partition until its batch is sent.
//
// A Consumer ([NewConsumer]) polls its partitions with long polls: a
// [Broker.Fetch] with too little data parks in the timing wheel's purgatory
// until an append to one of its partitions completes it, or MaxWait passes.
// With a Group, the broker's coordinator (package group) shares the topics'
// partitions among the members (Kafka's range assignment, eager
// rebalances, generations) and keeps committed offsets as Kafka does: as
// records of the internal topic __consumer_offsets, fsynced, replayed at
// Open. Delivery is at least once: records polled but not committed are
// delivered again to the partition's next owner.
//
// The package log/logtest starts a Broker as a unit-test fixture.
//
// # Partitions and replication
//
// Under the Broker, a [Store] owns the partition directories of the data
// dir: [Store.CreatePartition], [Store.OpenPartition],
// [Store.RemovePartition], the flush and retention loop and the
// checkpoints. It knows nothing of topics; a Broker decides from
// topics.json which partitions exist, a cluster member from its metadata.
//
// A [Partition] has what a replica needs: a high watermark of its own
// ([Partition.SetHighWatermark]; on a standalone broker it is the end
// offset), a leader epoch stamped on leader appends
// ([Partition.SetLeaderEpoch]), a leader-epoch cache with Kafka's
// OffsetsForLeaderEpoch answer ([Partition.EndOffsetForEpoch]), appends of
// batches that carry their offsets ([Partition.AppendAsFollower]) and
// crash-safe truncations ([Partition.TruncateTo],
// [Partition.TruncateFullyAndStartAt]).
//
// # Data directory
//
//	<dir>/.lock                              held while a Broker has the dir open
//	<dir>/topics.json                        topics and their configurations
//	<dir>/recovery-point-offset-checkpoint   per partition: offsets below are fsynced
//	<dir>/log-start-offset-checkpoint        per partition: the first readable offset
//	<dir>/replication-offset-checkpoint      per partition: the high watermark
//	<dir>/.strata_cleanshutdown              present only after a clean Close
//	<dir>/<topic>-<partition>/               the partition's segments (package segment)
//	<dir>/<topic>-<partition>/leader-epoch-checkpoint  (epoch, start offset) pairs
//	<dir>/<topic>-<partition>.<tag>.deleted/ a removal a crash interrupted; finished at open
//	                                         (the topic cut short to fit 255 bytes; see DeleteTopic)
//	<dir>/__consumer_offsets-0/              committed offsets of consumer groups (compacted)
//	<dir>/cleaner-offset-checkpoint          per compacted partition: where its dirty part starts
//
// Checkpoints use Kafka's text format and are replaced atomically (temp file,
// fsync, rename, directory fsync).
//
// # Durability
//
// Append writes to the page cache. With TopicConfig.FlushMessages = 1 it
// returns only after an fsync covering the records; concurrent appenders
// share fsyncs (group commit), so many writers cost far fewer than one fsync
// each. With FlushMessages = N, the append that leaves N or more records
// unflushed fsyncs. FlushInterval fsyncs in the background at least that
// often. Segment files are fsynced when sealed, and their directory when they
// are created or removed.
//
// After a crash, Open scans every segment from the one holding the recovery
// point, checks each batch's CRC and offsets, cuts the log at the first torn
// or corrupt batch (dropping any later segment) and rebuilds the indexes:
// nothing fsynced is lost and nothing corrupt is returned. A read that meets
// corrupt bytes returns an error matching ErrCorrupt, never records.
//
// # Compaction
//
// Partitions of topics with CleanupCompact or CleanupCompactDelete are
// cleaned by the broker's log cleaner, a goroutine of its own that runs every
// RetentionCheckInterval and that Close joins. See cleaner.go for the rules
// (Kafka's), cleaner_run.go for a pass and the swap of cleaned segments into
// a live partition, cleaner_load.go for what Open does with what a crash
// left of a pass.
//
// # Concurrency
//
// Each partition has one writer lock around appends, rolls and retention.
// Readers never take it: the end offset, log start offset and the list of
// segments are published atomically, and a reader only looks at bytes below
// a segment's published size, so it never sees half a batch.
package log
