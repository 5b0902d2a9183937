package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// limit is one of the machine's own limits, measured in the same run as
// the cases that are compared with it.
type limit struct {
	Key       string `json:"key"`
	Short     string `json:"short"`
	Name      string `json:"name"`
	What      string `json:"what"`
	MBPerSec  stat   `json:"mb_per_sec"`
	OpsPerSec stat   `json:"ops_per_sec"`
	// PerOp: rows are compared by records/s with OpsPerSec, not by MB/s
	// (a limit that moves no bytes, such as a fixture's start).
	PerOp   bool     `json:"per_op,omitempty"`
	Samples []sample `json:"runs"`
}

// The limits' keys, as variants name them.
const (
	limitPageCache = "pagecache"
	limitMemcpy    = "memcpy"
	limitFsync     = "fsync4k"
	limitSendfile  = "sendfile"
)

func measureLimits(e *env) ([]limit, error) {
	type def struct {
		key, short, name, what string
		run                    func(e *env) (sample, error)
	}
	var fsyncLatencies []float64 // median latency of each fsync run
	defs := []def{
		{limitPageCache, "page cache", "sequential 1 MiB writes to the page cache", "write(2) of 1 MiB buffers to a new file, no fsync; ops = MiB writes", pageCacheWrites},
		{limitMemcpy, "memcpy", "memcpy", "copy() of 64 MiB between two buffers; ops = 64 MiB copies", memcpyLimit},
		{limitFsync, "fsync 4K", "fsync'd 4 KiB appends", "", func(e *env) (sample, error) {
			s, lat, err := fsyncAppends(e)
			fsyncLatencies = append(fsyncLatencies, float64(lat))
			return s, err
		}},
		{limitSendfile, "sendfile", "a file sent over loopback TCP with sendfile", "sendfile(2) of a page-cached file to a 127.0.0.1 socket drained by a reader; ops = files", sendfileLimit},
	}
	var out []limit
	for _, d := range defs {
		l := limit{Key: d.key, Short: d.short, Name: d.name, What: d.what}
		var mb, ops []float64
		for r := range e.runs {
			e.logf("bench: limit %s: run %d of %d", d.key, r+1, e.runs)
			s, err := d.run(e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", d.key, err)
			}
			l.Samples = append(l.Samples, s)
			secs := s.Elapsed.Seconds()
			mb = append(mb, float64(s.Bytes)/secs/1e6)
			ops = append(ops, float64(s.Records)/secs)
		}
		l.MBPerSec, l.OpsPerSec = statOf(mb), statOf(ops)
		if d.key == limitFsync {
			st := statOf(fsyncLatencies)
			l.What = fmt.Sprintf("write(2) of 4 KiB then fsync(2), one after another; median latency %s [%s–%s]",
				time.Duration(st.Median).Round(time.Microsecond), time.Duration(st.Min).Round(time.Microsecond),
				time.Duration(st.Max).Round(time.Microsecond))
		}
		out = append(out, l)
	}
	return out, nil
}

func pageCacheWrites(e *env) (sample, error) {
	dir, err := e.tempDir("pagecache-")
	if err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(dir)
	f, err := os.Create(filepath.Join(dir, "seq"))
	if err != nil {
		return sample{}, err
	}
	defer f.Close()
	buf := payload(1 << 20)
	n := e.pick(2048, 512, 4)
	start := time.Now()
	for range n {
		if _, err := f.Write(buf); err != nil {
			return sample{}, err
		}
	}
	el := time.Since(start)
	return sample{Records: int64(n), Bytes: int64(n) << 20, Elapsed: el}, nil
}

func memcpyLimit(e *env) (sample, error) {
	size := e.pick(64<<20, 64<<20, 1<<20)
	src, dst := payload(size), make([]byte, size)
	copy(dst, src) // fault the pages in
	n := e.pick(64, 32, 2)
	start := time.Now()
	for range n {
		copy(dst, src)
	}
	el := time.Since(start)
	return sample{Records: int64(n), Bytes: int64(n) * int64(size), Elapsed: el}, nil
}

// fsyncAppends appends 4 KiB and fsyncs, one after the other, and returns
// the median latency of one append.
func fsyncAppends(e *env) (sample, time.Duration, error) {
	dir, err := e.tempDir("fsync-")
	if err != nil {
		return sample{}, 0, err
	}
	defer os.RemoveAll(dir)
	f, err := os.Create(filepath.Join(dir, "append"))
	if err != nil {
		return sample{}, 0, err
	}
	defer f.Close()
	buf := payload(4096)
	n := e.pick(1000, 300, 5)
	lats := make([]time.Duration, 0, n)
	start := time.Now()
	for range n {
		t0 := time.Now()
		if _, err := f.Write(buf); err != nil {
			return sample{}, 0, err
		}
		if err := f.Sync(); err != nil {
			return sample{}, 0, err
		}
		lats = append(lats, time.Since(t0))
	}
	el := time.Since(start)
	slices.Sort(lats)
	return sample{Records: int64(n), Bytes: int64(n) * 4096, Elapsed: el}, lats[len(lats)/2], nil
}

func sendfileLimit(e *env) (sample, error) {
	dir, err := e.tempDir("sendfile-")
	if err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(dir)
	size, passes := int64(e.pick(256, 128, 2))<<20, int64(e.pick(8, 4, 1))
	f, err := writeFile(filepath.Join(dir, "file"), size)
	if err != nil {
		return sample{}, err
	}
	defer f.Close()
	lb, err := newLoopback()
	if err != nil {
		return sample{}, err
	}
	start := time.Now()
	for range passes {
		if _, err := rawSendfile(lb.conn, f, 0, size); err != nil {
			lb.abort()
			return sample{}, err
		}
	}
	got, err := lb.finish()
	el := time.Since(start)
	if err != nil {
		return sample{}, err
	}
	if got != size*passes {
		return sample{}, fmt.Errorf("receiver got %d bytes of %d", got, size*passes)
	}
	return sample{Records: passes, Bytes: size * passes, Elapsed: el}, nil
}

// writeFile writes size bytes to a new file (left in the page cache) and
// returns it open for reading.
func writeFile(path string, size int64) (*os.File, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	buf := payload(1 << 20)
	for w := int64(0); w < size; w += int64(len(buf)) {
		if _, err := f.Write(buf[:min(int64(len(buf)), size-w)]); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}
