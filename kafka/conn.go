package kafka

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/internal/order"
	"github.com/strata-log/strata/log"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxUnauthenticatedBytes is the largest request of a connection that
// has yet to authenticate (Kafka's sasl.server.max.receive.size).
const maxUnauthenticatedBytes = 512 << 10

// closeDrainTimeout bounds how long Close waits for a client to take the
// responses of the requests it had in flight.
const closeDrainTimeout = 5 * time.Second

// conn is one client connection, served by goroutines of its own, all
// alike and long-lived. One at a time holds the reader's role: it reads
// and decodes requests, and once it has one for a handler it passes the
// role to an idle goroutine of the connection (a new one if none is idle,
// at most MaxInFlight+1) and runs the handler itself: the goroutine that
// the request's bytes woke handles it, with no other to wake first. The
// responses are written in request order (Kafka's rule) by whichever
// goroutine holds the connection's turn to write: the one whose request is
// the oldest not yet written takes it once its handler is done and writes
// its response, then every response done after it, in order, and gives the
// turn back at the first one not done (whose goroutine takes it when done).
// At most MaxInFlight requests are read and not yet written: then the
// reader stops reading.
//
// A connection that sends one request at a time is served by two
// goroutines taking turns, whose stacks stay grown, rather than a new
// goroutine growing a new stack for every request. They stop once reading
// has stopped and their request is handled.
type conn struct {
	s      *Server
	nc     net.Conn
	remote string
	logger *slog.Logger
	// ctx is cancelled once the connection stops reading (the client went
	// away, sent something bad, or the server closes): parked requests
	// then answer at once with what they have.
	ctx    context.Context
	cancel context.CancelFunc

	work     chan job      // to an idle worker; closed once reading stops
	slots    chan struct{} // one per request read and not yet written (MaxInFlight)
	workers  atomic.Int32  // goroutines started (the reader's role's; read by tests)
	inFlight atomic.Int32  // requests read and not yet written
	lastDone atomic.Int64  // when the last response was written (unix ns)
	// mutedUntil is when the mute of the last throttled response ends
	// (unix ns of the quota clock; 0: never muted): requests read before
	// then wait for it (KIP-219, quota_manager.go).
	mutedUntil atomic.Int64

	mu      sync.Mutex // guards closing and the deadlines set on nc
	closing bool

	// wmu guards the order of the responses to write and the turn.
	wmu sync.Mutex
	// order[head:] are the requests read and not yet written, oldest
	// first; the reader appends, the turn's holder takes from the head.
	order []*pending
	head  int
	// writing: a goroutine holds the turn to write (writeTurn).
	writing bool
	// readerDone: the reader has stopped; whoever then finds every
	// response written closes the connection (closeWriting).
	readerDone bool
	// wfailed: writing failed or a response closes the connection; the
	// responses left are dropped. The turn's holder's.
	wfailed bool

	lanesMu sync.Mutex
	lanes   map[log.TopicPartition]chan struct{} // the last produce to each partition

	sasl *saslState // nil: no authentication needed (or done)

	// clientID is the client id of the last request read (reader only):
	// the next request naming it shares the string.
	clientID *string
	// br buffers the connection's reads (reader only).
	br *bufio.Reader

	// copied is the record bytes that fetch responses not yet written
	// hold in memory (take), at most connCopyBytes.
	copied atomic.Int64
	// reqHeld is the bytes of the requests read and not yet answered, at
	// most MaxRequestBytes (admit); freed wakes a reader waiting for it.
	reqHeld atomic.Int64
	freed   chan struct{}

	// The reader's: where the connection is in its requests.
	ip         string    // the peer's IP address (Server.perIP)
	accepted   time.Time // when the connection was accepted
	gotRequest bool      // a whole request arrived
	reqStart   time.Time // the first byte of the request being read
	frameBytes int64     // of reqHeld, the frame read and not yet queued

	// With Config.Metrics, when the reader read the frame it dispatches
	// and its size (zero: a raw SASL token, no API). Reader only.
	frameAt  time.Time
	frameLen int64
}

