package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/vfs"
)

// activeInLiveDir reports whether the segment of file (a .log, .index or
// .timeindex) is its partition's active segment — the one with the highest
// base offset in its directory — in a data dir that a running broker holds
// (its lock file is locked). Such a segment's index files are preallocated
// to their full size while the broker writes them and trimmed when it rolls
// the segment or closes: their zero tail is normal, not the sign of an
// unclean shutdown it is in a stopped data dir.
func activeInLiveDir(file string) bool {
	base, err := segmentBase(file)
	if err != nil {
		return false
	}
	dir := filepath.Dir(file)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, ent := range ents {
		if !strings.HasSuffix(ent.Name(), ".log") {
			continue
		}
		if b, err := segmentBase(ent.Name()); err == nil && b > base {
			return false // a later segment: this one was rolled
		}
	}
	lock := filepath.Join(filepath.Dir(dir), log.LockFile)
	if _, err := os.Stat(lock); err != nil {
		return false // not in a data dir (a copied file), or never opened
	}
	// Lock is not a change: the file exists, and a lock taken is released
	// at once.
	l, err := vfs.Default.Lock(lock)
	if errors.Is(err, vfs.ErrLocked) {
		return true
	}
	if err == nil {
		l.Close()
	}
	return false
}
