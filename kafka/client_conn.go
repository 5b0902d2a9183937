package kafka

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/log"
)

// maxResponseBytes bounds a response frame the client reads.
const maxResponseBytes = 1 << 30

// errConnClosed is the error of requests on a broken or closed connection.
// It matches log.ErrUnreachable.
var errConnClosed error = &unreachableError{"kafka: connection closed"}

// errDial marks a broker that could not be connected to: one that stopped
// or moved, which the next Metadata may route around. It matches
// log.ErrUnreachable.
var errDial error = &unreachableError{"kafka: cannot connect"}

// unreachableError is an error of the client's connections: it matches
// itself and log.ErrUnreachable with errors.Is, so that a Consumer or a
// Producer sees it as transient whatever the cause it wraps (a refused
// connection, or a custom Dial's error).
type unreachableError struct{ msg string }

func (e *unreachableError) Error() string        { return e.msg }
func (e *unreachableError) Is(target error) bool { return target == log.ErrUnreachable }

// brokerConn is the client's connection to one broker: requests are
// pipelined, each waiting for its response by correlation id; one reader
// goroutine, joined by close, reads the responses.
type brokerConn struct {
	addr     string
	nc       net.Conn
	f        *kmsg.RequestFormatter
	versions map[int16]int16 // the broker's max version of each key

	wmu  sync.Mutex // serializes writes and correlation ids
	corr int32

	mu      sync.Mutex
	waiting map[int32]*call
	err     error // sticky: once set the connection is done

	done chan struct{} // closed when the reader exits
}

type call struct {
	req  kmsg.Request
	resp kmsg.Response
	err  error
	done chan struct{}
}

// connSetupTimeout bounds connecting to a broker, its TLS handshake,
// version negotiation and authentication (Kafka's
// socket.connection.setup.timeout.ms): a broker that accepts connections
// but does not answer (a stopped process) is given up on, and the next
// metadata may name another.
const connSetupTimeout = 10 * time.Second

// dialBroker connects, negotiates versions and authenticates.
func dialBroker(parent context.Context, addr string, cfg DialConfig) (*brokerConn, error) {
	ctx, cancel := context.WithTimeout(parent, connSetupTimeout)
	defer cancel()
	// A broker that broke the connection, or did not answer within
	// connSetupTimeout, could not be connected to: errDial, which the
	// next metadata may route around.
	unreachable := func(err error) bool {
		return errors.Is(err, errConnClosed) || parent.Err() == nil && ctx.Err() != nil
	}
	dial := cfg.Dial
	if dial == nil {
		var d net.Dialer
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	nc, err := dial(ctx, addr)
	if err != nil {
		if expired(parent) {
			return nil, fmt.Errorf("kafka: dial %s: %w", addr, doneErr(parent)) // out of the caller's time
		}
		return nil, fmt.Errorf("%w to %s: %w", errDial, addr, err)
	}
	if cfg.TLS != nil {
		tcfg := cfg.TLS
		if tcfg.ServerName == "" && !tcfg.InsecureSkipVerify {
			tcfg = tcfg.Clone()
			tcfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(nc, tcfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			if unreachable(err) {
				return nil, fmt.Errorf("%w to %s: TLS handshake: %w", errDial, addr, err)
			}
			return nil, fmt.Errorf("kafka: dial %s: %w", addr, err)
		}
		nc = tc
	}
	clientID := cfg.ClientID
	if clientID == "" {
		clientID = "strata"
	}
	c := &brokerConn{
		addr:    addr,
		nc:      nc,
		f:       kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)),
		waiting: map[int32]*call{},
		done:    make(chan struct{}),
	}
	go c.read()
	if err := c.handshake(ctx, cfg); err != nil {
		c.close()
		if unreachable(err) {
			return nil, fmt.Errorf("%w to %s: %w", errDial, addr, err)
		}
		return nil, fmt.Errorf("kafka: dial %s: %w", addr, err)
	}
	return c, nil
}

// handshake asks the broker's versions and runs SASL if configured.
func (c *brokerConn) handshake(ctx context.Context, cfg DialConfig) error {
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	av.ClientSoftwareName, av.ClientSoftwareVersion = "strata", "0"
	resp, err := c.roundTrip(ctx, av, false)
	if err != nil {
		return err
	}
	r := resp.(*kmsg.ApiVersionsResponse)
	if r.ErrorCode != errNone {
		return fmt.Errorf("ApiVersions: %w", codeError(r.ErrorCode))
	}
	c.versions = map[int16]int16{}
	for _, k := range r.ApiKeys {
		c.versions[k.ApiKey] = k.MaxVersion
	}
	if cfg.SASL != nil {
		return c.saslAuthenticate(ctx, cfg.SASL)
	}
	return nil
}