// pending is one request read and its response to come.
type pending struct {
	h   header
	out net.Buffers // the response frame; nil: no response (acks=0)
	// ready: out is set (conn.wmu).
	ready bool
	// pooled: p came from newPending and goes back to pendings once
	// written; buf and one are p's own, reused for the next response.
	pooled bool
	buf    []byte
	one    [1][]byte
	bufs   net.Buffers // a fetch response's out, cleared and reused
	// files are record batches of a fetch response, each sent with
	// sendfile before out[at]; released once written (or not).
	files []fileAt
	// closeAfter closes the connection once out is written (a failed
	// acks=0 produce, as Kafka does, or a failed authentication).
	closeAfter bool
	obs        observed // for Config.Metrics
	copied     int64    // of conn.copied, given back once written
	reqBytes   int64    // of conn.reqHeld, given back once written
	// delay holds the response, and the close after it, that long (a
	// failed authentication: failAuth).
	delay time.Duration
	// throttle mutes the connection that long once the response is
	// written (a client over its quota).
	throttle time.Duration
}

// pendings recycles the pending requests of every connection: the
// worker that writes a response puts it back once its response is written (or dropped), with its
// response buffer.
var pendings = sync.Pool{New: func() any { return &pending{pooled: true} }}

// maxPooledResponse is the largest response buffer a pending keeps for
// the next one.
const maxPooledResponse = 64 << 10

// maxPooledBuffers is the most buffers of a fetch response a pending keeps
// room for.
const maxPooledBuffers = 64

// newPending returns a pending request for h, from pendings.
func newPending(h header) *pending {
	p := pendings.Get().(*pending)
	p.h = h
	return p
}

// recycle gives p back to pendings once its response is written.
func (p *pending) recycle() {
	if !p.pooled {
		return
	}
	buf := p.buf[:0]
	if cap(buf) > maxPooledResponse {
		buf = nil
	}
	bufs := p.bufs[:cap(p.bufs)]
	clear(bufs) // the record bytes they held may go
	if cap(bufs) > maxPooledBuffers {
		bufs = nil
	}
	*p = pending{pooled: true, buf: buf, bufs: bufs[:0]}
	pendings.Put(p)
}

// setResponse sets p's response frame to resp's, encoded into p's buffer.
func (p *pending) setResponse(resp kmsg.Response) {
	p.buf = appendResponse(p.buf[:0], p.h, resp)
	p.one[0] = p.buf
	p.out = p.one[:]
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{
		s:      s,
		nc:     nc,
		remote: nc.RemoteAddr().String(),
		work:   make(chan job),
		slots:  make(chan struct{}, s.cfg.MaxInFlight),
		lanes:  map[log.TopicPartition]chan struct{}{},
		freed:  make(chan struct{}, 1),

		accepted: time.Now(),
	}
	c.logger = s.logger.With("remote", c.remote)
	c.ctx, c.cancel = context.WithCancel(s.ctx)
	if s.cfg.SASL != nil {
		c.sasl = &saslState{}
	}
	return c
}

// shutdown makes the reader stop at once and the writing give up on a
// client that does not read its responses within closeDrainTimeout.
func (c *conn) shutdown() {
	c.mu.Lock()
	c.closing = true
	now := time.Now()
	c.nc.SetReadDeadline(now)
	c.nc.SetWriteDeadline(now.Add(closeDrainTimeout))
	c.mu.Unlock()
}

// setReadDeadline sets the read deadline to t, unless closing; false if
// closing.
func (c *conn) setReadDeadline(t time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return false
	}
	c.nc.SetReadDeadline(t)
	return true
}

func (c *conn) setWriteDeadline() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closing {
		c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
	}
}

// What a connection waiting for a request waits for at most.
const (
	waitIdle  = iota // IdleTimeout since the last request
	waitFirst        // RequestTimeout since accepted, for a first request
	waitAuth         // AuthenticationTimeout since accepted, to authenticate
)

