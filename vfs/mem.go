package vfs

import (
	"errors"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrCrashed is returned by every operation on a File or lock that was opened
// on a [MemFS] before its [MemFS.Crash]: the process that held it is dead.
var ErrCrashed = errors.New("vfs: file system crashed")

// MemFS is an in-memory [FS] that can simulate a machine crash. It is safe
// for concurrent use.
//
// Every file holds its current bytes and its durable bytes: [File.Sync] makes
// the current bytes durable. Every directory holds its current entries and its
// durable entries: [FS.SyncDir] makes the current entries durable, so a file
// created, renamed or removed survives a crash only once its parent directory
// was synced. Directories made by [MemFS.MkdirAll] are durable at once (as if
// MkdirAll synced each parent), so tests need not sync a tree before using it.
// The root always exists.
//
// Paths are cleaned and taken relative to the root: "a/b", "/a/b" and
// "/a/./b" name the same file. There are no symbolic links.
//
// [MemFS.Crash] replaces the tree by its durable state; [MemFS.CrashClone]
// returns the durable state as a new MemFS and leaves the original running.
// MemFS files do not implement [Fder].
type MemFS struct {
	// freeze is held shared by every change to a file's contents and
	// exclusively by a crash, which so sees each change whole or not at all
	// and, across files, in an order the changes could have reached a disk.
	// Lock order: freeze, mu, a file's mu.
	freeze sync.RWMutex
	mu     sync.Mutex // guards root, gen, locks and every directory's entries
	root   *memNode
	gen    *memGen
	locks  map[*memNode]bool // files whose lock is held
}

// memGen is one life of a MemFS, ended by Crash. Handles and locks belong to
// the generation they were opened in and fail once it has crashed.
type memGen struct{ crashed atomic.Bool }

// memNode is a directory or a file (an inode: one node may be reachable by
// several names when a rename was synced in one directory only).
type memNode struct {
	dir bool
	// For directories, guarded by MemFS.mu.
	children map[string]*memNode // current entries
	durable  map[string]*memNode // entries as of the last SyncDir
	// changed names the entries of children that may differ from durable
	// (a name may repeat); with allChanged, any entry may. SyncDir brings
	// only those into durable, so it costs O(changes), not O(entries).
	changed    []string
	allChanged bool
	// For files.
	file *memFile
}

var _ FS = (*MemFS)(nil)

// NewMem returns an empty in-memory file system.
func NewMem() *MemFS {
	return &MemFS{root: newMemDir(), gen: new(memGen), locks: map[*memNode]bool{}}
}

func newMemDir() *memNode {
	return &memNode{dir: true, children: map[string]*memNode{}, durable: map[string]*memNode{}}
}

// maxChanged bounds a directory's changed list; past it, SyncDir copies
// every entry.
const maxChanged = 64

// setChild makes c the entry name of directory d (nil: removes it). m.mu
// must be held.
func (d *memNode) setChild(name string, c *memNode) {
	if c == nil {
		delete(d.children, name)
	} else {
		d.children[name] = c
	}
	d.changedEntry(name)
}

// changedEntry records that entry name of directory d may now differ from
// its durable entry.
func (d *memNode) changedEntry(name string) {
	if d.allChanged {
		return
	}
	if len(d.changed) == maxChanged {
		d.changed, d.allChanged = d.changed[:0], true
		return
	}
	d.changed = append(d.changed, name)
}

func newMemFileNode(data []byte) *memNode {
	return &memNode{file: newMemFile(data)}
}

// sep is the host's path separator.
const sep = byte(filepath.Separator)

// relPath turns a host path into its components below the root, joined by
// the separator: "" for the root. A path that is already clean (the usual
// case) is returned as a substring of name, without allocating.
func relPath(name string) string {
	p := strings.TrimLeft(name, string(sep))
	if !isCleanRel(p) {
		p = strings.TrimLeft(filepath.Clean(string(sep)+name), string(sep))
	}
	return p
}

// isCleanRel reports whether p is "" or components joined by single
// separators, none empty, "." or "..".
func isCleanRel(p string) bool {
	for p != "" {
		c, rest, found := strings.Cut(p, string(sep))
		if c == "" || c == "." || c == ".." || found && rest == "" {
			return false
		}
		p = rest
	}
	return true
}

// walk resolves name. It returns the parent directory and base name of name
// and the node (nil if there is no such entry). For the root, parent is nil.
// It fails if a component before the last is missing or not a directory.
// m.mu must be held.
func (m *MemFS) walk(name string) (parent *memNode, base string, n *memNode, err error) {
	p := relPath(name)
	if p == "" {
		return nil, "", m.root, nil
	}
	dir := m.root
	for {
		i := strings.IndexByte(p, sep)
		if i < 0 {
			break
		}
		if i > maxNameLen {
			return nil, "", nil, syscall.ENAMETOOLONG
		}
		next := dir.children[p[:i]]
		if next == nil {
			return nil, "", nil, syscall.ENOENT
		}
		if !next.dir {
			return nil, "", nil, syscall.ENOTDIR
		}
		dir, p = next, p[i+1:]
	}
	if len(p) > maxNameLen {
		return nil, "", nil, syscall.ENAMETOOLONG
	}
	return dir, p, dir.children[p], nil
}

// maxNameLen is the longest name of a directory entry, in bytes: NAME_MAX
// of Linux's file systems (and of most others). A longer one is
// ENAMETOOLONG, as the operating system says.
const maxNameLen = 255

// lookup returns the existing node name; a missing one is ENOENT. Errors
// are *fs.PathError with op. Holds m.mu.
func (m *MemFS) lookup(op, name string) (*memNode, error) {
	_, _, n, err := m.walk(name)
	if err == nil && n == nil {
		err = syscall.ENOENT
	}
	if err != nil {
		return nil, pathErr(op, name, err)
	}
	return n, nil
}

func pathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// openOrCreate returns the file name, creating it (empty) if it does not
// exist; created says which. A directory is EISDIR. Holds m.mu.
func (m *MemFS) openOrCreate(name string) (n *memNode, created bool, err error) {
	parent, base, n, err := m.walk(name)
	switch {
	case err != nil:
		return nil, false, pathErr("open", name, err)
	case n == nil:
		n = newMemFileNode(nil)
		parent.setChild(base, n)
		return n, true, nil
	case n.dir:
		return nil, false, pathErr("open", name, syscall.EISDIR)
	}
	return n, false, nil
}

// Create implements [FS.Create].
func (m *MemFS) Create(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, created, err := m.openOrCreate(name)
	if err != nil {
		return nil, err
	}
	if !created {
		n.file.mu.Lock()
		n.file.truncate(0)
		n.file.mu.Unlock()
	}
	return m.newHandle(n, name, true), nil
}

// Open implements [FS.Open]. A directory can be opened: reading it fails and
// syncing it is [MemFS.SyncDir].
func (m *MemFS) Open(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("open", name)
	if err != nil {
		return nil, err
	}
	return m.newHandle(n, name, false), nil
}

// OpenReadWrite implements [FS.OpenReadWrite].
func (m *MemFS) OpenReadWrite(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, _, err := m.openOrCreate(name)
	if err != nil {
		return nil, err
	}
	return m.newHandle(n, name, true), nil
}

// Remove implements [FS.Remove].
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	parent, base, n, err := m.walk(name)
	switch {
	case err != nil:
	case n == nil:
		err = syscall.ENOENT
	case parent == nil:
		err = syscall.EBUSY
	case n.dir && len(n.children) > 0:
		err = syscall.ENOTEMPTY
	}
	if err != nil {
		return pathErr("remove", name, err)
	}
	parent.setChild(base, nil)
	return nil
}

