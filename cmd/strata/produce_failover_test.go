package main

import (
	"bufio"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A three-member cluster of strata serve processes; strata produce and
// strata consume --group g run against it, listing every member as a
// bootstrap server. The partition's leader is SIGKILLed between two
// records: produce moves to the next leader (its record acknowledged,
// none failed) and consume reads on from there; every record produced is
// consumed, and the group's positions are committed at the end. strata
// perf then produces and consumes with the dead member in its bootstrap
// list.
func TestProduceConsumeRideThroughLeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three strata serve processes")
	}
	ports := freePorts(t, 6)
	tmp := t.TempDir()
	var peers []string
	for i := range 3 {
		peers = append(peers, "--peer", fmt.Sprintf("%d=%s,%s", i+1, ports[2*i], ports[2*i+1]))
	}
	members := make([]*server, 3)
	for i := range 3 {
		args := append([]string{"--node-id", strconv.Itoa(i + 1), "--listen", ports[2*i], "--raft-addr", ports[2*i+1], "--raft-loopback"}, peers...)
		members[i] = startServe(t, filepath.Join(tmp, fmt.Sprint(i+1)), args...)
	}
	defer func() {
		for _, m := range members {
			if m != nil {
				m.stop(t)
			}
		}
	}()
	bootstrap := strings.Join([]string{ports[0], ports[2], ports[4]}, ",")
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := strata(t, "", "", "topics", "create", "--bootstrap-server", ports[0], "--topic", "orders", "--partitions", "1", "--replication-factor", "3")
		if r.code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("topics create never succeeded: %s", r.stderr)
		}
		time.Sleep(100 * time.Millisecond) // polling a cluster being formed by other processes: nothing to await
	}
	var leader int
	for deadline := time.Now().Add(60 * time.Second); ; {
		l, isr := describe(t, ports[0], "orders")
		if l > 0 && len(strings.Split(isr, ",")) == 3 {
			leader = l
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ISR of orders never reached 3: leader %d, ISR %q", l, isr)
		}
		time.Sleep(100 * time.Millisecond) // as above
	}

	const n = 200
	cons, _, consOut, consErr := start(t, "consume", "--bootstrap-server", bootstrap, "--topic", "orders", "--group", "g", "--from-beginning")
	consLog := drain(consErr)
	seen := make(chan string, 4*n)
	go func() {
		defer close(seen)
		for {
			line, err := consOut.ReadString('\n')
			if line = strings.TrimSpace(line); line != "" {
				seen <- line
			}
			if err != nil {
				return
			}
		}
	}()
	prod, prodIn, _, prodErr := start(t, "produce", "--bootstrap-server", bootstrap, "--topic", "orders", "--verbose")
	got := map[string]int{}
	consumed := func(upTo int) {
		t.Helper()
		timeout := time.After(2 * time.Minute)
		for missing(got, upTo) > 0 {
			select {
			case v, ok := <-seen:
				if !ok {
					t.Fatalf("consume exited with %d of %d records missing; stderr:\n%s", missing(got, upTo), upTo, <-consLog)
				}
				got[v]++
			case <-timeout:
				t.Fatalf("%d of %d records not consumed within 2 min", missing(got, upTo), upTo)
			}
		}
	}
	write := func(from, to int) {
		t.Helper()
		var b strings.Builder
		for i := from; i <= to; i++ {
			fmt.Fprintf(&b, "v%d\n", i)
		}
		if _, err := io.WriteString(prodIn, b.String()); err != nil {
			t.Fatal(err)
		}
	}
	write(1, n/2)
	readUntil(t, prodErr, fmt.Sprintf("line %d: ", n/2))
	consumed(n / 2)

	// SIGKILL the partition's leader, then send the next record.
	killed := members[leader-1]
	members[leader-1] = nil
	kill := time.Now()
	if err := killed.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	write(n/2+1, n/2+1)
	readUntil(t, prodErr, fmt.Sprintf("line %d: ", n/2+1))
	took := time.Since(kill)
	t.Logf("SIGKILL of the leader (member %d) to the next acknowledged produce: %v", leader, took.Round(time.Millisecond))
	killed.cmd.Wait()
	<-killed.logs

	write(n/2+2, n)
	prodIn.Close()
	rest := readRest(prodErr)
	if code := exitCodeOf(prod.Wait()); code != 0 {
		t.Fatalf("produce exited %d across the leader's death; stderr:\n%s", code, rest)
	}
	consumed(n)
	if err := cons.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range seen { // what consume prints before it exits
	}
	if code := exitCodeOf(cons.Wait()); code != exitInterrupted {
		t.Fatalf("consume exited %d after SIGINT, want %d; stderr:\n%s", code, exitInterrupted, <-consLog)
	}
	dups := 0
	for _, c := range got {
		dups += c - 1
	}
	t.Logf("consumed %d records, %d of them twice or more (at-least-once across a rebalance)", len(got), dups)

	other := ports[2*(leader%3)]
	out := ok(t, "", "", "groups", "describe", "--bootstrap-server", other, "--group", "g", "--topic", "orders")
	if !strings.Contains(out, fmt.Sprintf(" %d ", n)) && !strings.Contains(out, fmt.Sprintf("\t%d\t", n)) {
		t.Errorf("the group's committed offset is not %d:\n%s", n, out)
	}

	// strata perf with the dead member first among the bootstrap servers.
	withDead := ports[2*(leader-1)] + "," + bootstrap
	ok(t, "", "", "perf", "produce", "--bootstrap-server", withDead, "--topic", "orders", "--num-records", "100", "--record-size", "10")
	ok(t, "", "", "perf", "consume", "--bootstrap-server", withDead, "--topic", "orders", "--num-records", strconv.Itoa(n+100))
}

// missing counts the values v1..vN not seen.
func missing(got map[string]int, n int) int {
	m := 0
	for i := 1; i <= n; i++ {
		if got[fmt.Sprintf("v%d", i)] == 0 {
			m++
		}
	}
	return m
}

// drain reads r to its end in the background: the channel gets it all.
func drain(r *bufio.Reader) <-chan string {
	ch := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		ch <- string(b)
	}()
	return ch
}

// readRest reads r to its end.
func readRest(r *bufio.Reader) string {
	b, _ := io.ReadAll(r)
	return string(b)
}
