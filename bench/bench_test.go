package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary be a bare run's child (bare.go), as the
// program is.
func TestMain(m *testing.M) {
	if child, err := runChild(); child {
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// tinyEnv is an env whose runs are as small as they can be and still do
// every step: the smoke tests check that each case works, not how fast.
func tinyEnv(t *testing.T, runs int) *env {
	return &env{mode: modeTiny, runs: runs, root: t.TempDir()}
}

// TestCases runs every case at a tiny size and checks that each system
// did its work in every run, that Strata is the baseline, and that every
// server, cluster, goroutine and directory is gone afterwards.
func TestCases(t *testing.T) {
	for _, c := range allCases() {
		t.Run(c.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			e := tinyEnv(t, 1)
			vs := c.variants(e)
			if len(vs) == 0 {
				t.Fatal("no variants")
			}
			for _, v := range vs {
				rep := &report{}
				rep.addRows(measureVariant(e, c.name, v))
				if len(rep.Results) != len(v.systems) {
					t.Fatalf("%s: %d rows for %d systems", v.label, len(rep.Results), len(v.systems))
				}
				baselines := 0
				for _, r := range rep.Results {
					if r.Error != "" {
						t.Errorf("%s / %s: %s", v.label, r.System, r.Error)
						continue
					}
					if len(r.Samples) != e.runs {
						t.Errorf("%s / %s: %d samples, want %d", v.label, r.System, len(r.Samples), e.runs)
					}
					t.Logf("%s / %s: %s records/s", v.label, r.System, fmtStat(r.RecordsPerSec))
					if r.RecordsPerSec.Median <= 0 {
						t.Errorf("%s / %s: records/s %v", v.label, r.System, r.RecordsPerSec)
					}
					if r.baseline {
						baselines++
						if r.RatioStrata != 1 {
							t.Errorf("%s / %s: baseline's ratio to Strata %v", v.label, r.System, r.RatioStrata)
						}
					}
				}
				if baselines != 1 {
					t.Errorf("%s: %d baseline rows, want 1", v.label, baselines)
				}
			}
			assertEmptyDir(t, e.root)
			assertGoroutines(t, before)
		})
	}
}

func TestLimits(t *testing.T) {
	e := tinyEnv(t, 3)
	ls, err := measureLimits(e)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, l := range ls {
		keys[l.Key] = true
		if len(l.Samples) != 3 || l.MBPerSec.Median <= 0 || l.MBPerSec.Min > l.MBPerSec.Median || l.MBPerSec.Median > l.MBPerSec.Max {
			t.Errorf("limit %s: %d samples, MB/s %+v", l.Key, len(l.Samples), l.MBPerSec)
		}
	}
	for _, l := range caseLimits() {
		keys[l.key] = true // measured with their variants (TestCaseLimits)
	}
	for _, c := range allCases() {
		for _, v := range c.variants(e) {
			if v.limit != "" && !keys[v.limit] {
				t.Errorf("%s compares with limit %q, which is not measured", v.label, v.limit)
			}
		}
	}
	assertEmptyDir(t, e.root)
}

// TestCaseLimits measures the fixture and server cases' variants with
// their limits: each limit gets a sample per run and its own entry, not a
// row, and every row of a variant compared with it gets a ratio to it.
func TestCaseLimits(t *testing.T) {
	for _, name := range []string{"fixture", "server"} {
		cases, err := selectCases(name)
		if err != nil {
			t.Fatal(err)
		}
		e := tinyEnv(t, 3)
		e.systems = []string{"strata kafkatest", "strata server + kgo, no compression", "kfake + kgo"} // and the limits, always
		rep := &report{}
		for _, v := range cases[0].variants(e) {
			if err := rep.measureVariantAndLimit(e, name, v); err != nil {
				t.Fatal(err)
			}
		}
		for _, l := range rep.Limits {
			st := l.MBPerSec
			if l.PerOp {
				st = l.OpsPerSec
			}
			if len(l.Samples) != 3 || st.Median <= 0 {
				t.Errorf("limit %s: %d samples, MB/s %+v, ops/s %+v", l.Key, len(l.Samples), l.MBPerSec, l.OpsPerSec)
			}
		}
		for _, r := range rep.Results {
			if strings.HasPrefix(r.System, "limit") {
				t.Errorf("the limit is a row: %s", r.System)
			}
			if r.Limit != "" && rep.limit(r.Limit) != nil && r.RatioLimit <= 0 {
				t.Errorf("%s / %s: no ratio to %s", r.Variant, r.System, r.Limit)
			}
		}
		want := map[string]int{"fixture": 1, "server": 2}[name]
		if len(rep.Limits) != want || len(rep.Results) == 0 {
			t.Errorf("%s: %d limits, %d rows", name, len(rep.Limits), len(rep.Results))
		}
		assertEmptyDir(t, e.root)
	}
}

// TestReport runs the whole pipeline on one cheap case and checks the
// Markdown table and the JSON.
func TestReport(t *testing.T) {
	e := tinyEnv(t, 3)
	cases, err := selectCases("fixture")
	if err != nil {
		t.Fatal(err)
	}
	started := false
	rep, err := measure(e, cases, func() error { started = true; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !started {
		t.Error("measure did not call casesStart")
	}
	var md bytes.Buffer
	writeMarkdown(&md, rep)
	out := md.String()
	for _, want := range []string{
		"| case | system | records/s | MB/s | × Strata | × limit | CPU | durability |",
		"| fixture start + stop, 1 topic | strata logtest.New(InMemory) + Cleanup |",
		"| fixture start + stop, 1 topic | kfake.NewCluster(1 broker) + Close |",
		"| Kafka fixture start + stop, 1 topic | strata kafkatest.New + Cleanup |",
		"| sequential 1 MiB writes to the page cache |",
		"| a bare listener on 127.0.0.1:0 + accept goroutine, started and stopped |",
		"× listener |",
		"| 1.00× |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	path := filepath.Join(t.TempDir(), "results.json")
	if err := writeJSON(path, rep); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var back report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	// The fixture case's five rows; the machine's four limits and the
	// fixture's listener.
	if len(back.Results) != 5 || len(back.Limits) != 5 || len(back.Results[0].Samples) != 3 {
		t.Errorf("JSON has %d results, %d limits", len(back.Results), len(back.Limits))
	}
	if back.Results[0].RecordsPerSec != rep.Results[0].RecordsPerSec {
		t.Errorf("JSON records/s %+v, table %+v", back.Results[0].RecordsPerSec, rep.Results[0].RecordsPerSec)
	}
}

func TestFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-runs", "2"},
		{"-case", "nosuchcase"},
		{"-nosuchflag"},
	} {
		var out bytes.Buffer
		if err := run(append(args, "-json", ""), &out); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
		if out.Len() != 0 {
			t.Errorf("run(%q) printed %q", args, out.String())
		}
	}
}

func TestStat(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want stat
	}{
		{nil, stat{}},
		{[]float64{5}, stat{5, 5, 5}},
		{[]float64{3, 1, 2}, stat{2, 1, 3}},
		{[]float64{4, 1, 3, 2}, stat{2.5, 1, 4}},
	} {
		if got := statOf(tc.in); got != tc.want {
			t.Errorf("statOf(%v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
	for in, want := range map[float64]string{0: "0.00", 1.234: "1.23", 12.34: "12.3", 123.4: "123", 1234: "1.23k", 2.5e6: "2.50M", 3e9: "3.00G"} {
		if got := si(in); got != want {
			t.Errorf("si(%v) = %q, want %q", in, got, want)
		}
	}
}

func assertEmptyDir(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left behind in the temp root: %s", e.Name())
	}
}

// assertGoroutines waits (boundedly) for the goroutine count to fall back
// to what it was: every server, cluster and client was shut down.
func assertGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= before {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines, %d before:\n%s", n, before, buf)
		}
		runtime.Gosched()
		time.Sleep(10 * time.Millisecond)
	}
}