// waitDeadline is when the reader stops waiting for the next request to
// begin, and what for.
func (c *conn) waitDeadline() (time.Time, int) {
	d, why := time.Now().Add(c.s.cfg.IdleTimeout), waitIdle
	if !c.gotRequest {
		if t := c.accepted.Add(c.s.cfg.RequestTimeout); t.Before(d) {
			d, why = t, waitFirst
		}
	}
	if c.sasl != nil && !c.sasl.done {
		if t := c.accepted.Add(c.s.cfg.AuthenticationTimeout); t.Before(d) {
			d, why = t, waitAuth
		}
	}
	return d, why
}

// requestDeadline is when a request of size bytes (0: not known yet) that
// began at start must have arrived whole: RequestTimeout, a second more
// for every MiB past the first, and no later than the authentication
// deadline.
func (c *conn) requestDeadline(start time.Time, size int) time.Time {
	d := start.Add(c.s.cfg.RequestTimeout + time.Duration(size>>20)*time.Second)
	if c.sasl != nil && !c.sasl.done {
		if t := c.accepted.Add(c.s.cfg.AuthenticationTimeout); t.Before(d) {
			d = t
		}
	}
	return d
}

// admit is called with a request's size before its bytes are read: it
// waits until the connection's requests not yet answered hold no more than
// MaxRequestBytes with it (one request of any size is always admitted),
// then sets the deadline for the rest of the request.
func (c *conn) admit(size int) error {
	start := c.reqStart
	for held := c.reqHeld.Load(); held > 0 && held+int64(size) > int64(c.s.cfg.MaxRequestBytes); held = c.reqHeld.Load() {
		select {
		case <-c.freed:
		case <-c.ctx.Done():
			return net.ErrClosed
		}
		start = time.Now() // waiting for our answers is not the client's time
	}
	c.reqHeld.Add(int64(size))
	c.frameBytes = int64(size)
	if !c.setReadDeadline(c.requestDeadline(start, size)) {
		return net.ErrClosed
	}
	return nil
}

// read is the reader's role, which one goroutine of the connection holds
// at a time: it reads requests, handles those of the SASL exchange, and
// once it has a request for a handler it passes the role on to an idle
// goroutine of the connection (or a new one) and returns the request, for
// its caller to run at once: the goroutine the request's bytes woke
// handles it, with no other to wake first. ok false: reading stopped, and
// the connection's reading side is shut (stopReading).
func (c *conn) read() (j job, ok bool) {
	if c.br == nil {
		c.br = bufio.NewReaderSize(c.nc, 64<<10)
	}
	r := c.br
	for {
		wait, why := c.waitDeadline()
		if !c.setReadDeadline(wait) {
			return c.stopReading()
		}
		if _, err := r.Peek(1); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) && why == waitIdle &&
				(c.inFlight.Load() > 0 || time.Since(time.Unix(0, c.lastDone.Load())) < c.s.cfg.IdleTimeout) {
				continue // waiting for our answers, or just answered, is not idle
			}
			c.readFailed(err, false, why)
			return c.stopReading()
		}
		// A request began: the rest of it must follow in time.
		c.reqStart = time.Now()
		if !c.setReadDeadline(c.requestDeadline(c.reqStart, 0)) {
			return c.stopReading()
		}
		// Each request gets its own buffer: handlers keep slices of it
		// (record batches) while the reader goes on.
		limit := c.s.cfg.MaxRequestBytes
		if c.sasl != nil && !c.sasl.done {
			limit = min(limit, maxUnauthenticatedBytes)
		}
		frame, _, err := readFrameSized(r, nil, limit, c.s.frames, c.admit)
		if err != nil {
			c.readFailed(err, true, why)
			c.unadmit()
			return c.stopReading()
		}
		c.gotRequest = true
		if c.s.cfg.Metrics != nil {
			c.frameAt, c.frameLen = time.Time{}, 0
			if c.sasl == nil || !c.sasl.raw {
				c.frameAt, c.frameLen = time.Now(), int64(len(frame))+4
			}
		}
		if c.s.caps.quotas != nil && !c.waitMuted() {
			c.unadmit()
			return c.stopReading()
		}
		j, ok := c.dispatch(frame)
		c.unadmit() // a frame no pending took
		if !ok {
			return c.stopReading()
		}
		if j.p != nil {
			c.start(job{read: true})
			return j, true
		}
	}
}

