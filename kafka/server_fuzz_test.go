package kafka

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzServer fuzzes a live Server, not a decoder: the input is sent over
// one connection (to a server that requires SASL when the first byte's
// second bit is set), either as it is (arbitrary frames) or, when its first
// byte is odd, as a sequence of valid requests (every served API, kmsg-
// encoded) whose fields the input turns hostile: extreme numbers, odd
// strings, lists repeated (a partition listed a hundred times). Each
// response must be a whole frame answering the next request in order, or
// the server closes the connection; no handler may panic; the server's
// memory stays bounded; and afterwards the connection is gone and a
// normal client produces and fetches as before.
func FuzzServer(f *testing.F) {
	for i, s := range seedRequests() {
		f.Add(append([]byte{0}, s...))
		f.Add([]byte{1, byte(i), 0xff, 0x0f, 0xf0, 0x33, 0xcc, 0x55, 0xaa})
	}
	f.Add([]byte{0, 0, 0, 0, 6, 0, 18, 0, 3, 0, 0}) // a torn ApiVersions
	f.Add([]byte{0, 0x7f, 0xff, 0xff, 0xff})        // a huge size
	plain, sasl := startFuzzServer(f, nil), startFuzzServer(f, &SASLConfig{Plain: func(u string) (string, bool) { return "s3cret", u == "alice" }})
	n := 0
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		fs := plain
		if in[0]&2 != 0 {
			fs = sasl
		}
		fs.session(t, in)
		fs.normalClient(t)
		if n++; n%1024 == 0 {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			// What the broker stores (in memory here, each file in a
			// slice that may have twice its length) grows with the
			// records produced; the rest must not.
			stored := fs.stored()
			if int64(ms.HeapAlloc)-2*stored > fuzzHeapBound {
				t.Fatalf("heap %d MiB after %d inputs, the broker's files %d MiB: over %d MiB besides them",
					ms.HeapAlloc>>20, n, stored>>20, fuzzHeapBound>>20)
			}
		}
	})
}

// fuzzHeapBound bounds the fuzzed server's heap besides its broker's
// files (its requests are at most fuzzMaxRequest bytes).
const (
	fuzzHeapBound  = 256 << 20
	fuzzMaxRequest = 1 << 20
)

// stored is the bytes of every partition of the broker.
func (fs *fuzzServer) stored() int64 {
	var n int64
	for _, topic := range append(fs.b.Topics(), "__consumer_offsets") {
		parts, err := fs.b.Partitions(context.Background(), topic)
		if err != nil {
			continue
		}
		for i := range parts {
			if p, err := fs.b.Partition(topic, i); err == nil {
				n += p.Size()
			}
		}
	}
	return n
}

type fuzzServer struct {
	s     *Server
	b     *log.Broker
	ln    *pipeListener
	logs  *logBuf
	check string // the normal client's topic, a name no input can guess
}

func startFuzzServer(f *testing.F, sasl *SASLConfig) *fuzzServer {
	var secret [8]byte
	rand.Read(secret[:])
	fs := &fuzzServer{ln: newPipeListener(), logs: &logBuf{}, check: "check-" + hex.EncodeToString(secret[:])}
	fs.b = logtest.New(f, logtest.InMemory(), logtest.Topic("t", 2), logtest.Topic(fs.check, 1))
	s, err := Listen("", fs.b, Config{
		Listener:        fs.ln,
		Logger:          slog.New(slog.NewTextHandler(fs.logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		MaxRequestBytes: fuzzMaxRequest,
		// Long enough that a loaded fuzzing machine's scheduling never
		// makes the normal client miss its first-request deadline (200 ms
		// did); torn frames cost nothing: the client closes first.
		RequestTimeout: 5 * time.Second,
		// A net.Pipe's deadline is a timer that holds the pipe until it
		// fires, even once closed (a TCP connection's close clears its
		// timers): with the default 10 minutes a fuzzing run would hold
		// every pipe of the last ten minutes.
		IdleTimeout: 5 * time.Second,
		SASL:        sasl,
		// Each failed guess would cost the fuzzer 100 ms.
		FailedAuthenticationDelay: -1,
	})
	if err != nil {
		f.Fatal(err)
	}
	fs.s = s
	f.Cleanup(func() { s.Close() })
	return fs
}

// session sends in over one connection and reads what comes back until
// the server closes it or has answered everything.
func (fs *fuzzServer) session(t *testing.T, in []byte) {
	cc := fs.ln.dial()
	defer cc.Close()
	var frames []byte
	var want []int32 // the correlation ids of the answers due, in order
	if in[0]&1 == 0 {
		frames, want = fs.raw(in[1:])
	} else {
		frames, want = fs.hostile(&fuzzInput{b: in[1:]})
	}
	// net.Pipe is synchronous: write while reading.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		cc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		cc.Write(frames)
	}()
	r := bufio.NewReader(cc)
	for i := range want {
		const wait = 10 * time.Second
		cc.SetReadDeadline(time.Now().Add(wait))
		frame, err := readResponse(r)
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			t.Fatalf("request %d of %d (correlation id %d) neither answered nor closed in %v", i+1, len(want), want[i], wait)
		case err == io.EOF || err == io.ErrClosedPipe:
		case err != nil:
			t.Fatalf("response %d: %v", i+1, err)
		case int32(binary.BigEndian.Uint32(frame)) != want[i]:
			t.Fatalf("response %d has correlation id %d, want %d (in request order)", i+1, int32(binary.BigEndian.Uint32(frame)), want[i])
		default:
			continue
		}
		break // closed
	}
	cc.SetDeadline(time.Time{}) // its timers would hold the pipe
	cc.Close()
	wg.Wait()
	// The connection goes, and with it whatever it held.
	deadline := time.Now().Add(10 * time.Second)
	for {
		fs.s.mu.Lock()
		n := len(fs.s.conns)
		fs.s.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still served 10 s after the client closed", n)
		}
		runtime.Gosched()
	}
	// The session's log lines, then none kept: a fuzzing run would
	// hold them all.
	fs.logs.mu.Lock()
	logs := fs.logs.b.String()
	fs.logs.b.Reset()
	fs.logs.mu.Unlock()
	if strings.Contains(logs, "panicked") {
		t.Fatalf("the server panicked:\n%s", logs)
	}
	if h := fs.s.heldFiles.Load(); h != 0 {
		t.Fatalf("%d record handles not released", h)
	}
}

