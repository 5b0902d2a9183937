package log

import "github.com/strata-log/strata/vfs"

// unsyncedDirs is the FS of an ephemeral broker (OpenEphemeral): its
// directory fsyncs do nothing. They make the creation, rename and removal
// of files survive a crash, which only a later Open of the data dir would
// see, and none comes. Files are written and flushed as on the FS itself.
type unsyncedDirs struct{ vfs.FS }

func (unsyncedDirs) SyncDir(string) error { return nil }
