package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/segment/batch"
)

// txnProduced is a transactional batch of n records of producer pid.
func txnProduced(pid int64, seq int32, n int) []byte {
	var bd batch.Builder
	bd.Reset(1_700_000_000_000)
	bd.SetProducer(pid, 0, seq)
	for range n {
		bd.Append(1_700_000_000_000, nil, []byte("v"), nil)
	}
	b := bytes.Clone(bd.Bytes())
	b[22] |= 0x10 // attributes bit 4: transactional
	batch.SetCRC(b)
	return b
}

// TestDumpTxnIndex: strata dump prints a .txnindex a broker wrote, an
// entry a line, checked against the ABORT markers of the .log; a torn tail
// and an entry without its marker are problems.
func TestDumpTxnIndex(t *testing.T) {
	dir := t.TempDir()
	b, err := log.Open(dir, log.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tp, err := b.CreateTopic("tx", log.TopicConfig{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := tp.Partition(0)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, _, err = p.AppendBatch(txnProduced(7, 0, 2)) // 0-1
	must(err)
	_, _, err = p.AppendBatch(txnProduced(8, 0, 1)) // 2
	must(err)
	_, err = p.AppendMarker(batch.Marker{ProducerID: 7, Timestamp: 1_700_000_000_000}) // 3: abort
	must(err)
	_, err = p.AppendMarker(batch.Marker{ProducerID: 8, Commit: true, Timestamp: 1_700_000_000_000}) // 4: commit
	must(err)
	_, _, err = p.AppendBatch(txnProduced(8, 1, 1)) // 5
	must(err)
	_, err = p.AppendMarker(batch.Marker{ProducerID: 8, Timestamp: 1_700_000_000_000}) // 6: abort
	must(err)
	must(b.Close())

	name := filepath.Join(dir, "tx-0", "00000000000000000000.txnindex")
	out := ok(t, "", "", "dump", name)
	for _, want := range []string{
		"version: 0 producerId: 7 firstOffset: 0 lastOffset: 3 lastStableOffset: 2\n",
		"version: 0 producerId: 8 firstOffset: 5 lastOffset: 6 lastStableOffset: 7\n",
		"2 entries agree with 00000000000000000000.log\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}

	// A torn tail.
	data, err := os.ReadFile(name)
	must(err)
	must(os.WriteFile(name, append(bytes.Clone(data), 0, 0, 0), 0o644))
	if r := strata(t, "", "", "dump", name); r.code != exitProblem || !strings.Contains(r.stdout, "problem: ") || !strings.Contains(r.stdout, "not a multiple") {
		t.Errorf("torn tail: exit %d, stdout %q", r.code, r.stdout)
	}
	// The first entry's last offset moved to the commit marker.
	bad := bytes.Clone(data)
	bad[18+7] = 4
	must(os.WriteFile(name, bad, 0o644))
	if r := strata(t, "", "", "dump", name); r.code != exitProblem || !strings.Contains(r.stdout, "no ABORT marker of it at offset 4") {
		t.Errorf("entry without its marker: exit %d, stdout %q", r.code, r.stdout)
	}
}
