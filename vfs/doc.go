// Package vfs is Strata's disk seam: a small FS and File interface that every
// package reaches the disk through.
//
// [Default] is the operating system. [NewMem] is an in-memory file system that
// can simulate a crash: [MemFS.Crash] keeps, for every file, only the bytes that
// were synced, and forgets files whose directory entry was never synced. Tests
// and the fast unit-test fixture use it; it can also inject errors by operation
// and path.
package vfs