// stopReading shuts the connection's reading side: what is parked answers
// at once, the idle goroutines stop, and the connection closes once every
// response is written (readerStopped). The reader's role only.
func (c *conn) stopReading() (job, bool) {
	c.cancel()
	close(c.work)
	c.readerStopped()
	return job{}, false
}

// unadmit gives back the bytes of the frame just read if no pending
// request took them.
func (c *conn) unadmit() {
	if c.frameBytes != 0 {
		c.freeRequest(c.frameBytes)
		c.frameBytes = 0
	}
}

// freeRequest gives back n bytes of requests and wakes the reader if it
// waits in admit.
func (c *conn) freeRequest(n int64) {
	c.reqHeld.Add(-n)
	select {
	case c.freed <- struct{}{}:
	default:
	}
}

// readFailed logs why reading a request failed; started: the request had
// begun, why: what the reader waited for if not.
func (c *conn) readFailed(err error, started bool, why int) {
	c.mu.Lock()
	closing := c.closing
	c.mu.Unlock()
	switch {
	case closing:
	case errors.Is(err, os.ErrDeadlineExceeded) && started:
		c.logger.Info("kafka: closing connection: request not received whole in time", "timeout", c.s.cfg.RequestTimeout)
	case errors.Is(err, os.ErrDeadlineExceeded) && why == waitAuth:
		c.logger.Info("kafka: closing connection: not authenticated in time", "timeout", c.s.cfg.AuthenticationTimeout)
	case errors.Is(err, os.ErrDeadlineExceeded) && why == waitFirst:
		c.logger.Info("kafka: closing connection: no request in time", "timeout", c.s.cfg.RequestTimeout)
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.logger.Info("kafka: closing idle connection", "idle", c.s.cfg.IdleTimeout)
	case errors.Is(err, errBadFrame):
		c.logger.Warn("kafka: closing connection", "err", err)
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
	default:
		c.logger.Debug("kafka: read", "err", err)
	}
}

// dispatch decodes one request and returns it for a handler (j.p set), or
// handles it itself (j.p nil); false closes the connection (after the
// responses already due).
func (c *conn) dispatch(frame []byte) (j job, ok bool) {
	defer func() {
		// kmsg decoding a peer's bytes must not take the server down.
		if r := recover(); r != nil {
			c.logger.Error("kafka: closing connection: decoding panicked", "panic", r)
			ok = false
		}
	}()
	if c.sasl != nil && !c.sasl.done {
		if c.sasl.raw {
			return job{}, c.rawToken(frame)
		}
		// Before authentication only the SASL exchange is decoded.
		if len(frame) >= 2 {
			switch key := int16(binary.BigEndian.Uint16(frame)); key {
			case apiVersionsKey, saslHandshakeKey, saslAuthenticateKey:
			default:
				c.logger.Warn("kafka: closing connection: request before authentication", "api", kmsg.NameForKey(key))
				c.failAuth(header{key: key}, nil)
				return job{}, false
			}
		}
	}
	h, a, req, err := c.s.decodeReusing(frame, c.clientID)
	c.clientID = h.clientID
	switch {
	case errors.Is(err, errUnsupportedAPIVersions):
		// KIP-511: answer with UNSUPPORTED_VERSION and the versions
		// served, in v0, without reading the body.
		resp := c.s.apiVersions(errUnsupportedVersion)
		resp.SetVersion(0)
		c.enqueueDone(h, resp)
		return job{}, true
	case err != nil:
		c.logger.Warn("kafka: closing connection", "err", err)
		return job{}, false
	}
	if c.sasl != nil && !c.sasl.done {
		// Until authenticated, requests are handled here, one at a time,
		// and only those of the SASL exchange.
		return job{}, c.authenticate(h, req)
	}
	p := newPending(h)
	var waits []chan struct{}
	var mine chan struct{}
	if pr, ok := req.(*kmsg.ProduceRequest); ok {
		waits, mine = c.laneFor(pr)
	}
	c.enqueue(p)
	return job{p: p, a: a, req: req, frame: frame, waits: waits, mine: mine}, true
}

