package vfs

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"

	"golang.org/x/sys/unix"
)

// ErrLocked is returned by [FS.Lock] when another holder has the lock.
var ErrLocked = errors.New("vfs: locked by another process")

// File is an open file. ReadAt and WriteAt may be called concurrently with each
// other; Write appends at the file's current offset and must not be called
// concurrently with itself.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Closer
	// Sync makes the file's contents durable (fsync).
	Sync() error
	// Truncate changes the file's size.
	Truncate(size int64) error
	// Stat returns the file's info; Size is its current size.
	Stat() (os.FileInfo, error)
}

// Fder is implemented by files backed by an operating-system file descriptor
// (*os.File). Packages that mmap or sendfile test for it and fall back to
// ordinary reads and writes when it is absent.
type Fder interface {
	Fd() uintptr
}

// FS is a file system. Names are paths in the host's syntax.
type FS interface {
	// Create creates name, truncating it if it exists, opened read-write.
	Create(name string) (File, error)
	// Open opens name read-only.
	Open(name string) (File, error)
	// OpenReadWrite opens name read-write, creating it if it does not exist.
	// The offset for Write starts at 0.
	OpenReadWrite(name string) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// RemoveAll removes a path and anything it contains.
	RemoveAll(name string) error
	// Rename renames oldname to newname, replacing newname atomically.
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and its parents.
	MkdirAll(dir string, perm os.FileMode) error
	// ReadDir returns the sorted names of the entries of dir.
	ReadDir(dir string) ([]string, error)
	// Stat returns the info of name.
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes the directory entries of dir durable: files created,
	// renamed or removed in it survive a crash only after it.
	SyncDir(dir string) error
	// Lock takes an exclusive advisory lock on the file name, creating it.
	// It fails with ErrLocked if another holder has it. Close releases it.
	Lock(name string) (io.Closer, error)
}

// Default is the operating system's file system.
var Default FS = osFS{}

type osFS struct{}

func (osFS) Create(name string) (File, error) {
	return os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
}

func (osFS) Open(name string) (File, error) { return os.Open(name) }

func (osFS) OpenReadWrite(name string) (File, error) {
	return os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
}

func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) RemoveAll(name string) error                 { return os.RemoveAll(name) }
func (osFS) Rename(o, n string) error                    { return os.Rename(o, n) }
func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) Stat(name string) (os.FileInfo, error)       { return os.Stat(name) }

func (osFS) ReadDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

type osLock struct{ f *os.File }

func (l osLock) Close() error {
	_ = unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	return l.f.Close()
}

func (osFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, ErrLocked
		}
		return nil, &os.PathError{Op: "flock", Path: name, Err: err}
	}
	return osLock{f}, nil
}

// WriteFileAtomic writes data to name durably: a temporary file in the same
// directory is written and fsynced, renamed over name, and the directory is
// fsynced. A crash leaves either the old contents or the new, never a mix.
func WriteFileAtomic(fs FS, name string, data []byte) error {
	if err := ReplaceFile(fs, name, data); err != nil {
		return err
	}
	return fs.SyncDir(filepath.Dir(name))
}

// ReplaceFile is WriteFileAtomic without the directory's fsync, for a
// caller that replaces several files of one directory and syncs it once:
// until it does, a crash may leave the old contents.
func ReplaceFile(fs FS, name string, data []byte) error {
	tmp := name + ".tmp"
	if err := writeSynced(fs, tmp, data); err != nil {
		fs.Remove(tmp) // best effort: a later write replaces it anyway
		return err
	}
	if err := fs.Rename(tmp, name); err != nil {
		fs.Remove(tmp)
		return err
	}
	return nil
}

// writeSynced creates name with data and fsyncs it.
func writeSynced(fs FS, name string, data []byte) error {
	f, err := fs.Create(name)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ReadFile reads the whole of name.
func ReadFile(fs FS, name string) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
