// Package vfs is Strata's disk seam: a small FS and File interface that every
// package reaches the disk through.
//
// [Default] is the operating system. [NewMem] is an in-memory file system that
// can simulate a crash, for tests and the fast unit-test fixture:
//
//   - A file's bytes are durable once [File.Sync] returns; a directory entry
//     (a create, rename or remove) once [FS.SyncDir] of its directory returns.
//     Directories made by MkdirAll are durable at once.
//   - [MemFS.Crash] keeps only what was durable: every file's synced bytes
//     under the durable directory entries. Files opened before then fail with
//     [ErrCrashed], and locks are released, so a test can kill a writer and
//     reopen. [MemFS.CrashClone] returns that state as a new MemFS and leaves
//     the original running, to crash at a random instant under a live writer.
//   - [MemFS.CrashWithTornWrites] also keeps a random, possibly garbled prefix
//     of each file's unsynced tail, as a real disk may.
//
// A crash is atomic: it sees every write, sync and directory change either
// whole or not at all, and never a later sync without an earlier one.
//
// [WithErrors] wraps any FS so that an injector, asked before each operation
// with its [Op] and path, can fail it; [FailAfter] builds a simple injector.
//
// The package's tests run the shared semantics against both the operating
// system and MemFS. STRATA_SOAK=1 runs the random model test of MemFS files
// with many more seeds.
package vfs