// do sends req at the highest version both sides know, capped at max, and
// returns its response.
func (c *brokerConn) do(ctx context.Context, req kmsg.Request, max int16) (kmsg.Response, error) {
	v, ok := c.versions[req.Key()]
	if !ok {
		return nil, fmt.Errorf("kafka: %s does not serve %s", c.addr, kmsg.NameForKey(req.Key()))
	}
	req.SetVersion(min(v, max, req.MaxVersion()))
	return c.roundTrip(ctx, req, false)
}

// doWithin is do bounded by d: a broker that has not answered by then
// (a stopped process) is given up on — the connection is broken, as
// Kafka's clients disconnect past request.timeout.ms — and the error is
// retriable (errConnClosed) while ctx lives.
func (c *brokerConn) doWithin(ctx context.Context, req kmsg.Request, max int16, d time.Duration) (kmsg.Response, error) {
	rctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	resp, err := c.do(rctx, req, max)
	if err != nil && ctx.Err() == nil && rctx.Err() != nil {
		err = fmt.Errorf("%w: %s: no answer to %s within %v", errConnClosed, c.addr, kmsg.NameForKey(req.Key()), d)
		c.fail(err)
	}
	return resp, err
}

// send is do for a request without a response (acks=0 produce).
func (c *brokerConn) send(ctx context.Context, req kmsg.Request, max int16) error {
	v, ok := c.versions[req.Key()]
	if !ok {
		return fmt.Errorf("kafka: %s does not serve %s", c.addr, kmsg.NameForKey(req.Key()))
	}
	req.SetVersion(min(v, max, req.MaxVersion()))
	_, err := c.roundTrip(ctx, req, true)
	return err
}

func (c *brokerConn) roundTrip(ctx context.Context, req kmsg.Request, noResponse bool) (kmsg.Response, error) {
	cl := &call{req: req, done: make(chan struct{})}
	c.wmu.Lock()
	c.corr++
	corr := c.corr
	if !noResponse {
		c.mu.Lock()
		if c.err != nil {
			err := c.err
			c.mu.Unlock()
			c.wmu.Unlock()
			return nil, &notSentError{err}
		}
		c.waiting[corr] = cl
		c.mu.Unlock()
	}
	if dl, ok := ctx.Deadline(); ok {
		c.nc.SetWriteDeadline(dl)
	} else {
		c.nc.SetWriteDeadline(time.Time{})
	}
	_, err := c.nc.Write(c.f.AppendRequest(nil, req, corr))
	c.wmu.Unlock()
	if err != nil {
		c.fail(fmt.Errorf("%w: %s: %w", errConnClosed, c.addr, err))
		if expired(ctx) {
			return nil, doneErr(ctx) // the write ran out of ctx's time: not the broker's doing
		}
		return nil, c.stickyErr()
	}
	if noResponse {
		return nil, nil
	}
	select {
	case <-cl.done:
		return cl.resp, cl.err
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.waiting, corr)
		c.mu.Unlock()
		return nil, ctx.Err()
	}
}

// read is the reader goroutine.
func (c *brokerConn) read() {
	defer close(c.done)
	r := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		frame, _, err := readFrame(r, nil, maxResponseBytes, nil)
		if err == nil && len(frame) < 4 {
			err = fmt.Errorf("%w: response of %d bytes", errBadFrame, len(frame))
		}
		if err != nil {
			c.fail(fmt.Errorf("%w: %s: %w", errConnClosed, c.addr, err))
			return
		}
		corr := int32(binary.BigEndian.Uint32(frame))
		c.mu.Lock()
		cl := c.waiting[corr]
		delete(c.waiting, corr)
		c.mu.Unlock()
		if cl == nil {
			continue // its caller gave up
		}
		cl.resp, cl.err = decodeResponse(cl.req, frame[4:])
		close(cl.done)
	}
}

// decodeResponse decodes the body of the response to req (its header's
// correlation id already read).
func decodeResponse(req kmsg.Request, b []byte) (kmsg.Response, error) {
	if req.IsFlexible() && req.Key() != apiVersionsKey {
		var err error
		if b, err = skipHeaderTags(header{flexible: true}, b); err != nil {
			return nil, err
		}
	}
	resp := req.ResponseKind()
	err := resp.ReadFrom(b)
	if err != nil && req.Key() == apiVersionsKey && req.GetVersion() > 0 {
		// KIP-511: a broker that does not know the version answers in v0.
		resp = req.ResponseKind()
		resp.SetVersion(0)
		err = resp.ReadFrom(b)
	}
	if err != nil {
		return nil, fmt.Errorf("kafka: decode %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}

// fail breaks the connection: every waiting request gets err.
func (c *brokerConn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	waiting := c.waiting
	c.waiting = map[int32]*call{}
	c.mu.Unlock()
	c.nc.Close()
	for _, cl := range waiting {
		cl.err = err
		close(cl.done)
	}
}

func (c *brokerConn) stickyErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// broken reports whether the connection can no longer be used.
func (c *brokerConn) broken() bool { return c.stickyErr() != nil }

// close closes the connection and waits for its reader.
func (c *brokerConn) close() {
	c.fail(errConnClosed)
	<-c.done
}
