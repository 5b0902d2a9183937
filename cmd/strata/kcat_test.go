package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// produce and consume take kcat's short flags with kcat's meanings, Kafka's
// console tools' --producer-property/--consumer-property and
// --producer.config/--consumer.config, and --compression-codec.
func TestKcatFlagsAndClientProperties(t *testing.T) {
	dir := newTopic(t, "k", 2)
	s := startServe(t, dir)
	defer s.stop(t)
	b := s.addr

	// kcat -P -b -t -K -p: keyed lines to partition 1.
	ok(t, "", "a\tx\nb\ty\nc\tz\n", "produce", "-P", "-b", b, "-t", "k", "-K", `\t`, "-p", "1")
	// Each run below sends one batch to partition 0 with a codec.
	codecs := []struct {
		args []string
		want string
	}{
		{[]string{"--compression-codec"}, "gzip"}, // alone: gzip, as Kafka's console producer
		{[]string{"--compression-codec", "zstd"}, "zstd"},
		{[]string{"-z", "lz4"}, "lz4"},
		{[]string{"--producer-property", "compression.type=snappy"}, "snappy"},
		{[]string{"--producer.config", writeFile(t, "p.properties", "compression.type=lz4\nacks=1\nlinger.ms=0\nkey.serializer=org.apache.kafka.common.serialization.StringSerializer\n")}, "lz4"},
		{[]string{"--producer.config", writeFile(t, "q.properties", "compression.type=lz4\n"), "--producer-property", "compression.type=gzip"}, "gzip"}, // the flag wins
		{[]string{"--producer-property", "compression.type=snappy", "--compression-codec", "none"}, "none"},
	}
	for i, c := range codecs {
		r := strata(t, "", "v"+string(rune('0'+i))+"\n", append([]string{"produce", "-b", b, "-t", "k", "-p", "0"}, c.args...)...)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("produce %s: exit %d, stderr %q", strings.Join(c.args, " "), r.code, r.stderr)
		}
	}
	dump := ok(t, "", "", "dump", filepath.Join(dir, "k-0", "00000000000000000000.log"))
	var got []string
	for _, m := range regexp.MustCompile(`compresscodec: (\w+)`).FindAllStringSubmatch(dump, -1) {
		got = append(got, m[1])
	}
	var want []string
	for _, c := range codecs {
		want = append(want, c.want)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("batch codecs %v, want %v\n%s", got, want, dump)
	}

	// kcat -C -b -t -o beginning -e -K: every record, key DELIM value.
	out := ok(t, "", "", "consume", "-C", "-b", b, "-t", "k", "-p", "1", "-o", "beginning", "-e", "-K", " => ")
	if out != "a => x\nb => y\nc => z\n" {
		t.Errorf("consume -o beginning -e -K: %q", out)
	}
	// -o -N: N records before the end; -o N: from offset N; -c: count.
	if out := ok(t, "", "", "consume", "-b", b, "-t", "k", "-p", "1", "-o", "-2", "-e"); out != "y\nz\n" {
		t.Errorf("consume -o -2: %q", out)
	}
	if out := ok(t, "", "", "consume", "-b", b, "-t", "k", "-p", "1", "-o", "1", "-c", "1"); out != "y\n" {
		t.Errorf("consume -o 1 -c 1: %q", out)
	}
	// kcat -G GROUP TOPIC consumes as a member of the group and commits.
	if out := ok(t, "", "", "consume", "-b", b, "-G", "kg", "k", "-o", "beginning", "-c", "10", "--consumer-property", "fetch.max.wait.ms=50"); strings.Count(out, "\n") != 10 {
		t.Errorf("consume -G kg k: %q", out)
	}
	desc := ok(t, "", "", "groups", "--bootstrap-server", b, "describe", "--group", "kg", "--topic", "k")
	if !strings.Contains(desc, "kg\tk\t") {
		t.Errorf("the group consumed with -G committed nothing:\n%s", desc)
	}

	// --consumer.config: bootstrap.servers, group.id and auto.offset.reset
	// from the file; an unknown property is a warning, as Kafka's clients
	// warn, and the command goes on.
	cfg := writeFile(t, "c.properties", "bootstrap.servers="+b+"\ngroup.id=fromfile\nauto.offset.reset=earliest\nmax.poll.records=5\n")
	r := strata(t, "", "", "consume", "--consumer.config", cfg, "--topic", "k", "--max-messages", "3")
	if r.code != 0 || strings.Count(r.stdout, "\n") != 3 ||
		r.stderr != "strata consume: warning: property max.poll.records is not used by strata (it uses group.id, auto.offset.reset, fetch.min.bytes, fetch.max.wait.ms, fetch.max.bytes, max.partition.fetch.bytes, session.timeout.ms, heartbeat.interval.ms, max.poll.interval.ms, isolation.level, bootstrap.servers, client.id, security.protocol, sasl.*, ssl.*)\n" {
		t.Errorf("consume --consumer.config: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if ids := ok(t, "", "", "groups", "--bootstrap-server", b, "list"); !strings.Contains(ids, "fromfile\n") {
		t.Errorf("group.id of --consumer.config not used: groups %q", ids)
	}

	// Mistakes: exit 2, one line and the hint, nothing produced or read.
	for _, args := range [][]string{
		{"produce", "-b", b, "-t", "k", "-C"},
		{"consume", "-b", b, "-t", "k", "-P"},
		{"produce", "-b", b, "-t", "k", "--producer-property", "acks=2"},
		{"produce", "-b", b, "-t", "k", "--producer-property", "linger.ms"},
		{"produce", "-b", b, "-t", "k", "--producer.config", filepath.Join(t.TempDir(), "missing.properties")},
		{"produce", "-b", b, "-t", "k", "--compression-codec=brotli"},
		{"produce", "-b", b, "-t", "k", "--producer-property", "security.protocol=CARRIER_PIGEON"},
		{"consume", "-b", b, "-t", "k", "--consumer-property", "auto.offset.reset=none"},
		{"consume", "-b", b, "-t", "k", "--consumer-property", "group.id=a", "--group", "b"},
		{"consume", "-b", b, "-t", "k", "-o", "stored"},
		{"consume", "-b", b, "-t", "k", "-o", "yesterday"},
		{"consume", "-b", b, "-t", "k", "-o", "-1", "--from-beginning"},
		{"consume", "-b", b, "-t", "k", "-K", ":", "-f", "%s"},
	} {
		r := strata(t, "", "never\n", args...)
		lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
		if r.code != exitUsage || r.stdout != "" || len(lines) != 2 {
			t.Errorf("strata %s: exit %d, stdout %q, stderr %q; want 2 and one line", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
	if out := ok(t, "", "", "consume", "-b", b, "-t", "k", "-o", "beginning", "-e"); strings.Contains(out, "never") {
		t.Errorf("a refused produce wrote its line:\n%s", out)
	}
}

// writeFile writes content to a new file named name and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// On a data dir, -o -N and -K work as over Kafka.
func TestKcatOffsetsOnDataDir(t *testing.T) {
	dir := newTopic(t, "d", 1)
	ok(t, "", "k1:a\nk2:b\nk3:c\n", "produce", "--data-dir", dir, "-t", "d", "-K", ":")
	if out := ok(t, "", "", "consume", "--data-dir", dir, "-t", "d", "-o", "-2", "-K", "="); out != "k2=b\nk3=c\n" {
		t.Errorf("consume --data-dir -o -2 -K =: %q", out)
	}
	if out := ok(t, "", "", "consume", "--data-dir", dir, "-t", "d", "-o", "-10"); out != "a\nb\nc\n" {
		t.Errorf("consume --data-dir -o -10 (past the start): %q", out)
	}
}

// perf produce --producer.config and perf consume --consumer.config read
// Kafka's properties files as produce and consume do: known properties
// applied (--producer-props winning), others warned of.
func TestPerfClientConfigFiles(t *testing.T) {
	dir := newTopic(t, "bench", 1)
	pcfg := writeFile(t, "producer.properties", "compression.type=zstd\nacks=1\nmax.block.ms=1000\n")
	r := strata(t, "", "", "perf", "produce", "--data-dir", dir, "--topic", "bench", "--num-records", "50", "--record-size", "10", "--producer.config", pcfg)
	if r.code != 0 || !produceSummaryOf(50).MatchString(r.stdout) || !strings.Contains(r.stderr, "warning: property max.block.ms is not used") {
		t.Fatalf("perf produce --producer.config: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	ok(t, "", "", "perf", "produce", "--data-dir", dir, "--topic", "bench", "--num-records", "50", "--record-size", "10",
		"--producer.config", pcfg, "--producer-props", "compression.type=gzip")
	dump := ok(t, "", "", "dump", filepath.Join(dir, "bench-0", "00000000000000000000.log"))
	if !strings.Contains(dump, "compresscodec: zstd") || !strings.Contains(dump, "compresscodec: gzip") || strings.Contains(dump, "compresscodec: none") {
		t.Errorf("want zstd batches from the file, then gzip ones from --producer-props:\n%s", dump)
	}
	ccfg := writeFile(t, "consumer.properties", "fetch.max.wait.ms=5\nauto.offset.reset=latest\n")
	out := ok(t, "", "", "perf", "consume", "--data-dir", dir, "--topic", "bench", "--consumer.config", ccfg)
	if !regexp.MustCompile(strings.Replace(consumeSummary.String(), "%d", "100", 1)).MatchString(out) {
		t.Errorf("perf consume --consumer.config: no summary of 100 records:\n%s", out)
	}
	for _, args := range [][]string{
		{"perf", "produce", "--data-dir", dir, "--topic", "bench", "--num-records", "1", "--producer.config", writeFile(t, "bad.properties", "acks=2\n")},
		{"perf", "consume", "--data-dir", dir, "--topic", "bench", "--consumer.config", filepath.Join(t.TempDir(), "missing")},
	} {
		if r := strata(t, "", "", args...); r.code != exitUsage {
			t.Errorf("strata %s: exit %d, stderr %q; want 2", strings.Join(args, " "), r.code, r.stderr)
		}
	}
}

// produceSummaryOf is produceSummary for n records.
func produceSummaryOf(n int) *regexp.Regexp {
	return regexp.MustCompile(strings.Replace(produceSummary.String(), "^3000 ", "^"+strconv.Itoa(n)+" ", 1))
}
