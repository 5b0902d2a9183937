package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
)

// ErrInjected is the error the injectors of this package return.
var ErrInjected = errors.New("vfs: injected error")

// Op is a kind of file-system operation, as seen by an injector of
// [WithErrors].
type Op int

const (
	OpCreate   Op = iota // FS.Create
	OpOpen               // FS.Open, FS.OpenReadWrite
	OpRead               // File.Read, File.ReadAt
	OpWrite              // File.Write, File.WriteAt
	OpSync               // File.Sync
	OpSyncDir            // FS.SyncDir
	OpRemove             // FS.Remove, FS.RemoveAll
	OpRename             // FS.Rename (path is the old name)
	OpTruncate           // File.Truncate
	OpMkdir              // FS.MkdirAll
	OpStat               // FS.Stat, File.Stat
	OpReadDir            // FS.ReadDir
	OpLock               // FS.Lock
	OpClose              // File.Close, and Close of a lock from FS.Lock
)

var opNames = [...]string{
	OpCreate:   "create",
	OpOpen:     "open",
	OpRead:     "read",
	OpWrite:    "write",
	OpSync:     "sync",
	OpSyncDir:  "syncdir",
	OpRemove:   "remove",
	OpRename:   "rename",
	OpTruncate: "truncate",
	OpMkdir:    "mkdir",
	OpStat:     "stat",
	OpReadDir:  "readdir",
	OpLock:     "lock",
	OpClose:    "close",
}

func (op Op) String() string {
	if op >= 0 && int(op) < len(opNames) {
		return opNames[op]
	}
	return "Op(" + strconv.Itoa(int(op)) + ")"
}

// WithErrors wraps fs, and every File and lock it opens, so that before each
// operation inject is asked about it (with the path the file was opened by,
// for File methods). If inject returns an error, the operation is not done
// and the error is returned wrapped in an *fs.PathError whose Op is the
// [Op]'s name, so errors.Is(err, ErrInjected) works for the injectors here.
//
// The one exception is Close: as close(2) releases the descriptor even when
// it reports an error, the wrapped file or lock is closed anyway and the
// injected error returned. inject must be safe for concurrent use if the FS
// is used concurrently. Wrapped files do not implement [Fder], so that users
// who would mmap fall back to reads that can be failed.
func WithErrors(fs FS, inject func(op Op, path string) error) FS {
	return &errorFS{fs: fs, inject: inject}
}

// FailAfter returns an injector that lets the first n matching operations
// through and fails every later one with [ErrInjected]. With no ops, every
// operation matches. It is safe for concurrent use.
func FailAfter(n int, ops ...Op) func(op Op, path string) error {
	var count atomic.Int64
	return func(op Op, _ string) error {
		if len(ops) > 0 && !slices.Contains(ops, op) {
			return nil
		}
		if count.Add(1) > int64(n) {
			return ErrInjected
		}
		return nil
	}
}

type errorFS struct {
	fs     FS
	inject func(Op, string) error
}

func (e *errorFS) check(op Op, path string) error {
	if err := e.inject(op, path); err != nil {
		return &fs.PathError{Op: op.String(), Path: path, Err: err}
	}
	return nil
}

func (e *errorFS) file(f File, err error, name string) (File, error) {
	if err != nil {
		return nil, err
	}
	return &errorFile{f: f, fs: e, name: name}, nil
}

func (e *errorFS) Create(name string) (File, error) {
	if err := e.check(OpCreate, name); err != nil {
		return nil, err
	}
	f, err := e.fs.Create(name)
	return e.file(f, err, name)
}

func (e *errorFS) Open(name string) (File, error) {
	if err := e.check(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.fs.Open(name)
	return e.file(f, err, name)
}

func (e *errorFS) OpenReadWrite(name string) (File, error) {
	if err := e.check(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.fs.OpenReadWrite(name)
	return e.file(f, err, name)
}

func (e *errorFS) Remove(name string) error {
	if err := e.check(OpRemove, name); err != nil {
		return err
	}
	return e.fs.Remove(name)
}

func (e *errorFS) RemoveAll(name string) error {
	if err := e.check(OpRemove, name); err != nil {
		return err
	}
	return e.fs.RemoveAll(name)
}

func (e *errorFS) Rename(oldname, newname string) error {
	if err := e.check(OpRename, oldname); err != nil {
		return err
	}
	return e.fs.Rename(oldname, newname)
}

func (e *errorFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := e.check(OpMkdir, dir); err != nil {
		return err
	}
	return e.fs.MkdirAll(dir, perm)
}

func (e *errorFS) ReadDir(dir string) ([]string, error) {
	if err := e.check(OpReadDir, dir); err != nil {
		return nil, err
	}
	return e.fs.ReadDir(dir)
}

func (e *errorFS) Stat(name string) (os.FileInfo, error) {
	if err := e.check(OpStat, name); err != nil {
		return nil, err
	}
	return e.fs.Stat(name)
}

func (e *errorFS) SyncDir(dir string) error {
	if err := e.check(OpSyncDir, dir); err != nil {
		return err
	}
	return e.fs.SyncDir(dir)
}

func (e *errorFS) Lock(name string) (io.Closer, error) {
	if err := e.check(OpLock, name); err != nil {
		return nil, err
	}
	l, err := e.fs.Lock(name)
	if err != nil {
		return nil, err
	}
	return &errorLock{l: l, fs: e, name: name}, nil
}

type errorLock struct {
	l    io.Closer
	fs   *errorFS
	name string
}

func (l *errorLock) Close() error {
	err := l.fs.check(OpClose, l.name)
	if cerr := l.l.Close(); err == nil {
		err = cerr
	}
	return err
}

type errorFile struct {
	f    File
	fs   *errorFS
	name string
}

func (f *errorFile) Read(p []byte) (int, error) {
	if err := f.fs.check(OpRead, f.name); err != nil {
		return 0, err
	}
	return f.f.Read(p)
}

func (f *errorFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(OpRead, f.name); err != nil {
		return 0, err
	}
	return f.f.ReadAt(p, off)
}

func (f *errorFile) Write(p []byte) (int, error) {
	if err := f.fs.check(OpWrite, f.name); err != nil {
		return 0, err
	}
	return f.f.Write(p)
}

func (f *errorFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(OpWrite, f.name); err != nil {
		return 0, err
	}
	return f.f.WriteAt(p, off)
}

func (f *errorFile) Sync() error {
	if err := f.fs.check(OpSync, f.name); err != nil {
		return err
	}
	return f.f.Sync()
}

func (f *errorFile) Truncate(size int64) error {
	if err := f.fs.check(OpTruncate, f.name); err != nil {
		return err
	}
	return f.f.Truncate(size)
}

func (f *errorFile) Stat() (os.FileInfo, error) {
	if err := f.fs.check(OpStat, f.name); err != nil {
		return nil, err
	}
	return f.f.Stat()
}

func (f *errorFile) Close() error {
	err := f.fs.check(OpClose, f.name)
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	return err
}