// job is what a goroutine of the connection is handed: the reader's role
// (read), a request to handle, or (neither) the turn to write.
type job struct {
	read  bool
	p     *pending
	a     *api
	req   kmsg.Request
	frame []byte          // the request's bytes (recycled after a produce)
	waits []chan struct{} // earlier produces to its partitions
	mine  chan struct{}   // closed once it has its place in the log
}

// start hands j to an idle goroutine of the connection, or starts one if
// none is idle. With MaxInFlight+1 started it waits for one to be idle: one
// is about to be, since the caller holds the reader's role and a request
// not yet written, at most MaxInFlight-1 other requests are not yet
// written, and every other busy goroutine either runs the handler of one
// of those or writes one (holding the turn), so one at most has finished
// and not yet asked for the next. The reader's role only.
func (c *conn) start(j job) {
	select {
	case c.work <- j:
		return
	default:
	}
	if int(c.workers.Load()) < c.s.cfg.MaxInFlight+1 {
		c.workers.Add(1)
		c.s.wg.Add(1)
		go c.worker(j)
		return
	}
	c.work <- j
}

// worker is a goroutine of the connection: it runs j, then what it is
// handed, until reading stops. With the reader's role it reads until it
// has a request to handle (read), then handles it.
func (c *conn) worker(j job) {
	defer c.s.wg.Done()
	for ok := true; ok; j, ok = <-c.work {
		if j.read {
			if j, ok = c.read(); !ok {
				return
			}
		}
		c.run(j)
	}
}

// run waits for the earlier produces to j's partitions and handles j,
// then writes the responses if its turn has come; a job without a request
// holds the turn and writes.
func (c *conn) run(j job) {
	if j.p == nil {
		c.writeTurn()
		return
	}
	for _, w := range j.waits {
		<-w
	}
	var ordered func() // the later produces to its partitions may start
	if j.mine != nil {
		mine := j.mine
		ordered = func() { c.leaveLane(mine) }
	}
	key := j.p.h.key // j.p may be written, and recycled, once finished
	handled := c.handle(j.p, j.a, j.req, ordered)
	if handled && key == produceKey && c.s.frames != nil {
		// The backend keeps no part of a batch past Produce
		// (BatchBorrower), the request's strings are copies and the
		// response is encoded: nothing refers to the frame now.
		c.s.frames.put(j.frame)
	}
	c.finish(j.p)
}

// errUnsupportedAPIVersions is an ApiVersions request of a version the
// server does not know: it is answered, in v0 (KIP-511).
var errUnsupportedAPIVersions = errors.New("kafka: unsupported ApiVersions version")

// decode parses a request frame: its header, the API it is for and the
// request, kmsg-decoded. An unknown API key, an unsupported version or a
// body that does not parse is an error (the connection is closed), except
// an unknown ApiVersions version (errUnsupportedAPIVersions, h set to v0).
func (s *Server) decode(frame []byte) (header, *api, kmsg.Request, error) {
	return s.decodeReusing(frame, nil)
}

