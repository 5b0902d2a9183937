package main

import (
	"testing"
	"time"
)

// BenchmarkKgoServer runs the server case's kgo produce and consume (100 B
// records, quick size: 200 k produced, 100 k consumed by 5 consumers in
// turn) against Strata's server, kfake in memory and the null server
// (nullkafka.go: answers without storing), with the case's 64 MiB live
// heap, in a go test benchmark: for a CPU profile of one system at a time,
// which shows how the process's time splits between kgo and the server.
// One op is one run of the case, server start and stop included;
// records/s and cpu-µs/record are those of the timed part, as the bench
// program measures them.
//
//	go test -run '^$' -bench 'KgoServer/produce/strata' -benchtime 5x -cpuprofile strata.prof
//	go tool pprof -top strata.prof
func BenchmarkKgoServer(b *testing.B) {
	servers := []struct {
		name  string
		start func(*env) (*kafkaServer, error)
	}{{"strata", strataServer}, {"kfake", kfakeMemServer}, {"null", nullServer}}
	for _, c := range []string{"produce", "consume"} {
		for _, srv := range servers {
			b.Run(c+"/"+srv.name, func(b *testing.B) {
				e := &env{mode: modeQuick, runs: 1, root: b.TempDir(), liveHeapMiB: 64}
				appHeap = newLiveHeap(liveHeapBytes(e))
				defer func() { appHeap = nil }()
				var sum sample
				for b.Loop() {
					var s sample
					var err error
					if c == "produce" {
						s, err = kgoProduceServer(e, srv.start, serverRecordSize, serverRecords(e))
					} else {
						s, err = kgoConsumeServer(e, srv.start, serverRecordSize, serverConsumeRecords(e))
					}
					if err != nil {
						b.Fatal(err)
					}
					sum.Records += s.Records
					sum.Elapsed += s.Elapsed
					sum.CPU += s.CPU
				}
				b.ReportMetric(float64(sum.Records)/sum.Elapsed.Seconds(), "records/s")
				b.ReportMetric(float64(sum.CPU.Nanoseconds())/1e3/float64(sum.Records), "cpu-µs/record")
			})
		}
	}
}

// BenchmarkKgoLatency runs the latency case's round trips (one 100 B
// record produced with kgo's ProduceSync, then consumed, quick size: 5000
// timed after 500 untimed) against Strata's server and kfake in memory,
// with the case's 64 MiB live heap: for a CPU profile, or a count of the
// process's system calls per round trip, of one system at a time. Besides
// the round trip's p50 and p99 it reports those of its produce part alone
// (ack-p50-µs, ack-p99-µs: ProduceSync until acknowledged).
//
//	go test -c -o lat.test && strace -f -c -o strata.strace ./lat.test -test.run '^$' -test.bench 'KgoLatency/strata' -test.benchtime 1x
//	perf stat -e 'syscalls:sys_enter_futex,syscalls:sys_enter_read,context-switches' ./lat.test ...   # counts without strace's slowdown
func BenchmarkKgoLatency(b *testing.B) {
	servers := []struct {
		name  string
		start func(*env) (*kafkaServer, error)
	}{{"strata", strataServer}, {"kfake", kfakeMemServer}}
	for _, srv := range servers {
		b.Run(srv.name, func(b *testing.B) {
			e := &env{mode: modeQuick, runs: 1, root: b.TempDir(), liveHeapMiB: 64}
			appHeap = newLiveHeap(liveHeapBytes(e))
			defer func() { appHeap = nil }()
			var sum sample
			var p50, p99, ack50, ack99 time.Duration
			for b.Loop() {
				s, err := kgoLatency(e, srv.start, serverRecordSize, e.pick(20_000, 5_000, 20))
				if err != nil {
					b.Fatal(err)
				}
				sum.Records += s.Records
				sum.Elapsed += s.Elapsed
				sum.CPU += s.CPU
				p50, p99 = max(p50, s.P50), max(p99, s.P99)
				ack50, ack99 = max(ack50, s.AckP50), max(ack99, s.AckP99)
			}
			b.ReportMetric(float64(sum.CPU.Nanoseconds())/1e3/float64(sum.Records), "cpu-µs/rt")
			b.ReportMetric(float64(p50.Nanoseconds())/1e3, "p50-µs")
			b.ReportMetric(float64(p99.Nanoseconds())/1e3, "p99-µs")
			b.ReportMetric(float64(ack50.Nanoseconds())/1e3, "ack-p50-µs")
			b.ReportMetric(float64(ack99.Nanoseconds())/1e3, "ack-p99-µs")
		})
	}
}
