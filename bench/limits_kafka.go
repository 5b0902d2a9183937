package main

import (
	"fmt"
	"slices"

	"github.com/strata-log/strata/internal/floor"
)

// The limits of the Kafka-protocol cases: what any fixture that listens,
// and any server a kgo client talks to, cannot beat on this machine. Each
// is measured with the variant compared with it, as one more system taking
// turns with the others run by run, so that a noisy minute hits the limit
// and the systems alike; it is then reported as a limit, not a row.
const (
	limitListener   = "listener"
	limitKgoProduce = "kgo-null-produce"
	limitKgoConsume = "kgo-null-consume"
)

// caseLimit is a limit measured with its variant.
type caseLimit struct {
	key, short, name, what string
	// perOp: rows compare their records/s with the limit's ops/s, not
	// MB/s (a limit that moves no bytes, such as a fixture's start).
	perOp bool
	run   func(e *env) (sample, error)
}

// caseLimits are the limits of the fixture and server cases.
func caseLimits() []caseLimit {
	return []caseLimit{
		{key: limitListener, short: "listener", perOp: true,
			name: "a bare listener on 127.0.0.1:0 + accept goroutine, started and stopped",
			what: "net.ListenConfig.Listen (no MPTCP, as kafka.Listen), an accept goroutine, Addr, Close, the goroutine joined, back to back; ops = starts (× limit: starts/s over these)",
			run:  func(e *env) (sample, error) { return repeat(fixtureStarts(e), floor.Listener) }},
		{key: limitKgoProduce, short: "kgo → null",
			name: "kgo producing 100 B records to a server that stores nothing",
			what: "as the kgo produce case, against a Kafka-protocol responder (ApiVersions, Metadata, InitProducerId, Produce acked with counted offsets, records dropped); ops = records",
			run: func(e *env) (sample, error) {
				return kgoProduceServer(e, nullServer, serverRecordSize, serverRecords(e))
			}},
		{key: limitKgoConsume, short: "kgo ← null",
			name: "kgo consuming 100 B records from a server that stores nothing",
			what: "as the kgo consume case (100 k records), against the same responder: Fetch fills each response (up to the partition's max bytes) with copies of the largest batch kgo produced to it, at consecutive offsets from the one asked for; ops = records",
			run: func(e *env) (sample, error) {
				return kgoConsumeServer(e, nullServer, serverRecordSize, serverConsumeRecords(e))
			}},
	}
}

// measureVariantAndLimit measures v and adds its rows; if v is compared
// with a case limit not measured yet, the limit runs as one more system of
// v and is added to the limits.
func (rep *report) measureVariantAndLimit(e *env, caseName string, v variant) error {
	var cl *caseLimit
	for _, l := range caseLimits() {
		if l.key == v.limit && rep.limit(l.key) == nil {
			cl = &l
		}
	}
	if cl == nil {
		rep.addRows(measureVariant(e, caseName, v))
		return nil
	}
	v.systems = append(slices.Clone(v.systems), system{name: "limit: " + cl.name, limit: true, run: cl.run})
	rows := measureVariant(e, caseName, v)
	lr := rows[len(rows)-1]
	if lr.Error != "" {
		return fmt.Errorf("limit %s: %s", cl.key, lr.Error)
	}
	l := limit{Key: cl.key, Short: cl.short, Name: cl.name, What: cl.what, PerOp: cl.perOp, Samples: lr.Samples}
	l.MBPerSec, l.OpsPerSec = lr.MBPerSec, lr.RecordsPerSec
	rep.Limits = append(rep.Limits, l)
	rep.addRows(rows[:len(rows)-1])
	return nil
}