// RemoveAll implements [FS.RemoveAll]. Like [os.RemoveAll] it returns nil if
// name does not exist. Removing the root empties it.
func (m *MemFS) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	parent, base, n, err := m.walk(name)
	if errors.Is(err, syscall.ENAMETOOLONG) {
		return pathErr("unlinkat", name, err) // as os.RemoveAll
	}
	if err != nil || n == nil {
		return nil
	}
	if parent == nil {
		clear(n.children)
		n.allChanged = true
		return nil
	}
	parent.setChild(base, nil)
	return nil
}

// Rename implements [FS.Rename] with the rules of rename(2): a file replaces
// a file, a directory replaces an empty directory, a directory cannot move
// into itself.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	fail := func(err error) error {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	op, ob, on, err := m.walk(oldname)
	if err != nil {
		return fail(err)
	}
	if on == nil {
		return fail(syscall.ENOENT)
	}
	np, nb, nn, err := m.walk(newname)
	if err != nil {
		return fail(err)
	}
	if op == nil || np == nil {
		return fail(syscall.EBUSY)
	}
	if on == nn {
		return nil
	}
	if on.dir {
		if nn != nil && !nn.dir {
			return fail(syscall.ENOTDIR)
		}
		if nn != nil && len(nn.children) > 0 {
			return fail(syscall.ENOTEMPTY)
		}
		if o, n := relPath(oldname), relPath(newname); strings.HasPrefix(n, o) && len(n) > len(o) && n[len(o)] == sep {
			return fail(syscall.EINVAL)
		}
	} else if nn != nil && nn.dir {
		return fail(syscall.EISDIR)
	}
	op.setChild(ob, nil)
	np.setChild(nb, on)
	return nil
}

