package main

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDump feeds arbitrary .log, .index and .timeindex bytes to dump's
// readers and checks: whatever a disk holds, dump never panics, and it
// reports a problem for every batch it does not print as valid.
//
//	go test -run '^$' -fuzz FuzzDump ./cmd/strata
func FuzzDump(f *testing.F) {
	for _, base := range []string{seg0, seg1} {
		log, _ := os.ReadFile(base + ".log")
		oi, _ := os.ReadFile(base + ".index")
		ti, _ := os.ReadFile(base + ".timeindex")
		f.Add(log, oi, ti)
	}
	crafted, _ := os.ReadFile("testdata/segments/crafted/00000000000000000000.log")
	f.Add(crafted, []byte{0, 0, 0, 1, 0, 0, 0, 0}, []byte{})
	f.Add([]byte{}, []byte{1, 2, 3}, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, logBytes, oiBytes, tiBytes []byte) {
		dir := t.TempDir()
		base := filepath.Join(dir, "00000000000000000007")
		for ext, b := range map[string][]byte{".log": logBytes, ".index": oiBytes, ".timeindex": tiBytes} {
			if err := os.WriteFile(base+ext, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		w := bufio.NewWriter(io.Discard)
		for _, ext := range []string{".log", ".index", ".timeindex"} {
			if _, err := dumpFile(w, base+ext, dumpOpts{deep: true, data: true}); err != nil {
				t.Fatalf("%s: %v", ext, err)
			}
		}
		v := &verifier{out: io.Discard, dir: dir, jobs: 2}
		if err := v.run(); err != nil {
			t.Fatalf("verify: %v", err)
		}
	})
}
