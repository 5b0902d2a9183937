package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/strata-log/strata/log"
)

// sendToMaxBytes is what each SendTo may send: a fetch's default
// per-partition maximum (max.partition.fetch.bytes, 1 MiB).
const sendToMaxBytes = 1 << 20

// zeroCopyData is one partition filled with 1 KiB records, shared by the
// zero-copy systems: Strata sends it with SendTo, the others send its
// segment file.
type zeroCopyData struct {
	dir     string
	passes  int // how many times each run sends the whole partition
	broker  *log.Broker
	part    *log.Partition
	segment *os.File // the partition's only segment file, opened for reading
	size    int64
	records int64
}

func zeroCopyVariants(e *env) []variant {
	var zd zeroCopyData
	const durability = "– (reads page-cached segment bytes)"
	return []variant{{
		label: "zero copy: 1 KiB records over 127.0.0.1 TCP", limit: limitSendfile, cpuNote: cpuPerGB,
		setup: func(e *env) error {
			zd.passes = e.pick(8, 4, 1)
			return zd.fill(e, int64(e.pick(256, 128, 2))<<20)
		},
		teardown: zd.close,
		systems: []system{
			{name: "strata Partition.SendTo (sendfile)", baseline: true, durability: durability,
				run: func(e *env) (sample, error) { return zd.send(zd.sendTo) }},
			{name: "raw sendfile of the segment file", durability: durability,
				run: func(e *env) (sample, error) { return zd.send(zd.rawSendfile) }},
			{name: "user-space copy (pread + write, 1 MiB)", durability: durability,
				run: func(e *env) (sample, error) { return zd.send(zd.userCopy) }},
		},
	}}
}

// fill appends 1 KiB records in batches of 1000 until the segment holds
// about size bytes.
func (zd *zeroCopyData) fill(e *env, size int64) error {
	var err error
	if zd.dir, err = e.tempDir("zerocopy-"); err != nil {
		return err
	}
	if zd.broker, err = log.Open(zd.dir, log.Config{}); err != nil {
		return err
	}
	t, err := zd.broker.CreateTopic("zc", log.TopicConfig{SegmentBytes: 2 << 30})
	if err != nil {
		return err
	}
	if zd.part, err = t.Partition(0); err != nil {
		return err
	}
	value := payload(1024)
	recs := make([]log.Record, 1000)
	for i := range recs {
		recs[i].Value = value
	}
	for zd.part.Size() < size {
		if _, err := zd.part.Append(recs...); err != nil {
			return err
		}
	}
	if zd.part.Segments() != 1 {
		return fmt.Errorf("partition has %d segments, want 1", zd.part.Segments())
	}
	zd.size, zd.records = zd.part.Size(), zd.part.EndOffset()
	zd.segment, err = os.Open(filepath.Join(zd.dir, "zc-0", fmt.Sprintf("%020d.log", 0)))
	return err
}

func (zd *zeroCopyData) close() {
	if zd.segment != nil {
		zd.segment.Close()
	}
	if zd.broker != nil {
		zd.broker.Close()
	}
	if zd.dir != "" {
		os.RemoveAll(zd.dir)
	}
}

// send runs sender passes times over a fresh loopback connection, measuring the
// CPU time of the sender's OS thread (sendfile's or write's kernel work
// included; the receiver's not).
func (zd *zeroCopyData) send(sender func(*loopback) (int64, error)) (sample, error) {
	lb, err := newLoopback()
	if err != nil {
		return sample{}, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0, start := threadCPU(), time.Now()
	var sent int64
	for range zd.passes {
		n, err := sender(lb)
		sent += n
		if err != nil {
			lb.abort()
			return sample{}, err
		}
	}
	cpu := threadCPU() - cpu0
	got, err := lb.finish()
	el := time.Since(start)
	if err != nil {
		return sample{}, err
	}
	want := zd.size * int64(zd.passes)
	if sent != want || got != want {
		return sample{}, fmt.Errorf("sent %d and received %d bytes of %d", sent, got, want)
	}
	return sample{Records: zd.records * int64(zd.passes), Bytes: want, Elapsed: el, CPU: cpu}, nil
}

func (zd *zeroCopyData) sendTo(lb *loopback) (int64, error) {
	var total int64
	for off := int64(0); off < zd.records; {
		n, next, err := zd.part.SendTo(lb.conn, off, sendToMaxBytes)
		if err != nil {
			return total, err
		}
		if next <= off {
			return total, fmt.Errorf("SendTo at %d made no progress", off)
		}
		total += n
		off = next
	}
	return total, nil
}

func (zd *zeroCopyData) rawSendfile(lb *loopback) (int64, error) {
	return rawSendfile(lb.conn, zd.segment, 0, zd.size)
}

func (zd *zeroCopyData) userCopy(lb *loopback) (int64, error) {
	return userCopy(lb.conn, zd.segment, 0, zd.size)
}
