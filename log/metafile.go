package log

import (
	"fmt"

	"github.com/strata-log/strata/vfs"
)

// readMetaFile reads one of a data dir's metadata files (acls.json,
// scram.json, quotas.json), written whole by vfs.WriteFileAtomic, and
// decodes it. A missing file is found false; one that does not decode is
// ErrCorrupt, named.
func readMetaFile[T any](fs vfs.FS, path, name string, decode func([]byte) (T, error)) (v T, found bool, err error) {
	data, err := vfs.ReadFile(fs, path)
	if isNotExist(err) {
		return v, false, nil
	}
	if err != nil {
		return v, false, fmt.Errorf("log: read %s: %w", name, err)
	}
	if v, err = decode(data); err != nil {
		return v, false, fmt.Errorf("log: %s: %w: %v", name, ErrCorrupt, err)
	}
	return v, true, nil
}
