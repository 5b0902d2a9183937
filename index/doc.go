// Package index implements a segment's two indexes in Kafka's on-disk formats:
// the offset index (.index), which maps offsets to byte positions in the
// segment's .log, and the time index (.timeindex), which maps timestamps to
// offsets. Both are sparse (an entry every IndexIntervalBytes of batches,
// which package segment decides), sorted arrays of fixed-width entries in a
// file that is memory-mapped and searched in place.
//
// # Byte layout
//
// Both files are bare arrays of entries: no header, no checksum, no trailer.
// All integers are big-endian. Offsets are stored relative to the segment's
// base offset (the number in the file name), so they fit in 4 bytes.
//
//	.index      entry i at byte 8*i, 8 bytes:
//	            0  uint32  relative offset   (offset - baseOffset)
//	            4  uint32  position          (byte position of the batch in the .log)
//
//	.timeindex  entry i at byte 12*i, 12 bytes:
//	            0  int64   timestamp         (ms since the Unix epoch)
//	            8  uint32  relative offset   (offset - baseOffset)
//
// The transaction index (.txnindex, [TxnIndex]) is Kafka's too: one 34-byte
// entry per transaction aborted in the segment (version int16 0, producerId,
// firstOffset, lastOffset, lastStableOffset, int64 each), appended to a file
// created by the first one, not preallocated nor mapped; txnindex.go has the
// details and its crash story.
//
// For example a segment with base offset 100 whose batch holding offset 130
// starts at byte 4150 of its .log may have the .index entry
// 00 00 00 1e 00 00 10 36.
//
// Offset index entries are strictly increasing in offset and non-decreasing
// in position. Time index entries are strictly increasing in timestamp and
// non-decreasing in offset: an entry is added only when a batch raises the
// segment's largest timestamp, and its offset is where that timestamp was
// reached. Relative offsets and positions are read as unsigned 32-bit numbers
// (Kafka reads them as signed int32 and never writes values above 2^31-1).
//
// # Lifecycle
//
// A new index file is preallocated to MaxIndexBytes (rounded down to a whole
// number of entries) with ftruncate, so it is sparse, as Kafka's are, and
// entries are appended into the mapping. Before an append writes into the
// mapping past what is already backed, the next 64 KiB of unused slots are
// written with zeros through the file: the file system allocates (or, with
// delayed allocation, reserves) their blocks then, so a full disk makes Append
// return an error rather than the write through the mapping raise a SIGBUS
// that kills the process; and the pages are in the page cache, so the writes
// through the mapping do not each take a page fault into a hole (on ext4,
// tens of microseconds to milliseconds apiece). The count of
// valid entries lives in memory only. When the segment rolls,
// TrimToValidSize cuts the file to its entries, and Close does the same, so a
// sealed segment's index files are exactly entries*size bytes and a reopened
// file's size gives its entry count. When a log is reopened its active
// segment's indexes are preallocated again with Resize.
//
// An existing file is taken at its size: size/8 (or size/12) entries. After a
// clean shutdown that is exact. After a crash an active segment's file is
// still preallocated, so its tail of never-written slots reads as zero
// entries, which break the ordering and make SanityCheck fail — as in Kafka.
//
// # Crash story
//
// Indexes are never trusted; the .log is the only truth. No checksum protects
// them and nothing orders their writes against the .log's. Package segment
// rebuilds a segment's indexes from its .log (Reset, then an entry every
// IndexIntervalBytes while scanning the batches) whenever SanityCheck fails
// and for every segment it recovers after an unclean shutdown. SanityCheck
// catches what a crash or a torn or stale file usually leaves: a size that is
// not a whole number of entries, entries out of order (the zeroed tail of a
// preallocated file), offsets outside the segment, and positions at or past
// the end of the .log (after the .log was truncated at a torn batch). Whatever
// bytes an index holds, opening and searching it never panics, and a lookup
// never returns an entry past its target: at worst it returns an earlier
// entry and the reader scans a little more of the .log. Entries dropped by
// TruncateTo or Reset are zeroed, so stale entries do not survive in the
// preallocated tail.
//
// Flush (msync, then fsync) makes the entries durable; Close neither flushes
// nor syncs the directory, and Delete leaves the directory fsync to the
// caller.
//
// # Concurrency
//
// One writer — Append or MaybeAppend, TruncateTo, Reset, Resize,
// TrimToValidSize, Close, Delete — serialized by the caller (the segment's
// append lock). Any number of readers — Lookup, LastEntry, Entry, Entries,
// IsFull, SanityCheck — and Flush run concurrently with the writer and with
// each other, without the writer's lock. An append fills the entry's bytes
// and then publishes the new count atomically; a reader loads the count and
// reads only the entries below it, so it never sees a half-written entry.
// Appends take no lock at all. Operations that replace the mapping or drop
// entries (Resize, TrimToValidSize, TruncateTo, Reset, Close) take a
// read-write mutex in write mode; readers hold it in read mode (one atomic
// add each way), so they never touch an unmapped or shrunk mapping, nor a slot
// that a truncation freed and an append reused. Flush holds the read lock
// through its msync and fsync, so those operations wait for a running Flush;
// concurrent Flushes run one after the other.
//
// # Searching
//
// Lookups are binary searches over the mapped entries, with Kafka's warm
// section: when the target lies in the last 8 KiB of entries (1024 offset
// entries, 682 time entries) only that tail is searched. In-sync consumers and
// followers ask for recent offsets, so their lookups touch only the two or
// three most recently written pages, which therefore stay in the page cache,
// and never fault in cold pages from the head of a large index.
//
// # Files without a descriptor
//
// The disk is reached through vfs. When a file is an OS file (vfs.Fder) it is
// mapped MAP_SHARED with golang.org/x/sys/unix. Otherwise (vfs's in-memory
// file system) the index keeps a heap copy, writes the changed bytes back with
// WriteAt on Flush, Resize, TrimToValidSize and Close (and the zeros of
// dropped entries at once), and Flush adds Sync: the same behaviour,
// including what survives a simulated crash (what was flushed).
//
// # Tests
//
// The tests run every case over both the OS file system and a wrapper that
// hides the descriptor (the heap path). STRATA_SOAK=1 makes the randomized
// model tests run far longer; a failing run prints the seed to replay with
// STRATA_SEED.
package index