// decodeReusing is decode with the header's client id taken from prev when
// it is the same (parseHeaderReusing).
func (s *Server) decodeReusing(frame []byte, prev *string) (header, *api, kmsg.Request, error) {
	h, body, err := parseHeaderReusing(frame, prev)
	if err != nil {
		return h, nil, nil, err
	}
	a := s.apis.lookup(h.key)
	if a == nil {
		return h, nil, nil, fmt.Errorf("%w: unknown or unsupported api key %d (version %d)", errBadRequest, h.key, h.version)
	}
	if h.version < a.min || h.version > a.max {
		if h.key == apiVersionsKey {
			h.version, h.flexible = 0, false
			return h, a, nil, errUnsupportedAPIVersions
		}
		return h, nil, nil, fmt.Errorf("%w: %s version %d is not served (%d to %d are)", errBadRequest, kmsg.NameForKey(h.key), h.version, a.min, a.max)
	}
	if body, err = skipHeaderTags(h, body); err != nil {
		return h, nil, nil, err
	}
	req := kmsg.RequestForKey(h.key)
	req.SetVersion(h.version)
	if err := req.ReadFrom(body); err != nil {
		return h, nil, nil, fmt.Errorf("%w: malformed %s v%d: %v", errBadRequest, kmsg.NameForKey(h.key), h.version, err)
	}
	return h, a, req, nil
}

// errBadRequest marks a request the server cannot serve: the connection is
// closed.
var errBadRequest = errors.New("kafka: bad request")

// laneFor orders the produce requests of a connection to the same
// partition: they append in the order they were sent (an idempotent
// producer's sequence numbers depend on it), while those to other
// partitions proceed at once. It returns the earlier produces to wait for
// and the channel to close once this one has its place in the log (see
// order.Placed; at the latest when its handler returns).
func (c *conn) laneFor(req *kmsg.ProduceRequest) ([]chan struct{}, chan struct{}) {
	mine := make(chan struct{})
	var waits []chan struct{}
	c.lanesMu.Lock()
	defer c.lanesMu.Unlock()
	for i := range req.Topics {
		t := &req.Topics[i]
		name := t.Topic
		if req.Version >= 13 {
			name = string(t.TopicID[:]) // a key only: not a valid topic name
		}
		for _, pt := range t.Partitions {
			tp := log.TopicPartition{Topic: name, Partition: int(pt.Partition)}
			if prev, ok := c.lanes[tp]; ok {
				if prev == mine {
					continue
				}
				waits = append(waits, prev)
			}
			c.lanes[tp] = mine
		}
	}
	return waits, mine
}

// leaveLane closes mine and forgets the partitions whose last produce it
// was.
func (c *conn) leaveLane(mine chan struct{}) {
	c.lanesMu.Lock()
	defer c.lanesMu.Unlock()
	close(mine)
	for tp, ch := range c.lanes {
		if ch == mine {
			delete(c.lanes, tp)
		}
	}
}

// enqueue puts p in the order of the responses to write; it blocks while
// MaxInFlight requests are not yet written (backpressure: the connection
// is not read meanwhile). Its handler's worker calls finish once its
// response is set. Reader only.
func (c *conn) enqueue(p *pending) {
	if c.s.cfg.Metrics != nil {
		p.obs.start, p.obs.reqBytes = c.frameAt, c.frameLen
	}
	p.reqBytes, c.frameBytes = c.frameBytes, 0
	c.inFlight.Add(1)
	c.slots <- struct{}{}
	c.wmu.Lock()
	c.push(p)
	c.wmu.Unlock()
}

// enqueueReady puts p, whose response is set, in the order of the
// responses to write; if it is the next to write and no one writes, a
// worker is given the turn (the reader never writes: a client that reads
// no responses must not stop it from reading up to MaxInFlight requests).
// Reader only.
func (c *conn) enqueueReady(p *pending) {
	p.ready = true
	c.enqueue(p)
	c.wmu.Lock()
	turn := c.takeTurnLocked(p)
	c.wmu.Unlock()
	if turn {
		c.start(job{})
	}
}

// enqueueDone queues the response resp to h, already done.
func (c *conn) enqueueDone(h header, resp kmsg.Response) *pending {
	p := newPending(h)
	p.setResponse(resp)
	p.obs.failed = c.s.cfg.Metrics != nil && responseFailed(resp)
	c.enqueueReady(p)
	return p
}

// push appends p to the order. Holds wmu.
func (c *conn) push(p *pending) {
	if c.head > 0 && len(c.order) == cap(c.order) {
		n := copy(c.order, c.order[c.head:])
		clear(c.order[n:])
		c.order, c.head = c.order[:n], 0
	}
	c.order = append(c.order, p)
}