// readResponse reads one response frame: its size must be sane.
func readResponse(r *bufio.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 64<<20 {
		return nil, fmt.Errorf("response frame of %d bytes", n)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}

// normalClient checks that the server still serves a well-behaved client:
// a produce to the check topic and a fetch of it.
func (fs *fuzzServer) normalClient(t *testing.T) {
	cc := fs.ln.dial()
	defer cc.Close()
	defer cc.SetDeadline(time.Time{}) // its timers would hold the pipe
	c := &testClient{t: t, nc: cc, r: bufio.NewReader(cc), f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("normal"))}
	if av := c.do(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse); av.ErrorCode != errNone {
		t.Fatalf("ApiVersions: error %d", av.ErrorCode)
	}
	if fs.s.cfg.SASL != nil {
		if code := handshake(c, 1, "PLAIN").ErrorCode; code != errNone {
			t.Fatalf("SaslHandshake: error %d", code)
		}
		if code := authenticate(c, 1, []byte("\x00alice\x00s3cret")).ErrorCode; code != errNone {
			t.Fatalf("SaslAuthenticate: error %d", code)
		}
	}
	pr := c.do(produceReq(9, -1, fs.check, 0, records("still", "served"))).(*kmsg.ProduceResponse)
	p := pr.Topics[0].Partitions[0]
	if p.ErrorCode != errNone {
		t.Fatalf("produce after the fuzz input: error %d", p.ErrorCode)
	}
	fr := c.do(fetchReq(12, fs.check, 0, p.BaseOffset, 0)).(*kmsg.FetchResponse)
	got := fr.Topics[0].Partitions[0]
	if got.ErrorCode != errNone {
		t.Fatalf("fetch after the fuzz input: error %d", got.ErrorCode)
	}
	if vs := values(t, got.RecordBatches); len(vs) != 2 || vs[0] != "still" {
		t.Fatalf("fetch after the fuzz input: %q", vs)
	}
}

// raw splits in into frames as the server will and returns them, and the
// correlation ids of the answers due: each frame that decodes is answered
// (a fetch's wait shortened first, see tame), as is an ApiVersions of an
// unknown version; the first that does not decode is sent as it is, and
// nothing after it, and so is a torn last frame: the server closes the
// connection then, or answers what it can.
func (fs *fuzzServer) raw(in []byte) ([]byte, []int32) {
	var out []byte
	want := []int32{}
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	for len(in) >= 4 {
		n := int(int32(binary.BigEndian.Uint32(in)))
		if n < 0 || n > len(in)-4 {
			break
		}
		frame := in[4 : 4+n]
		h, _, req, err := fs.s.decode(frame)
		switch {
		case errors.Is(err, errUnsupportedAPIVersions):
			out = append(out, in[:4+n]...)
			want = append(want, h.correlationID)
		case err != nil:
			return append(out, in[:4+n]...), want
		default:
			answered := tame(req)
			if req.Key() == joinGroupKey || req.Key() == syncGroupKey {
				// They wait for the group's other members: the last.
				return f.AppendRequest(out, req, h.correlationID), want
			}
			out = f.AppendRequest(out, req, h.correlationID)
			if answered {
				want = append(want, h.correlationID)
			}
			if hs, ok := req.(*kmsg.SASLHandshakeRequest); ok && hs.Version == 0 && fs.s.cfg.SASL != nil {
				// Raw SASL tokens may follow, answered without a
				// correlation id: the rest goes as it is, unchecked.
				return append(out, in[4+n:]...), want
			}
		}
		in = in[4+n:]
	}
	return append(out, in...), want
}

