package vfs

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
)

// fileModel drives one MemFS file and a trivial model of it (a byte slice
// for the current contents, a whole copy of it for the durable ones) with
// the same operations, and checks that they agree.
type fileModel struct {
	t                     *testing.T
	name                  string // what to print on failure, e.g. the seed
	m                     *MemFS
	f                     File
	off                   int64
	cur, durable, scratch []byte
}

// modelSpan bounds the model's offsets: it covers a chunk boundary.
const modelSpan = memChunkSize + 3*memPageSize

type modelOp int

const (
	opWriteAt modelOp = iota
	opWrite
	opTruncate
	opSync
	opReadAt
	opCrash
	opCrashClone
	opReopen
	numModelOps
)

func newFileModel(t *testing.T, name string) *fileModel {
	t.Helper()
	fm := &fileModel{t: t, name: name, m: NewMem()}
	f, err := fm.m.Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	fm.m.SyncDir("/")
	fm.f = f
	return fm
}

func (fm *fileModel) fail(step int, format string, args ...any) {
	fm.t.Helper()
	fm.t.Fatalf("%s step %d: "+format, append([]any{fm.name, step}, args...)...)
}

// apply runs op with offset at and length n (data is derived from step).
func (fm *fileModel) apply(step int, op modelOp, at, n int) {
	fm.t.Helper()
	data := func() []byte {
		start := step * 131 % 4096
		return slices.Clone(modelData[start : start+n])
	}
	switch op {
	case opWriteAt:
		p := data()
		if _, err := fm.f.WriteAt(p, int64(at)); err != nil {
			fm.fail(step, "WriteAt: %v", err)
		}
		fm.cur = modelWriteAt(fm.cur, p, at)
	case opWrite:
		if fm.off > modelSpan {
			fm.apply(step, opReopen, 0, 0)
			return
		}
		p := data()
		if _, err := fm.f.Write(p); err != nil {
			fm.fail(step, "Write: %v", err)
		}
		fm.cur = modelWriteAt(fm.cur, p, int(fm.off))
		fm.off += int64(n)
	case opTruncate:
		if err := fm.f.Truncate(int64(at)); err != nil {
			fm.fail(step, "Truncate: %v", err)
		}
		if at < len(fm.cur) {
			fm.cur = fm.cur[:at]
		} else {
			fm.cur = append(fm.cur, make([]byte, at-len(fm.cur))...)
		}
	case opSync:
		if err := fm.f.Sync(); err != nil {
			fm.fail(step, "Sync: %v", err)
		}
		fm.durable = slices.Clone(fm.cur)
	case opReadAt:
		buf := make([]byte, n)
		got, err := fm.f.ReadAt(buf, int64(at))
		var want []byte
		if at < len(fm.cur) {
			want = fm.cur[at:min(len(fm.cur), at+n)]
		}
		if !bytes.Equal(buf[:got], want) || (got < n && err != io.EOF) {
			fm.fail(step, "ReadAt(%d, %d) = %d, %v; differs from the model", at, n, got, err)
		}
	case opCrash, opCrashClone:
		if op == opCrash {
			fm.m.Crash()
		} else {
			fm.m = fm.m.CrashClone()
		}
		fm.cur = slices.Clone(fm.durable)
		fm.apply(step, opReopen, 0, 0)
		fm.check(step)
	case opReopen:
		fm.f.Close()
		f, err := fm.m.OpenReadWrite("/f")
		if err != nil {
			fm.fail(step, "reopen: %v", err)
		}
		fm.f, fm.off = f, 0
	}
	if step%8 == 7 {
		fm.check(step)
	}
}

// check compares the current contents with the model. It runs every few
// steps (ReadAt ops check ranges in between) and after every crash, where it
// checks the durable contents.
func (fm *fileModel) check(step int) {
	fm.t.Helper()
	fi, err := fm.f.Stat()
	if err != nil || fi.Size() != int64(len(fm.cur)) {
		fm.fail(step, "Stat = %v, %v; want size %d", fi, err, len(fm.cur))
	}
	fm.scratch = slices.Grow(fm.scratch[:0], len(fm.cur))[:len(fm.cur)]
	n, err := fm.f.ReadAt(fm.scratch, 0)
	if n != len(fm.cur) || (err != nil && err != io.EOF) || !bytes.Equal(fm.scratch, fm.cur) {
		fm.fail(step, "contents differ from the model (%d bytes, %v)", n, err)
	}
}

// modelData is where the model's writes take their bytes from.
var modelData = func() []byte {
	b := make([]byte, 4096+256*32)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}()

func modelWriteAt(cur, p []byte, at int) []byte {
	if end := at + len(p); end > len(cur) {
		cur = append(cur, make([]byte, end-len(cur))...)
	}
	copy(cur[at:], p)
	return cur
}

// TestMemFileModel runs random writes, truncates, syncs, reads and crashes
// on one file against the model. A failure names its seed; replay it with
// runFileModel. STRATA_SOAK=1 runs many more seeds.
func TestMemFileModel(t *testing.T) {
	seeds := uint64(50)
	if os.Getenv("STRATA_SOAK") != "" {
		seeds = 20000
	}
	for seed := range seeds {
		runFileModel(t, seed, 300)
	}
}

func runFileModel(t *testing.T, seed uint64, steps int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	fm := newFileModel(t, fmt.Sprintf("seed %d", seed))
	// Offsets favour the pages next to the chunk boundary.
	offset := func() int {
		if rng.IntN(2) == 0 {
			return memChunkSize - 2*memPageSize + rng.IntN(4*memPageSize)
		}
		return rng.IntN(modelSpan)
	}
	weights := []modelOp{opWriteAt, opWriteAt, opWriteAt, opWrite, opWrite, opTruncate,
		opSync, opSync, opReadAt, opCrash, opCrashClone}
	for step := range steps {
		op := weights[rng.IntN(len(weights))]
		fm.apply(step, op, offset(), rng.IntN(2*memPageSize+10))
	}
}

// FuzzMemFile decodes operations from the input, four bytes each: the
// operation, a 16-bit offset unit and a length unit.
func FuzzMemFile(f *testing.F) {
	f.Add([]byte{byte(opWrite), 0, 0, 10, byte(opSync), 0, 0, 0, byte(opWrite), 0, 0, 20, byte(opCrash), 0, 0, 0})
	f.Add([]byte{byte(opWriteAt), 0x7f, 0xf0, 255, byte(opSync), 0, 0, 0, byte(opTruncate), 0x10, 0, 0,
		byte(opWriteAt), 0x7e, 0, 200, byte(opCrashClone), 0, 0, 0, byte(opReadAt), 0x7f, 0, 100})
	f.Add([]byte{byte(opTruncate), 0xa0, 0, 0, byte(opSync), 0, 0, 0, byte(opTruncate), 0, 1, 0,
		byte(opWrite), 0, 0, 255, byte(opCrash), 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 4*500 {
			in = in[:4*500]
		}
		fm := newFileModel(t, "fuzz input")
		for step := 0; step+4 <= len(in); step += 4 {
			op := modelOp(in[step]) % numModelOps
			at := int(binary.BigEndian.Uint16(in[step+1:])) * 2 % modelSpan
			fm.apply(step/4, op, at, int(in[step+3])*32)
		}
	})
}
