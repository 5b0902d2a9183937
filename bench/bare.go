package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
)

// A bare run measures one system in a process of its own: the program
// re-executes itself with childEnv naming the run, and the child does only
// that (sets up its data, then times the measured part) and prints its
// sample as JSON. So the measured part runs with no heap but its own — none
// of the garbage, live objects and GC pacing that the cases run before it
// leave in the parent — which is what a program that replays its log at
// start-up sees. The child's CPU time is its whole process's.
const childEnv = "STRATA_BENCH_CHILD"

// childArgs is what the parent tells the child.
type childArgs struct {
	Run  string `json:"run"`  // a key of childRuns
	Dir  string `json:"dir"`  // a fresh directory for its data; the parent removes it
	Size int    `json:"size"` // record size
	N    int    `json:"n"`    // records
}

// childRuns are the runs that can be done bare.
var childRuns = map[string]func(a childArgs) (sample, error){
	"replay-strata":            strataReplay,
	"replay-strata-read":       strataReadReplay,
	"replay-strata-readappend": strataReadAppendReplay,
	"replay-wal":               walReplay,
}

// bareRun runs childRuns[run] in a child process and returns its sample.
func bareRun(e *env, run string, size, n int) (sample, error) {
	dir, err := e.tempDir(run + "-")
	if err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(dir)
	exe, err := os.Executable()
	if err != nil {
		return sample{}, err
	}
	args, err := json.Marshal(childArgs{Run: run, Dir: dir, Size: size, N: n})
	if err != nil {
		return sample{}, err
	}
	cmd := exec.Command(exe, "-test.run=^$") // a test binary (the smoke test) must not run its tests
	cmd.Env = append(os.Environ(), childEnv+"="+string(args))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return sample{}, fmt.Errorf("bare run %s: %w: %s", run, err, strings.TrimSpace(stderr.String()))
	}
	var s sample
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		return sample{}, fmt.Errorf("bare run %s: its output %q: %w", run, stdout.String(), err)
	}
	return s, nil
}

// runChild is the child's side: if childEnv is set it does the run, prints
// its sample and reports true (the program then exits).
func runChild() (bool, error) {
	v := os.Getenv(childEnv)
	if v == "" {
		return false, nil
	}
	var a childArgs
	if err := json.Unmarshal([]byte(v), &a); err != nil {
		return true, fmt.Errorf("%s: %w", childEnv, err)
	}
	f := childRuns[a.Run]
	if f == nil {
		return true, fmt.Errorf("%s: unknown run %q", childEnv, a.Run)
	}
	s, err := f(a)
	if err != nil {
		return true, err
	}
	return true, json.NewEncoder(os.Stdout).Encode(s)
}

// settle collects the set-up's garbage and returns the freed memory, so
// that the measured part starts from the process's live heap alone.
func settle() {
	runtime.GC()
	debug.FreeOSMemory()
}
