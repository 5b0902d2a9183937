// Package segment is one segment of a partition's log: a .log file of Kafka
// RecordBatch v2 batches (see package [github.com/strata-log/strata/segment/batch])
// and its two indexes (package [github.com/strata-log/strata/index]).
//
// # Files
//
// A segment is named by the offset of its first record, zero-padded to 20
// digits, in the partition's directory:
//
//	00000000000000000000.log        batches, back to back, exactly as on the wire
//	00000000000000000000.index      offset index: (relative offset, position) every IndexIntervalBytes
//	00000000000000000000.timeindex  time index: (max timestamp so far, offset)
//
// The .log holds whole batches one after another; nothing else (no framing,
// no padding). A batch starts with its base offset (8 bytes) and its length
// (4 bytes, the bytes that follow), so a reader walks the file by reading 12
// bytes, skipping the length, and so on. A torn tail — what a crash in the
// middle of a write leaves — is a batch whose length runs past the end of the
// file, or whose CRC does not match; [Segment.Recover] truncates the file there.
//
// # Compacted segments
//
// The log cleaner writes a segment that replaces a run of sealed ones
// ([Cleaned]) under the name of the first, with the suffix .cleaned
// (00000000000000000000.log.cleaned, .index.cleaned, .timeindex.cleaned);
// once it is durable, its files are renamed to .swap (the .log last, then
// the directory is fsynced): the commit point. [Segment.Install] renames them
// to their final names. Its batches keep their offsets, so there are gaps
// between them (and within them: a batch keeps its base offset and last
// offset delta whatever records it loses, and may hold none: Kafka's empty
// batch). Offsets only increase: recovery cuts the log at a batch that
// starts at or before the end of the one before it.
//
// # Indexing
//
// After more than IndexIntervalBytes of batches have been written since the
// last entry, the next batch gets an offset-index entry (its last offset, its
// position) and a time-index entry (the largest timestamp so far and the
// offset that carries it), as Kafka does. A lookup is a binary search in the
// index and then a short walk of batch headers in the .log, read 4 KiB at a
// time. At the end of the active segment, where consumers that keep up
// read, there is no walk: the segment remembers the positions, offsets and
// sizes of its last 64 batches as it appends them, and finds a batch there
// without reading the file. A truncation or a recovery forgets them, and
// sealing drops them.
//
// # Open files
//
// The active segment keeps its three files open (the indexes mmap'd). A
// sealed segment may not: [OpenSealed] opens one of a cleanly closed log
// from a stat of its .log, the last entries of its indexes and a walk of
// the batch headers after them, keeping no file open, and a [Cache] closes
// the files of idle sealed segments past its bound. Their files are opened
// again, under a per-segment mutex, by the first method that needs them;
// the first time, the indexes get their sanity check and are rebuilt from
// the .log if they fail it. Running out of file descriptors there is an
// error for that call only.
//
// # Concurrency
//
// One appender at a time (the partition holds its writer lock around
// [Segment.Append] and the other mutating methods). Readers never take that
// lock: the size of the .log and the next offset are published atomically after
// the bytes are written, and a reader only looks at bytes below the published
// size, so it never sees half a batch. Readers hold a reference
// ([Segment.Acquire], [Segment.Release]) so that a segment deleted by
// retention keeps its files open (unlinked) until the last reader is done,
// and a Cache does not close them under it; when the files are open, taking
// a reference is one compare-and-swap and finding them one atomic load.
package segment
