package log

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/vfs"
)

// dataDirEntries lists the entries of a data dir that are not its own
// files: partition directories and asides.
func dataDirEntries(t *testing.T, fs vfs.FS, dir string) []string {
	t.Helper()
	names, err := fs.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, n := range names {
		switch n {
		case lockFile, topicsFile, cleanShutdown, recoveryPointFile, logStartFile, highWatermarkFile, cleanerCheckpointFile:
		default:
			out = append(out, n)
		}
	}
	return out
}

// TestLongTopicNameDeleteAndReopen is the reproduction of a topic name
// that bricked the data dir: a 246-249 character name, deleted, once
// failed to move its directory to <name>-0.deleted (more than 255 bytes),
// left it behind, and the next Open refused to start. Now every name
// derived from a topic fits, the deletion leaves nothing, the name can be
// created again and the data dir reopens.
func TestLongTopicNameDeleteAndReopen(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		for n := 246; n <= 249; n++ {
			name := strings.Repeat(string(rune('a'+n-246)), n)
			b := openT(t, fs, dir)
			top, err := b.CreateTopic(name, TopicConfig{Partitions: 11})
			require.NoError(t, err)
			p, err := top.Partition(10)
			require.NoError(t, err)
			_, err = p.Append(rec(1))
			require.NoError(t, err)
			require.NoError(t, b.DeleteTopic(name))
			require.Empty(t, dataDirEntries(t, fs, dir), "%d characters: nothing left", n)
			require.NotContains(t, b.Topics(), name)

			_, err = b.CreateTopic(name, TopicConfig{Partitions: 11})
			require.NoError(t, err, "%d characters: created again", n)
			require.NoError(t, b.Close())
			b = openT(t, fs, dir)
			require.Contains(t, b.Topics(), name)
			require.NoError(t, b.DeleteTopic(name))
			require.NoError(t, b.Close())
			b = openT(t, fs, dir)
			require.Empty(t, b.Topics())
			require.Empty(t, dataDirEntries(t, fs, dir))
			require.NoError(t, b.Close())
		}
	})
}

// TestLongTopicNameStrayRemoved: a data dir left by the old deletion (the
// topic gone from topics.json, its directory still there) opens, and the
// directory is removed.
func TestLongTopicNameStrayRemoved(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		name := strings.Repeat("x", 249)
		b := openT(t, fs, dir)
		_, err := b.CreateTopic(name, TopicConfig{})
		require.NoError(t, err)
		_, err = b.CreateTopic("kept", TopicConfig{})
		require.NoError(t, err)
		require.NoError(t, b.Close())
		// topics.json as the old DeleteTopic wrote it before it failed.
		b = openT(t, fs, dir)
		delete(b.topics, name)
		require.NoError(t, b.writeTopics())
		require.NoError(t, b.Close())

		b = openT(t, fs, dir)
		defer b.Close()
		require.Equal(t, []string{"kept"}, b.Topics())
		require.Equal(t, []string{"kept-0"}, dataDirEntries(t, fs, dir))
	})
}

// TestPartitionDirNameFits: every partition directory and aside name fits
// in 255 bytes, and a partition whose directory name would not is refused
// before anything is made.
func TestPartitionDirNameFits(t *testing.T) {
	for _, n := range []int{1, 100, 229, 230, 246, 249} {
		topic := strings.Repeat("t", n)
		for _, id := range []int{0, 9, 99999, math.MaxInt32} {
			for _, tag := range []uint64{0, 1, math.MaxUint64} {
				a := asideName(topic, id, tag)
				require.LessOrEqual(t, len(a), maxNameLen, "%d-character topic, partition %d", n, id)
				require.True(t, isAsideOf(a, topic, id))
				require.False(t, isAsideOf(a, topic, id+1))
				if len(a) < maxNameLen { // not cut short: the whole topic is in it
					require.False(t, isAsideOf(a, topic+"x", id))
				}
			}
		}
	}
	require.False(t, isAsideOf("t-0.deleted", "t", 0), "an old-style aside is no deletion under way")

	b := openT(t, vfs.NewMem(), "/d")
	defer b.Close()
	name := strings.Repeat("p", 249)
	_, err := b.CreateTopic(name, TopicConfig{Partitions: 100_001})
	require.ErrorIs(t, err, ErrInvalidPartitions)
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.Empty(t, dataDirEntries(t, b.fs, "/d"))
	require.Empty(t, b.Topics())
	_, err = b.store.CreatePartition(name, 100_000, TopicConfig{})
	require.ErrorIs(t, err, ErrInvalidPartitions)
}