// MkdirAll implements [FS.MkdirAll]. The directories it makes are durable at
// once; perm is ignored.
func (m *MemFS) MkdirAll(dir string, perm os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.root
	for rest := relPath(dir); rest != ""; {
		var p string
		p, rest, _ = strings.Cut(rest, string(sep))
		if len(p) > maxNameLen {
			return pathErr("mkdir", dir, syscall.ENAMETOOLONG)
		}
		next := n.children[p]
		if next == nil {
			next = newMemDir()
			n.children[p] = next
			n.durable[p] = next
		} else if !next.dir {
			return pathErr("mkdir", dir, syscall.ENOTDIR)
		}
		n = next
	}
	return nil
}

// ReadDir implements [FS.ReadDir].
func (m *MemFS) ReadDir(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("open", dir)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, pathErr("open", dir, syscall.ENOTDIR)
	}
	return slices.Sorted(maps.Keys(n.children)), nil
}

// Stat implements [FS.Stat].
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	return n.info(filepath.Base(name)), nil
}

// SyncDir implements [FS.SyncDir]: the current entries of dir become its
// durable entries. Syncing a file (as fsync of an opened file would) makes
// its contents durable.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("open", dir)
	if err != nil {
		return err
	}
	n.sync()
	return nil
}

// sync makes n durable: its entries if a directory, its bytes if a file.
// For a directory m.mu must be held.
func (n *memNode) sync() {
	if n.dir {
		if n.allChanged {
			clear(n.durable)
			maps.Copy(n.durable, n.children)
		} else {
			for _, name := range n.changed {
				if c := n.children[name]; c != nil {
					n.durable[name] = c
				} else {
					delete(n.durable, name)
				}
			}
		}
		clear(n.changed)
		n.changed, n.allChanged = n.changed[:0], false
		return
	}
	n.file.mu.Lock()
	n.file.sync()
	n.file.mu.Unlock()
}

// Lock implements [FS.Lock]. Locks are per file (inode), exclusive within
// this MemFS, and all released by a crash.
func (m *MemFS) Lock(name string) (io.Closer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, _, err := m.openOrCreate(name)
	if err != nil {
		return nil, err
	}
	if m.locks[n] {
		return nil, ErrLocked
	}
	m.locks[n] = true
	return &memLock{fs: m, gen: m.gen, node: n, name: name}, nil
}

type memLock struct {
	fs     *MemFS
	gen    *memGen
	node   *memNode
	name   string
	closed bool // guarded by fs.mu
}

