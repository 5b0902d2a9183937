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
// # Data directory
//
//	<dir>/.lock                              held while a Broker has the dir open
//	<dir>/topics.json                        topics and their configurations
//	<dir>/recovery-point-offset-checkpoint   per partition: offsets below are fsynced
//	<dir>/log-start-offset-checkpoint        per partition: the first readable offset
//	<dir>/.strata_cleanshutdown              present only after a clean Close
//	<dir>/<topic>-<partition>/               the partition's segments (package segment)
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
// # Concurrency
//
// Each partition has one writer lock around appends, rolls and retention.
// Readers never take it: the end offset, log start offset and the list of
// segments are published atomically, and a reader only looks at bytes below
// a segment's published size, so it never sees half a batch.
package log
