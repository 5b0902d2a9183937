// Command strata runs and operates Strata: a standalone broker with the
// Kafka listener and Prometheus metrics (serve); topics, producing,
// consuming, consumer groups and throughput tests against any
// Kafka-protocol broker (--bootstrap-server: strata serve, Apache Kafka,
// ...) or on a data dir directly (--data-dir); and the offline tools that
// look inside segment, index and producer snapshot files (dump) and check
// a whole data dir (verify).
//
//	strata serve   --data-dir DIR [--listen 127.0.0.1:9092] [--metrics-addr ADDR]   until SIGINT/SIGTERM
//	strata topics  --bootstrap-server ADDR list | create --topic T --partitions N | describe [--topic T] | delete --topic T
//	strata produce --bootstrap-server ADDR --topic T [--key-separator SEP]    one record per stdin line (kcat: -b ADDR -t T -K SEP)
//	strata consume --bootstrap-server ADDR --topic T [--from-beginning] [--group G] [--max-messages N]   (kcat: -b -t -o -e -G -K)
//	strata perf    produce|consume --bootstrap-server ADDR --topic T [--num-records N] [--record-size B]
//	strata groups  --bootstrap-server ADDR list | describe --group G|--all-groups [--topic T] | delete --group G|--all-groups
//	strata dump    FILE...     .log, .index, .timeindex, .snapshot: batches, records, entries, CRC checks
//	strata verify  DIR         exit 0 when every segment and index checks out, 1 otherwise
//	strata version             also strata --version
//
// Every subcommand has --help. Flags are Kafka's tool flags where Kafka has
// one. Commands given --data-dir instead of --bootstrap-server open the
// data dir with log.Open, so no broker may be running on it.
//
// Exit codes: 0 success (serve: shut down cleanly on SIGINT or SIGTERM); 1
// a problem was found (a CRC failure, a damaged segment) or the command
// failed; 2 bad usage, or a feature that is not available yet; 130 stopped
// by SIGINT or SIGTERM (produce, consume and perf flush what they have and
// close cleanly first).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// Exit codes.
const (
	exitOK      = 0
	exitProblem = 1 // the command failed, or found problems
	exitUsage   = 2 // bad usage, or not available yet
)

// usageError is a mistake in the command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// errProblems says that a command found and printed problems: exit code 1
// with nothing more to print.
var errProblems = errors.New("problems found")

// env is what a command reads and writes: main passes the process's, tests
// their own.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	stderrIsTTY    bool
}

type command struct {
	name    string
	summary string
	run     func(e *env, args []string) error
}

func commands() []command {
	return []command{
		{"dump", "print the batches, records and index entries of segment files, with CRC checks", runDump},
		{"verify", "check every segment and index of a data dir offline", runVerify},
		{"topics", "list, create, describe and delete topics", runTopics},
		{"produce", "append one record per line of stdin to a topic", runProduce},
		{"consume", "print a topic's records", runConsume},
		{"perf", "measure produce or consume throughput and latency", runPerf},
		{"groups", "list, describe, delete and reset or delete the offsets of groups: classic, consumer and share (kafka-consumer-groups.sh)", runGroups},
		{"acls", "add, remove and list ACLs (kafka-acls.sh)", runACLs},
		{"users", "add, change, remove and list SCRAM users (kafka-configs.sh --entity-type users)", runUsers},
		{"quorum", "describe and change the controller quorum's voters (kafka-metadata-quorum.sh)", runQuorum},
		{"leader-election", "elect partition leaders: preferred, or unclean (kafka-leader-election.sh)", runLeaderElection},
		{"reassign", "move partitions between brokers (kafka-reassign-partitions.sh)", runReassign},
		{"quotas", "alter and describe client quotas (kafka-configs.sh --entity-type users/clients)", runQuotas},
		{"transactions", "list, describe, abort and find hanging transactions (kafka-transactions.sh)", runTransactions},
		{"share-groups", "list and describe share groups: members, start offsets, in-flight records (kafka-share-groups.sh)", runShareGroups},
		{"serve", "serve a data dir to Kafka clients until SIGINT or SIGTERM", runServe},
		{"version", "print strata's version", runVersion},
	}
}

func main() {
	e := &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, stderrIsTTY: isTerminal(os.Stderr)}
	os.Exit(run(e, os.Args[1:]))
}

func run(e *env, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		w := e.stdout
		code := exitOK
		if len(args) == 0 {
			w, code = e.stderr, exitUsage
		}
		mainUsage(w)
		return code
	}
	if args[0] == "--version" || args[0] == "-version" || args[0] == "-V" {
		return exitCode(e, "version", runVersion(e, args[1:]))
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(e, args[1:])
		return exitCode(e, c.name, err)
	}
	if len(args[0]) > 1 && args[0][0] == '-' {
		fmt.Fprintf(e.stderr, "strata: unknown flag %s: flags go after the command (strata <command> %s)\n", args[0], args[0])
	} else {
		var names []string
		for _, c := range commands() {
			names = append(names, c.name)
		}
		if best := closest(args[0], names); best != "" {
			fmt.Fprintf(e.stderr, "strata: unknown command %q (did you mean %s?)\n", args[0], best)
		} else {
			fmt.Fprintf(e.stderr, "strata: unknown command %q\n", args[0])
		}
	}
	fmt.Fprintln(e.stderr, "Run 'strata --help' for usage.")
	return exitUsage
}

// exitCode prints err, if it says anything, and maps it to an exit code.
func exitCode(e *env, name string, err error) int {
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errHelp):
		return exitOK
	case errors.Is(err, errProblems):
		return exitProblem
	case errors.Is(err, errInterrupted):
		fmt.Fprintf(e.stderr, "strata %s: interrupted; stopped cleanly\n", name)
		return exitInterrupted
	case errors.As(err, &ue):
		fmt.Fprintf(e.stderr, "strata %s: %v\n", name, err)
		fmt.Fprintf(e.stderr, "Run 'strata %s --help' for usage.\n", name)
		return exitUsage
	case errors.Is(err, errNotYet):
		fmt.Fprintf(e.stderr, "strata %s: %v\n", name, err)
		return exitUsage
	default:
		fmt.Fprintf(e.stderr, "strata %s: %v\n", name, err)
		return exitProblem
	}
}

func mainUsage(w io.Writer) {
	fmt.Fprintln(w, "Usage: strata <command> [flags] [arguments]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	width := 0
	for _, c := range commands() {
		width = max(width, len(c.name))
	}
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'strata <command> --help' for a command's flags.")
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