func (l *memLock) Close() error {
	l.fs.mu.Lock()
	defer l.fs.mu.Unlock()
	if l.closed {
		return pathErr("close", l.name, os.ErrClosed)
	}
	l.closed = true
	if l.gen.crashed.Load() {
		return pathErr("close", l.name, ErrCrashed)
	}
	delete(l.fs.locks, l.node)
	return nil
}

// Crash simulates a machine crash and restart: from now on the file system
// holds only what was durable, every file's synced bytes under the durable
// directory entries. Files and locks opened before fail with [ErrCrashed].
func (m *MemFS) Crash() { m.crash(nil) }

// CrashWithTornWrites is [MemFS.Crash] where, as on a real disk, part of what
// was written but not synced may also have reached the disk: of every file's
// unsynced appended tail a random prefix survives, and a random run inside
// that prefix may be zeros or garbage. Synced bytes are never lost. The same
// rng state and the same file system give the same result.
func (m *MemFS) CrashWithTornWrites(rng *rand.Rand) { m.crash(rng) }

func (m *MemFS) crash(rng *rand.Rand) {
	m.freeze.Lock()
	defer m.freeze.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen.crashed.Store(true)
	m.root = durableCopy(m.root, rng)
	m.gen = new(memGen)
	m.locks = map[*memNode]bool{}
}

// CrashClone returns a new MemFS holding what [MemFS.Crash] would leave,
// without disturbing m: goroutines still writing to m keep running, and a
// test can reopen the clone as if the machine had crashed at this instant.
func (m *MemFS) CrashClone() *MemFS { return m.crashClone(nil) }

// CrashCloneWithTornWrites is [MemFS.CrashClone] with the torn tails of
// [MemFS.CrashWithTornWrites].
func (m *MemFS) CrashCloneWithTornWrites(rng *rand.Rand) *MemFS { return m.crashClone(rng) }

func (m *MemFS) crashClone(rng *rand.Rand) *MemFS {
	m.freeze.Lock()
	defer m.freeze.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	c := NewMem()
	c.root = durableCopy(m.root, rng)
	return c
}

// durableCopy returns a fresh tree made of the durable state under root.
// Names are visited breadth first in sorted order, so rng use is
// reproducible. A file reachable by several durable names stays one file; a
// directory reachable by several (possible when directory renames were synced
// on one side only, even in a cycle) is kept at its first name in that order.
func durableCopy(root *memNode, rng *rand.Rand) *memNode {
	files := map[*memNode]*memNode{}
	seen := map[*memNode]bool{root: true}
	type pair struct{ from, to *memNode }
	out := newMemDir()
	queue := []pair{{root, out}}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		for _, name := range slices.Sorted(maps.Keys(d.from.durable)) {
			c := d.from.durable[name]
			var cc *memNode
			switch {
			case c.dir && seen[c]:
				continue
			case c.dir:
				seen[c] = true
				cc = newMemDir()
				queue = append(queue, pair{c, cc})
			default:
				cc = files[c]
				if cc == nil {
					cc = newMemFileNode(c.file.durableBytes(rng))
					files[c] = cc
				}
			}
			d.to.children[name] = cc
			d.to.durable[name] = cc
		}
	}
	return out
}

func (n *memNode) info(name string) os.FileInfo {
	if n.dir {
		return &memFileInfo{name: name, dir: true}
	}
	n.file.mu.RLock()
	defer n.file.mu.RUnlock()
	return &memFileInfo{name: name, size: int64(n.file.size), modTime: n.file.modTime}
}

type memFileInfo struct {
	name    string
	size    int64
	dir     bool
	modTime time.Time
}

func (i *memFileInfo) Name() string       { return i.name }
func (i *memFileInfo) Size() int64        { return i.size }
func (i *memFileInfo) IsDir() bool        { return i.dir }
func (i *memFileInfo) ModTime() time.Time { return i.modTime }
func (i *memFileInfo) Sys() any           { return nil }

func (i *memFileInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}
