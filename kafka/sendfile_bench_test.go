package kafka

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The fetch-serving benchmark runs its client in another process (this
// test binary, started again with benchClientEnv set), so that the
// benchmark process's CPU time (getrusage) is the server's alone.
const (
	benchClientEnv = "STRATA_KAFKA_BENCH_CLIENT" // the server's address
	benchModeEnv   = "STRATA_KAFKA_BENCH_MODE"   // "kafka" or "raw"
	benchBytesEnv  = "STRATA_KAFKA_BENCH_BYTES"  // how many record bytes to read
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(benchClientEnv); addr != "" {
		os.Exit(benchClient(addr))
	}
	os.Exit(m.Run())
}

// Shape of the served data: benchParts partitions of benchPartBytes, read
// 1 MiB per partition per fetch, as a Kafka consumer does by default.
const (
	benchParts     = 8
	benchPartBytes = 16 << 20
	benchFetchPart = 1 << 20
)

// benchClient is the client process: it reads record bytes until it has
// the number asked for, then prints how many and in how long.
func benchClient(addr string) int {
	want, _ := strconv.ParseInt(os.Getenv(benchBytesEnv), 10, 64)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer nc.Close()
	start := time.Now()
	var got int64
	if os.Getenv(benchModeEnv) == "raw" {
		buf := make([]byte, 1<<20)
		for got < want {
			n, err := nc.Read(buf)
			got += int64(n)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
	} else if got, err = benchFetchLoop(nc, want); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%d %d\n", got, time.Since(start).Nanoseconds())
	return 0
}

// benchFetchLoop fetches every partition from where the last fetch ended
// (wrapping at the end) until want record bytes came.
func benchFetchLoop(nc net.Conn, want int64) (int64, error) {
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench"))
	r := bufio.NewReaderSize(nc, 1<<20)
	offsets := make([]int64, benchParts)
	var got int64
	var buf []byte
	for corr := int32(1); got < want; corr++ {
		req := multiFetch(12, "t", benchParts, benchParts*benchFetchPart)
		req.Topics[0].Partitions = req.Topics[0].Partitions[:0]
		for p := range benchParts {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = int32(p), offsets[p], benchFetchPart
			rp.CurrentLeaderEpoch, rp.LogStartOffset = -1, -1
			req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
		}
		if _, err := nc.Write(f.AppendRequest(nil, req, corr)); err != nil {
			return got, err
		}
		frame, _, err := readFrame(r, buf, 1<<30, nil)
		if err != nil {
			return got, err
		}
		buf = frame
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		if err := resp.ReadFrom(frame[5:]); err != nil {
			return got, err
		}
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != errNone {
				return got, fmt.Errorf("partition %d: error %d", p.Partition, p.ErrorCode)
			}
			got += int64(len(p.RecordBatches))
			next := offsets[p.Partition]
			for b := p.RecordBatches; len(b) >= 61; {
				n := int(binary.BigEndian.Uint32(b[8:])) + 12
				next = int64(binary.BigEndian.Uint64(b)) + int64(binary.BigEndian.Uint32(b[23:])) + 1
				b = b[min(n, len(b)):]
			}
			if next >= p.HighWatermark {
				next = 0
			}
			offsets[p.Partition] = next
		}
	}
	return got, nil
}

// benchData writes the served partitions, on disk, and returns the
// broker.
func benchData(b *testing.B) *log.Broker {
	br := logtest.New(b, logtest.TopicWithConfig("t", log.TopicConfig{Partitions: benchParts, SegmentBytes: 1 << 30, MaxIndexBytes: 1 << 20}))
	val := make([]byte, 1000)
	recs := make([]log.Record, 1000)
	for i := range recs {
		recs[i].Value = val
	}
	for p := range benchParts {
		part, err := br.Partition("t", p)
		if err != nil {
			b.Fatal(err)
		}
		for part.Size() < benchPartBytes {
			if _, err := part.Append(recs...); err != nil {
				b.Fatal(err)
			}
		}
		if err := part.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	return br
}

// cpuTime is the process's user and system time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runBenchClient runs the client process for want bytes against addr and
// reports the server's CPU per GiB, the client's, and the throughput the
// client saw.
func runBenchClient(b *testing.B, addr, mode string, want int64) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), benchClientEnv+"="+addr, benchModeEnv+"="+mode, benchBytesEnv+"="+strconv.FormatInt(want, 10))
	cmd.Stderr = os.Stderr
	before := cpuTime()
	out, err := cmd.Output()
	server := cpuTime() - before
	if err != nil {
		b.Fatalf("client: %v", err)
	}
	var got, nanos int64
	if _, err := fmt.Sscan(strings.TrimSpace(string(out)), &got, &nanos); err != nil {
		b.Fatalf("client said %q: %v", out, err)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	client := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	gib := float64(got) / (1 << 30)
	b.ReportMetric(server.Seconds()*1000/gib, "srv-cpu-ms/GiB")
	b.ReportMetric(client.Seconds()*1000/gib, "cli-cpu-ms/GiB")
	b.ReportMetric(float64(got)/1e6/(float64(nanos)/1e9), "MB/s")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkServeFetch measures what serving fetches costs the server: 8
// partitions of 16 MiB on disk (in the page cache), fetched 1 MiB per
// partition per request by a client in another process, one request in
// flight, b.N MiB in all. sendfile is the server as it is; copy the same
// server with copying forced (records read into memory and written with
// writev); raw-sendfile is the limit: the segment files sent over loopback
// with sendfile and nothing else. Run with -benchtime=2048x (2 GiB).
func BenchmarkServeFetch(b *testing.B) {
	br := benchData(b)
	for _, mode := range []string{"sendfile", "copy"} {
		b.Run(mode, func(b *testing.B) {
			s, err := Listen("127.0.0.1:0", br, Config{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if mode == "copy" {
				s.sendfileMin = math.MaxInt64
			}
			runBenchClient(b, s.Addr(), "kafka", int64(b.N)<<20)
		})
	}
	b.Run("raw-sendfile", func(b *testing.B) {
		var files []string
		for p := range benchParts {
			logs, _ := filepath.Glob(filepath.Join(br.Dir(), fmt.Sprintf("t-%d", p), "*.log"))
			files = append(files, logs...)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer ln.Close()
		done := make(chan error, 1)
		go func() {
			nc, err := ln.Accept()
			if err != nil {
				done <- err
				return
			}
			defer nc.Close()
			for i := 0; ; i++ {
				f, err := os.Open(files[i%len(files)])
				if err != nil {
					done <- err
					return
				}
				_, err = io.Copy(nc, f) // (*net.TCPConn).ReadFrom(*os.File): sendfile
				f.Close()
				if err != nil {
					done <- nil // the client has what it wanted and left
					return
				}
			}
		}()
		runBenchClient(b, ln.Addr().String(), "raw", int64(b.N)<<20)
		ln.Close()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	})
}