// TestDeleteTopicCrash crashes at every file-system operation of a
// DeleteTopic, and then at every operation of the Open after it: the data
// dir always opens, and the topic is then either whole or gone with every
// directory of it, never listed with partitions lost.
func TestDeleteTopicCrash(t *testing.T) {
	const parts = 3
	setup := func(t *testing.T) (*vfs.MemFS, []int64) {
		mem := vfs.NewMem()
		b := openT(t, mem, "/d")
		top, err := b.CreateTopic("doomed", TopicConfig{Partitions: parts})
		require.NoError(t, err)
		_, err = b.CreateTopic("kept", TopicConfig{})
		require.NoError(t, err)
		var ends []int64
		for i := range parts {
			p, _ := top.Partition(i)
			for j := range 5 * (i + 1) {
				_, err := p.Append(rec(j))
				require.NoError(t, err)
			}
			ends = append(ends, p.EndOffset())
		}
		require.NoError(t, b.Close())
		return mem, ends
	}
	// check opens the data dir and asserts the topic is whole or gone.
	check := func(t *testing.T, fs vfs.FS, ends []int64, what string) (gone bool) {
		b := openT(t, fs, "/d")
		defer b.Close()
		require.Contains(t, b.Topics(), "kept", what)
		top, err := b.Topic("doomed")
		if errors.Is(err, ErrUnknownTopic) {
			for _, n := range dataDirEntries(t, fs, "/d") {
				require.NotContains(t, n, "doomed", "%s: all of it removed", what)
			}
			return true
		}
		require.NoError(t, err, what)
		for i := range parts {
			p, _ := top.Partition(i)
			require.Equal(t, ends[i], p.EndOffset(), "%s: partition %d whole", what, i)
		}
		return false
	}
	sawHalf := false
	for n := 0; ; n++ {
		mem, ends := setup(t)
		efs, hook := injectable(mem)
		b := openT(t, efs, "/d")
		var crashed *vfs.MemFS
		b.store.roundMu.Lock() // no background work: the same crash point every run
		hook.set(crashAtOp(mem, n, &crashed, nil))
		err := b.DeleteTopic("doomed")
		hook.set(nil)
		b.store.roundMu.Unlock()
		b.Close()
		if crashed == nil {
			require.NoError(t, err)
			require.Positive(t, n)
			require.True(t, sawHalf, "some crash left the topic listed with directories moved aside")
			return
		}
		// What the crash left: listed with moved directories is the case
		// the next Open must finish.
		data, _ := vfs.ReadFile(crashed, "/d/"+topicsFile)
		listed := bytes.Contains(data, []byte(`"doomed"`))
		moved := false
		names, _ := crashed.ReadDir("/d")
		for _, name := range names {
			moved = moved || strings.HasSuffix(name, deletedSuffix)
		}
		sawHalf = sawHalf || listed && moved

		// Crash the Open that finishes a deletion at each of its
		// operations too.
		for m := 0; listed && moved; m++ {
			again := crashed.CrashClone()
			efs, hook := injectable(again)
			var crashed2 *vfs.MemFS
			hook.set(crashAtOp(again, m, &crashed2, nil))
			b, err := Open("/d", Config{FS: efs})
			hook.set(nil)
			if err == nil {
				b.Close()
			}
			if crashed2 == nil {
				require.NoError(t, err)
				break
			}
			check(t, crashed2, ends, fmt.Sprintf("crash at operation %d of the delete and %d of the open", n, m))
		}
		gone := check(t, crashed, ends, fmt.Sprintf("crash at operation %d", n))
		if listed && moved {
			require.True(t, gone, "crash at operation %d: a deletion under way is finished", n)
		}
	}
}

