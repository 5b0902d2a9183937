package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// errHelp is returned when --help was asked for and printed: exit code 0.
var errHelp = errors.New("help printed")

// errNotYet marks a feature of the command line that is not built yet.
var errNotYet = errors.New("not available yet")

// newFlags returns a flag set for a subcommand whose --help prints synopsis,
// description and the flags to stdout. Flags take one or two dashes, as with
// the flag package. A mistake prints nothing here: parseInterleaved returns
// it and exitCode prints one line and the --help hint to stderr.
func newFlags(e *env, name, synopsis, description string) *flag.FlagSet {
	fs := flag.NewFlagSet("strata "+name, flag.ContinueOnError)
	// The flag package calls Usage on every parse error as well as on
	// --help: the help goes to a buffer that parseInterleaved copies to
	// stdout only for --help.
	help := &helpBuffer{w: e.stdout}
	fs.SetOutput(help)
	fs.Usage = func() {
		help.Reset()
		w := help
		fmt.Fprintf(w, "Usage: strata %s %s\n\n", name, synopsis)
		fmt.Fprintln(w, strings.TrimSpace(description))
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Flags:")
		printFlags(w, fs)
	}
	return fs
}

// printFlags lists the flags as --name VALUE, with their usage and a
// default that says something (not "", 0, false or -1).
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		usage = strings.TrimPrefix(usage, name+": ")
		line := "  --" + f.Name
		if len(f.Name) == 1 {
			line = "  -" + f.Name
		}
		if name != "" {
			line += " " + name
		}
		fmt.Fprintln(w, line)
		fmt.Fprintf(w, "        %s", strings.ReplaceAll(usage, "\n", "\n        "))
		switch f.DefValue {
		case "", "0", "false", "-1", "[]":
		default:
			fmt.Fprintf(w, " (default \"%s\")", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}

// parseInterleaved parses args allowing flags after positional arguments
// ("strata dump a.log --print-data-log"), which the flag package alone stops
// at. "--" ends the flags. It returns the positional arguments.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				if h, ok := fs.Output().(*helpBuffer); ok {
					h.flush()
				}
				return nil, errHelp
			}
			return nil, flagError(fs, err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// fs.Parse stops at the first non-flag, or after "--".
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// flagError is the one line a parse error prints: an unknown flag as the
// user typed it (two dashes, one for a one-letter flag) and the defined
// flag it is most likely a typo of.
func flagError(fs *flag.FlagSet, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return usagef("%v", err)
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) {
		if len(f.Name) > 1 {
			names = append(names, f.Name)
		}
	})
	best := closest(name, names)
	if best == "" {
		return usagef("unknown flag %s", dashed(name))
	}
	return usagef("unknown flag %s (did you mean --%s?)", dashed(name), best)
}

// closest returns the name of names that typed is most likely a typo of:
// the nearest at most two edits away, the first of equals; "" if none.
func closest(typed string, names []string) string {
	best, bestDist := "", 3
	for _, n := range names {
		if d := editDistance(typed, n); d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

// dashed is a flag's name as typed: -x for one letter, --name otherwise.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// helpBuffer holds what a flag set printed until parseInterleaved knows
// whether it was asked for (--help: flushed to w) or a parse error's
// (dropped: exitCode prints the error instead).
type helpBuffer struct {
	bytes.Buffer
	w io.Writer
}

func (h *helpBuffer) flush() {
	h.WriteTo(h.w)
	h.Reset()
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// target is where a command finds its topics: a data dir, or a Kafka
// address.
type target struct {
	dataDir   string
	bootstrap string
	sec       clientSecurity // TLS and SASL to --bootstrap-server
}

func (t *target) register(fs *flag.FlagSet) {
	fs.StringVar(&t.dataDir, "data-dir", "", "`DIR`: the data directory to work on directly (the broker must not be running on it)")
	fs.StringVar(&t.bootstrap, "bootstrap-server", "", "`ADDR`: a Kafka-protocol broker (host:port, or several, comma-separated): strata serve, Apache Kafka, ...")
	t.sec.register(fs)
}

// seeds returns the addresses of --bootstrap-server.
func (t *target) seeds() []string { return strings.Split(t.bootstrap, ",") }

// check returns the error of a target that cannot be used.
func (t *target) check() error {
	switch {
	case t.bootstrap != "" && t.dataDir != "":
		return usagef("give --data-dir or --bootstrap-server, not both")
	case t.bootstrap == "" && t.dataDir == "":
		return usagef("--data-dir or --bootstrap-server is required")
	}
	return nil
}