// takeTurnLocked takes the turn to write if no one holds it and p, done,
// is the next response to write. Holds wmu.
func (c *conn) takeTurnLocked(p *pending) bool {
	if c.writing || c.head == len(c.order) || c.order[c.head] != p {
		return false
	}
	c.writing = true
	return true
}

// finish marks p's response set and, if it is the next to write and no
// one writes, writes it and those after it that are done (writeTurn).
func (c *conn) finish(p *pending) {
	c.wmu.Lock()
	p.ready = true
	turn := c.takeTurnLocked(p)
	c.wmu.Unlock()
	if turn {
		c.writeTurn()
	}
}

// writeTurn, called holding the turn, writes the responses done at the
// head of the order, in order, then gives the turn back; it closes the
// connection once the reader has stopped and every response is written.
func (c *conn) writeTurn() {
	c.wmu.Lock()
	for c.head < len(c.order) && c.order[c.head].ready {
		p := c.order[c.head]
		c.order[c.head] = nil
		if c.head++; c.head == len(c.order) {
			c.order, c.head = c.order[:0], 0
		}
		c.wmu.Unlock()
		c.writeOne(p)
		c.wmu.Lock()
	}
	c.writing = false
	last := c.readerDone && c.head == len(c.order)
	c.wmu.Unlock()
	if last {
		c.closeWriting()
	}
}

// readerStopped is the reader's last act: it closes the connection if
// every response is written and no one writes; otherwise the last to
// write does.
func (c *conn) readerStopped() {
	c.wmu.Lock()
	c.readerDone = true
	last := !c.writing && c.head == len(c.order)
	c.wmu.Unlock()
	if last {
		c.closeWriting()
	}
}

// closeWriting closes the connection once the reader has stopped and
// every response is written (or dropped). Called once.
func (c *conn) closeWriting() {
	c.nc.Close()
	c.s.forget(c)
	c.s.wg.Done()
}

// handle runs a request's handler and sets its response. ordered, for a
// produce, lets the connection's next produces to its partitions start
// (order.Placed).
func (c *conn) handle(p *pending, a *api, req kmsg.Request, ordered func()) (handled bool) {
	defer func() {
		// A bug in a handler must not take the server down: the
		// connection is closed and the bug logged.
		if r := recover(); r != nil {
			c.logger.Error("kafka: handler panicked", "api", kmsg.NameForKey(p.h.key), "version", p.h.version, "panic", r)
			p.out, p.closeAfter, p.obs.failed = nil, true, true
		}
	}()
	ctx := c.ctx
	if p.h.key == joinGroupKey || p.h.key == consumerGroupHeartbeatKey {
		// Its client id names the member; a copy, as p is recycled
		// once written and ctx may be kept longer.
		h := p.h
		ctx = context.WithValue(ctx, headerKey{}, &h)
	}
	if ordered != nil {
		// The hook runs ordered once: when the produce has its place
		// (order.Placed), or as handle returns at the latest.
		ctx = order.With(ctx, ordered)
		defer order.Placed(ctx)
	}
	if c.s.caps.quotas != nil {
		c.boundFetchToQuota(&p.h, req) // quota_manager.go
	}
	rep := a.handle(ctx, c, req)
	if c.s.caps.quotas != nil {
		p.throttle = c.throttle(p, req, &rep)
	}
	if c.s.cfg.Metrics != nil {
		p.obs.failed = rep.closeAfter || responseFailed(rep.resp)
	}
	c.encode(p, rep)
	return true
}

// encode sets p's response frame from a handler's reply.
func (c *conn) encode(p *pending, rep reply) {
	switch {
	case rep.none:
	case rep.records != nil:
		for i := range rep.records {
			p.copied += rep.records[i].copied
		}
		p.out, p.files, p.buf = c.s.splice.frame(p.h, rep.resp.(*kmsg.FetchResponse), rep.records, p.buf, p.bufs)
		p.bufs = p.out // kept whole: writing consumes p.out
		c.s.heldFiles.Add(int64(len(p.files)))
	default:
		rep.resp.SetVersion(p.h.version)
		p.setResponse(rep.resp)
	}
	p.closeAfter = rep.closeAfter
}