// TestOpenWithLeftovers: startup finishes or sets aside whatever removals
// left in the data dir, and never refuses to open because of one: an old
// <topic>-<p>.deleted directory, a new-style aside, a topic whose deletion
// was cut short (listed, one partition moved aside, one not), a directory
// of no topic, and an aside and a stray that cannot be removed (a warning
// each, and they stay).
func TestOpenWithLeftovers(t *testing.T) {
	mem := vfs.NewMem()
	b := openT(t, mem, "/d")
	for _, name := range []string{"half", "kept", "stray", "stuck"} {
		top, err := b.CreateTopic(name, TopicConfig{Partitions: 2})
		require.NoError(t, err)
		p, _ := top.Partition(0)
		_, err = p.Append(rec(1))
		require.NoError(t, err)
	}
	require.NoError(t, b.Close())
	// Strays: topics.json without stray and stuck.
	b = openT(t, mem, "/d")
	delete(b.topics, "stray")
	delete(b.topics, "stuck")
	require.NoError(t, b.writeTopics())
	require.NoError(t, b.Close())
	// A crash between DeleteTopic's renames and topics.json: one partition
	// of half moved aside.
	require.NoError(t, mem.Rename("/d/half-0", "/d/"+asideName("half", 0, 7)))
	// The old way's leftover and an aside of a gone topic.
	require.NoError(t, mem.MkdirAll("/d/old-0.deleted/sub", 0o755))
	require.NoError(t, mem.MkdirAll("/d/"+asideName("gone", 3, 1), 0o755))
	// An aside no one can remove.
	require.NoError(t, mem.MkdirAll("/d/"+asideName("locked", 0, 2), 0o755))
	require.NoError(t, mem.Remove("/d/"+cleanShutdown)) // as after a crash
	require.NoError(t, mem.SyncDir("/d"))

	var logs bytes.Buffer
	fs := vfs.WithErrors(mem, func(op vfs.Op, path string) error {
		base := filepath.Base(path)
		if op == vfs.OpRemove && strings.HasPrefix(base, "locked-") || op == vfs.OpRename && strings.HasPrefix(base, "stuck-") {
			return vfs.ErrInjected
		}
		return nil
	})
	b, err := Open("/d", Config{FS: fs, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	require.Equal(t, []string{"kept"}, b.Topics())
	_, err = b.Topic("half")
	require.ErrorIs(t, err, ErrUnknownTopic)
	left := dataDirEntries(t, mem, "/d")
	require.ElementsMatch(t, []string{"kept-0", "kept-1", asideName("locked", 0, 2), "stuck-0", "stuck-1"}, left)
	require.Contains(t, logs.String(), "finishing topic deletions a crash interrupted")
	require.Contains(t, logs.String(), "could not finish removing a partition directory")
	require.Contains(t, logs.String(), "could not remove partition directory of no topic")
	// half can be created again, empty.
	top, err := b.CreateTopic("half", TopicConfig{Partitions: 2})
	require.NoError(t, err)
	p, _ := top.Partition(0)
	require.Zero(t, p.EndOffset())
	require.NoError(t, b.Close())
	_, err = mem.Stat("/d/" + cleanShutdown)
	require.NoError(t, err, "the strays left behind do not keep the shutdown from being clean")

	// Without the faults, the next open clears the rest.
	b = openT(t, mem, "/d")
	defer b.Close()
	require.ElementsMatch(t, []string{"half-0", "half-1", "kept-0", "kept-1"}, dataDirEntries(t, mem, "/d"))
}

// TestDeleteTopicFailures: once DeleteTopic has closed the partitions the
// deletion goes on. A topics.json it cannot write is an error, the topic
// is gone from the broker, and the next Open finishes the deletion; a
// directory it cannot move aside is an error, and the next Open removes it.
func TestDeleteTopicFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(op vfs.Op, path string) bool
	}{
		{"topics.json", func(op vfs.Op, path string) bool {
			return strings.Contains(filepath.Base(path), topicsFile) && (op == vfs.OpCreate || op == vfs.OpRename)
		}},
		{"rename", func(op vfs.Op, path string) bool { return op == vfs.OpRename && filepath.Base(path) == "doomed-1" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			efs, hook := injectable(mem)
			b := openT(t, efs, "/d")
			top, err := b.CreateTopic("doomed", TopicConfig{Partitions: 2})
			require.NoError(t, err)
			p, _ := top.Partition(1)
			_, err = p.Append(rec(1))
			require.NoError(t, err)
			hook.set(func(op vfs.Op, path string) error {
				if tc.fail(op, path) {
					return vfs.ErrInjected
				}
				return nil
			})
			err = b.DeleteTopic("doomed")
			hook.set(nil)
			require.ErrorIs(t, err, vfs.ErrInjected)
			require.Empty(t, b.Topics(), "the topic is gone from the broker")
			_, err = p.Append(rec(2))
			require.ErrorIs(t, err, ErrClosed)
			require.NoError(t, b.Close())

			b = openT(t, mem, "/d")
			defer b.Close()
			require.Empty(t, b.Topics(), "the next open finishes the deletion")
			require.Empty(t, dataDirEntries(t, mem, "/d"))
		})
	}
}
