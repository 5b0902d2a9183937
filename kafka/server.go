package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/group"
)

// Server serves a Backend to Kafka clients over TCP.
type Server struct {
	b      Backend
	caps   capabilities // b's optional interfaces, resolved by Listen
	cfg    Config
	logger *slog.Logger
	ln     net.Listener
	addr   string
	apis   *apiSet
	groups *group.Coordinator // nil: the group APIs are not served
	splice *splicer
	// sendfileMin is the least record bytes of a partition sent with
	// sendfile; fewer are copied into the response's buffers, one writev
	// being cheaper than three syscalls for small fetches.
	// math.MaxInt64 copies every time (for tests and benchmarks).
	sendfileMin int64
	// frames recycles produce requests' buffers when the backend is a
	// BatchBorrower; nil otherwise.
	frames *framePool
	// idNames caches topic ids ([16]byte) → names for topicName; idKnown
	// the names whose ids it holds, under idMu.
	idNames   sync.Map
	idMu      sync.Mutex
	idKnown   map[string]struct{}
	sentFiles atomic.Int64 // handles written by the writers (for tests)
	heldFiles atomic.Int64 // handles in responses not yet released (for tests)
	// authDelayed counts the connections waiting out a failed
	// authentication's delay (for tests).
	authDelayed atomic.Int64

	ctx    context.Context // cancelled by Close: ends parked requests
	cancel context.CancelFunc

	mu     sync.Mutex // guards conns, perIP and closed
	conns  map[*conn]struct{}
	perIP  map[string]int // connections served by remote IP address
	closed bool
	// refusedAt is when a refused connection was last logged (unix ns):
	// one line a second at most, however many are refused.
	refusedAt atomic.Int64

	wg sync.WaitGroup // the accept loop and every connection's goroutines
}

// Listen listens on addr ("127.0.0.1:0" picks a port) and serves b until
// Close.
func Listen(addr string, b Backend, cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if b == nil {
		return nil, fmt.Errorf("%w: nil backend", ErrInvalidConfig)
	}
	// Plain TCP: Go listens with MPTCP by default where the kernel has
	// it, which sendfile and a test fixture's start need not pay for.
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	ln, err := cfg.Listener, error(nil)
	if ln == nil {
		ln, err = lc.Listen(context.Background(), "tcp", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("kafka: listen: %w", err)
	}
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
	}
	s := &Server{
		b:       b,
		caps:    resolveCapabilities(b),
		cfg:     cfg,
		logger:  cfg.Logger,
		ln:      ln,
		addr:    ln.Addr().String(),
		conns:   map[*conn]struct{}{},
		perIP:   map[string]int{},
		idKnown: map[string]struct{}{},
	}
	if s.caps.borrower != nil && s.caps.borrower.BorrowsBatches() {
		s.frames = &framePool{}
	}
	s.groups = b.GroupCoordinator()
	s.apis = s.apiTable()
	s.splice = newSplicer()
	s.sendfileMin = defaultSendfileMin
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// defaultSendfileMin is Server.sendfileMin's default.
const defaultSendfileMin = 16 << 10

// Addr is the bound host:port.
func (s *Server) Addr() string { return s.addr }

// advertised is the host and port clients are told to connect to.
func (s *Server) advertised() (string, int32) {
	addr := s.cfg.AdvertisedAddr
	if addr == "" {
		addr = s.addr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	var p int32
	fmt.Sscan(port, &p)
	return host, p
}

// Close stops accepting connections, stops reading requests, answers the
// requests already read (parked fetches are answered at once), closes every
// connection and waits for all of the server's goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	err := s.ln.Close()
	s.cancel()
	for _, c := range conns {
		c.shutdown()
	}
	s.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// accept accepts connections until the listener is closed.
func (s *Server) accept() {
	defer s.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: wait a little, as
			// net/http does, unless closing.
			s.logger.Warn("kafka: accept", "err", err, "retry in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-s.ctx.Done():
				t.Stop()
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		ip := remoteIP(nc)
		s.mu.Lock()
		switch limit := s.ipLimit(ip); {
		case s.closed:
			s.mu.Unlock()
			nc.Close()
			return
		case len(s.conns) >= s.cfg.MaxConnections:
			s.mu.Unlock()
			s.refused(nc, "kafka: too many connections: closing a new one", "max", s.cfg.MaxConnections)
			continue
		case limit >= 0 && s.perIP[ip] >= limit:
			s.mu.Unlock()
			s.refused(nc, "kafka: too many connections from one address: closing a new one", "max", limit)
			continue
		}
		c := newConn(s, nc)
		c.ip = ip
		s.conns[c] = struct{}{}
		s.perIP[ip]++
		s.wg.Add(2) // the first goroutine, and the connection's close (closeWriting)
		s.mu.Unlock()
		c.workers.Store(1)
		go c.worker(job{read: true})
	}
}

// forget removes a closed connection.
func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	if s.perIP[c.ip]--; s.perIP[c.ip] <= 0 {
		delete(s.perIP, c.ip)
	}
	s.mu.Unlock()
}

// ipLimit is the most connections served from ip at once; negative: no
// limit.
func (s *Server) ipLimit(ip string) int {
	if n, ok := s.cfg.MaxConnectionsPerIPOverrides[ip]; ok {
		return n
	}
	return s.cfg.MaxConnectionsPerIP
}

// refused closes a connection refused at accept and logs it, one line a
// second at most: a flood of connections must not flood the log too.
func (s *Server) refused(nc net.Conn, msg string, args ...any) {
	defer nc.Close()
	now := time.Now().UnixNano()
	last := s.refusedAt.Load()
	if now-last < int64(time.Second) || !s.refusedAt.CompareAndSwap(last, now) {
		return
	}
	s.logger.Warn(msg, append(args, "remote", nc.RemoteAddr().String())...)
}

// remoteIP is the IP address of nc's peer, in net.IP's canonical form
// (the whole address for a peer that is not IP).
func remoteIP(nc net.Conn) string {
	addr := nc.RemoteAddr()
	if addr == nil {
		return ""
	}
	if a, ok := addr.(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.String()
	}
	return host
}