// hostile encodes a sequence of valid requests whose fields in takes
// over, and the correlation ids of the answers due.
func (fs *fuzzServer) hostile(in *fuzzInput) ([]byte, []int32) {
	templates := seedRequestValues()
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	var out []byte
	var want []int32
	for corr := int32(1); in.more() && corr <= 8; corr++ {
		req := templates[int(in.byte())%len(templates)]
		a := fs.s.apis.lookup(req.Key())
		if a == nil {
			continue
		}
		req.SetVersion(a.min + int16(in.byte())%(a.max-a.min+1))
		mutate(reflect.ValueOf(req).Elem(), in, 0)
		answered := tame(req)
		frame := f.AppendRequest(nil, req, corr)
		if len(out)+len(frame) > fuzzMaxRequest {
			break
		}
		out = append(out, frame...)
		if answered {
			want = append(want, corr)
		}
		if hs, ok := req.(*kmsg.SASLHandshakeRequest); ok && hs.Version == 0 && fs.s.cfg.SASL != nil {
			break // raw SASL tokens would follow, not requests
		}
	}
	return out, want
}

// tame keeps a hostile request from parking or from growing the broker
// without end (those paths have their own tests), and reports whether it
// is answered.
func tame(req kmsg.Request) bool {
	switch r := req.(type) {
	case *kmsg.FetchRequest:
		r.MaxWaitMillis = min(max(r.MaxWaitMillis, 0), 5)
	case *kmsg.CreateTopicsRequest:
		r.ValidateOnly = true
	case *kmsg.ProduceRequest:
		return r.Acks != 0
	}
	return true
}

// seedRequestValues are requests of every served API but those that wait
// for other members (JoinGroup, SyncGroup) or delete, with their fields
// set as a client would.
func seedRequestValues() []kmsg.Request {
	var out []kmsg.Request
	for _, frame := range seedRequests() {
		h, body, err := parseHeader(frame[4:])
		if err != nil {
			continue
		}
		switch h.key {
		case joinGroupKey, syncGroupKey, deleteTopicsKey, deleteGroupsKey:
			continue
		}
		if body, err = skipHeaderTags(h, body); err != nil {
			continue
		}
		req := kmsg.RequestForKey(h.key)
		req.SetVersion(h.version)
		if req.ReadFrom(body) == nil {
			out = append(out, req)
		}
	}
	return out
}

// fuzzInput hands out the fuzz input's bytes, zero once they run out.
type fuzzInput struct{ b []byte }

func (in *fuzzInput) more() bool { return len(in.b) > 0 }

func (in *fuzzInput) byte() byte {
	if len(in.b) == 0 {
		return 0
	}
	c := in.b[0]
	in.b = in.b[1:]
	return c
}

// hostileInts are the numbers that break code that trusts a peer.
var hostileInts = []int64{-1, 0, 1, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64, math.MaxInt16, -2, 1 << 20}

var hostileStrings = []string{"", "t", strings.Repeat("x", 300), "\x00", "../..", "__consumer_offsets", "t\n", "é"}

// mutate sets fields of v from in: each field is left alone or replaced
// by a hostile value, and lists may be repeated (a partition listed many
// times). Version fields are left to SetVersion.
func mutate(v reflect.Value, in *fuzzInput, depth int) {
	if depth > 6 || !in.more() {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			mutate(v.Elem(), in, depth+1)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			sf := v.Type().Field(i)
			if !sf.IsExported() || sf.Name == "Version" || sf.Name == "UnknownTags" {
				continue
			}
			mutate(v.Field(i), in, depth+1)
		}
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if c := in.byte(); c&3 == 0 {
			x := hostileInts[int(c>>2)%len(hostileInts)]
			bits := v.Type().Bits()
			lo, hi := int64(-1)<<(bits-1), int64(1)<<(bits-1)-1
			v.SetInt(min(max(x, lo), hi))
		}
	case reflect.Bool:
		if c := in.byte(); c&3 == 0 {
			v.SetBool(c&4 != 0)
		}
	case reflect.String:
		if c := in.byte(); c&3 == 0 {
			v.SetString(hostileStrings[int(c>>2)%len(hostileStrings)])
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if c := in.byte(); c&7 == 0 {
				n := min(int(c>>3), len(in.b))
				v.SetBytes(append([]byte(nil), in.b[:n]...))
				in.b = in.b[n:]
			}
			return
		}
		for i := range v.Len() {
			mutate(v.Index(i), in, depth+1)
		}
		if c := in.byte(); c&7 == 0 && v.Len() > 0 {
			times := 1 + int(c>>3)*4 // up to 125 copies
			grown := reflect.MakeSlice(v.Type(), 0, v.Len()*times)
			for range times {
				grown = reflect.AppendSlice(grown, v)
			}
			v.Set(grown)
		}
	}
}

// pipeListener is a net.Listener whose connections are net.Pipe's.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// dial returns the client's end of a new connection.
func (l *pipeListener) dial() net.Conn {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
	case <-l.done:
		server.Close()
	}
	return client
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
