package main

import (
	"testing"
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
