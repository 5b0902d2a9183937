package vfs_test

import (
	"errors"
	"fmt"

	"github.com/strata-log/strata/vfs"
)

// A crash keeps only what was made durable: synced bytes under synced
// directory entries.
func ExampleMemFS_Crash() {
	m := vfs.NewMem()
	m.MkdirAll("/data", 0o755)

	f, _ := m.Create("/data/log")
	f.Write([]byte("acknowledged;"))
	f.Sync()                // the bytes are durable...
	m.SyncDir("/data")      // ...and so is the name
	f.Write([]byte("lost")) // never synced

	tmp, _ := m.Create("/data/tmp")
	tmp.Sync() // the name was never synced

	m.Crash()
	b, _ := vfs.ReadFile(m, "/data/log")
	names, _ := m.ReadDir("/data")
	_, err := f.Write([]byte("x"))
	fmt.Printf("%q %q %v\n", b, names, errors.Is(err, vfs.ErrCrashed))
	// Output: "acknowledged;" ["log"] true
}

// WithErrors fails chosen operations: here every Sync after the first.
func ExampleWithErrors() {
	fsys := vfs.WithErrors(vfs.NewMem(), vfs.FailAfter(1, vfs.OpSync))
	f, _ := fsys.Create("/f")
	fmt.Println(f.Sync())
	err := f.Sync()
	fmt.Println(err, errors.Is(err, vfs.ErrInjected))
	// Output:
	// <nil>
	// sync /f: vfs: injected error true
}
