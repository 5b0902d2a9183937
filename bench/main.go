// Command bench compares Strata with the systems its users would pick
// instead — tidwall/wal, NATS JetStream embedded in-process, franz-go's kfake
// with the kgo client, Go's own timers and NATS's timing wheel — and with the
// machine's own limits, measured in the same run.
//
//	cd bench && go run .                       # every case, full size
//	go run . -quick                            # short version (well under 3 minutes)
//	go run . -case append,timers -runs 5       # some cases, more runs
//	go run . -json results.json                # where the JSON goes
//	go run . -case latency -liveheap 0         # without the application heap (default 64 MiB)
//	go run . -case zerocopy -system strata -cpuprofile strata.prof
//
// It prints a Markdown table (case, system, records/s, MB/s, ratio to Strata,
// ratio to the limit, durability) and writes the same results as JSON. Every
// figure is the median of the runs with the spread (min–max) beside it.
// README.md says what each case measures and what to keep in mind reading
// the numbers.
//
// This is a nested module (its own go.mod, replacing Strata with ../) so
// that none of the peers' dependencies reach Strata's users.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"time"
)

func main() {
	if child, err := runChild(); child {
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fl := flag.NewFlagSet("bench", flag.ContinueOnError)
	quick := fl.Bool("quick", false, "short version: smaller sizes, 3 runs")
	cases := fl.String("case", "", "comma-separated cases to run (default all): "+strings.Join(caseNames(), ","))
	systems := fl.String("system", "", "comma-separated systems to run, by name prefix (default all), e.g. strata")
	runs := fl.Int("runs", 3, "runs of each measurement (at least 3)")
	jsonPath := fl.String("json", "results.json", "write the results as JSON to this file (\"\" for none)")
	dir := fl.String("dir", "", "parent of the temporary data directories (default the system's temp dir)")
	liveHeap := fl.Int("liveheap", 64, "MiB of live heap kept in the process by the cases with a client and a server in one process (0: none)")
	cpuprofile := fl.String("cpuprofile", "", "write a CPU profile of the cases (not the limits) to this file")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if *liveHeap < 0 {
		return fmt.Errorf("-liveheap %d: a size in MiB, 0 or more", *liveHeap)
	}
	if *runs < 3 {
		return fmt.Errorf("-runs %d: at least 3 runs are needed for a median and a spread", *runs)
	}
	mode := modeFull
	if *quick {
		mode = modeQuick
	}
	selected, err := selectCases(*cases)
	if err != nil {
		return err
	}
	root, err := os.MkdirTemp(*dir, "strata-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)

	env := &env{mode: mode, runs: *runs, root: root, systems: splitList(*systems), liveHeapMiB: *liveHeap, log: os.Stderr}
	start := time.Now()
	startProfile := func() error {
		if *cpuprofile == "" {
			return nil
		}
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		return pprof.StartCPUProfile(f)
	}
	defer pprof.StopCPUProfile() // a no-op without a profile; flushes it with one
	rep, err := measure(env, selected, startProfile)
	if err != nil {
		return err
	}
	rep.Command = "go run . " + strings.Join(args, " ")
	rep.Elapsed = time.Since(start).Round(time.Second).String()
	writeMarkdown(out, rep)
	if *jsonPath != "" {
		if err := writeJSON(*jsonPath, rep); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "bench: wrote %s\n", *jsonPath)
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func selectCases(list string) ([]benchCase, error) {
	all := allCases()
	names := splitList(list)
	if len(names) == 0 {
		return all, nil
	}
	var out []benchCase
	for _, n := range names {
		found := false
		for _, c := range all {
			if c.name == n {
				out = append(out, c)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown case %q (cases: %s)", n, strings.Join(caseNames(), ","))
		}
	}
	return out, nil
}

func caseNames() []string {
	var names []string
	for _, c := range allCases() {
		names = append(names, c.name)
	}
	return names
}
