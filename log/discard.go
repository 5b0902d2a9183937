package log

// Discard closes a broker whose data dir is about to be thrown away, as a
// test fixture's private in-memory FS is: like Close, it stops the
// background work, ends appends and reads in flight, flushes and closes
// every partition and releases the data dir, but it skips the files that
// only a later Open would read — the checkpoints (recovery points, log
// start offsets, high watermarks) and the clean-shutdown marker. Should the
// dir be opened again all the same, that Open recovers every partition, as
// after a crash once every record was flushed. Further calls on the broker
// get ErrClosed; Close after Discard (or Discard after Close) does nothing.
func (b *Broker) Discard() error { return b.shutdown(b.store.Discard) }

// OpenEphemeral opens a broker on a data dir that no Open will see again
// (a unit-test fixture's fresh in-memory FS or temporary directory): a
// broker as Open's in every way while it runs, which writes none of the
// files that only a later Open would read. Its topics are not recorded
// (no topics.json), new partitions write no leader-epoch checkpoint,
// directories are not fsynced (what they make durable is for an Open after
// a crash), and its Close is Discard (no checkpoints, no
// clean-shutdown marker). Records are appended, flushed and read as
// Open's; the broker only gives up being reopened: an Open of the dir
// afterwards finds no topic and removes the partition directories.
func OpenEphemeral(dir string, cfg Config) (*Broker, error) { return open(dir, cfg, true) }
