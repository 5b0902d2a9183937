package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/replica"
)

func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out, t.TempDir(), 1); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{"round 1: stopping leader", "leads after", "acknowledged but not consumed"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	t.Log(s)
}

// Three members started as runMember does in three processes: they form a
// cluster, each acknowledges records, and each finds every record it had
// acknowledged in its own replica when stopped.
func TestMembers(t *testing.T) {
	addrs, err := freeAddrs(6)
	if err != nil {
		t.Fatal(err)
	}
	var peers []replica.Peer
	for id := 1; id <= 3; id++ {
		peers = append(peers, replica.Peer{ID: id, Addr: addrs[2*id-2], RaftAddr: addrs[2*id-1]})
	}
	dir := t.TempDir()
	type member struct {
		cancel context.CancelFunc
		out    *syncBuffer
		done   chan error
	}
	var ms []member
	for id := 1; id <= 3; id++ {
		ctx, cancel := context.WithCancel(context.Background())
		m := member{cancel: cancel, out: &syncBuffer{}, done: make(chan error, 1)}
		go func() { m.done <- runMember(ctx, m.out, fmt.Sprintf("%s/m%d", dir, id), id, peers) }()
		ms = append(ms, m)
	}
	// Each member prints a line when the ISR changes; wait for a full ISR
	// seen by every member.
	for _, m := range ms {
		if !m.out.await(fullISR, 30*time.Second) {
			for _, m := range ms {
				m.cancel()
			}
			t.Fatalf("no full ISR:\n%s", m.out.String())
		}
	}
	for _, m := range ms {
		m.cancel() // all at once: alone, the last one would have no quorum to shut down with
	}
	for _, m := range ms {
		if err := <-m.done; err != nil {
			t.Errorf("member: %v\n%s", err, m.out.String())
		}
		if !strings.Contains(m.out.String(), "of them not in its replica") {
			t.Errorf("member did not check its records:\n%s", m.out.String())
		}
	}
}

// syncBuffer is an output that tests can wait on.
type syncBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	wake chan struct{}
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.wake != nil {
		close(b.wake)
		b.wake = nil
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var fullISR = regexp.MustCompile(`ISR \[\d \d \d\]`)

// await waits until the output matches re, or d passes.
func (b *syncBuffer) await(re *regexp.Regexp, d time.Duration) bool {
	timeout := time.After(d)
	for {
		b.mu.Lock()
		if re.MatchString(b.buf.String()) {
			b.mu.Unlock()
			return true
		}
		if b.wake == nil {
			b.wake = make(chan struct{})
		}
		wake := b.wake
		b.mu.Unlock()
		select {
		case <-wake:
		case <-timeout:
			return false
		}
	}
}