// writeOne writes p's response, or drops it once writing has failed,
// and gives back what p held. The turn's holder only.
func (c *conn) writeOne(p *pending) {
	defer func() { <-c.slots }() // the reader may read one more request
	if p.delay > 0 && !c.wfailed {
		c.s.authDelayed.Add(1)
		c.pause(p.delay)
		c.s.authDelayed.Add(-1)
	}
	if p.throttle > 0 && !c.wfailed {
		// Muted from as the response is written (KIP-219): set first,
		// so that a client that waits out throttle_time_ms finds the
		// connection open again, and before inFlight drops, which the
		// reader of a throttled connection waits for (waitMuted).
		c.mute(p.throttle)
	}
	c.lastDone.Store(time.Now().UnixNano()) // before inFlight may reach 0: not idle yet
	c.inFlight.Add(-1)
	if c.wfailed {
		c.release(p)
		p.recycle()
		return // dropped: the reader is not kept waiting for a slot
	}
	var outBytes int64
	if c.s.cfg.Metrics != nil {
		outBytes = responseBytes(p) // before writeOut consumes p.out
	}
	failed := false
	if p.out != nil {
		c.setWriteDeadline()
		if err := c.writeOut(p); err != nil {
			c.logger.Debug("kafka: write", "err", err)
			failed = true
		}
	}
	if c.s.cfg.Metrics != nil && !failed {
		c.report(p, outBytes)
	}
	c.release(p)
	c.lastDone.Store(time.Now().UnixNano())
	if p.closeAfter {
		failed = true
	}
	p.recycle()
	if failed {
		// Stop the reader (its next read fails) and what is parked.
		c.wfailed = true
		c.nc.Close()
		c.cancel()
	}
}

// pause waits d, or less if the server closes.
func (c *conn) pause(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.s.ctx.Done():
	}
}

// writeOut writes p's response: its buffers with writev, the record
// batches of its files between them with sendfile.
func (c *conn) writeOut(p *pending) error {
	prev := 0
	for i := range p.files {
		f := &p.files[i]
		bufs := p.out[prev:f.at:f.at]
		if _, err := bufs.WriteTo(c.nc); err != nil {
			return err
		}
		if _, err := f.b.WriteTo(c.nc); err != nil {
			return err
		}
		c.s.sentFiles.Add(1)
		prev = f.at
	}
	if prev == 0 {
		_, err := p.out.WriteTo(c.nc) // p.out, not a copy: no escaping slice header
		return err
	}
	bufs := p.out[prev:]
	_, err := bufs.WriteTo(c.nc)
	return err
}

// release releases the record batches of p's response.
func (c *conn) release(p *pending) {
	for i := range p.files {
		p.files[i].b.Release()
	}
	c.s.heldFiles.Add(-int64(len(p.files)))
	p.files = nil
	c.copied.Add(-p.copied)
	p.copied = 0
	if p.reqBytes != 0 {
		c.freeRequest(p.reqBytes)
		p.reqBytes = 0
	}
}

// reply is what a handler returns.
type reply struct {
	resp kmsg.Response // encoded at the request's version
	// records, for a fetch response, are each partition's records in
	// order, spliced in as they are (see splicer).
	records    []fetched
	none       bool // no response (acks=0 produce)
	closeAfter bool
}

// api is one API the server serves.
type api struct {
	key      int16
	min, max int16
	handle   func(ctx context.Context, c *conn, req kmsg.Request) reply
}

// connLanes returns the produce lanes still open on every connection (for
// tests).
func (s *Server) connLanes() []log.TopicPartition {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []log.TopicPartition
	for c := range s.conns {
		c.lanesMu.Lock()
		for tp := range c.lanes {
			out = append(out, tp)
		}
		c.lanesMu.Unlock()
	}
	return out
}
