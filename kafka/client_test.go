package kafka

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// testClient frames kmsg requests over one real loopback connection.
type testClient struct {
	t    testing.TB
	nc   net.Conn
	r    *bufio.Reader
	corr int32
	f    *kmsg.RequestFormatter
}

func dial(t testing.TB, addr string) *testClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { nc.Close() })
	return &testClient{t: t, nc: nc, r: bufio.NewReader(nc), f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("test"))}
}

// send writes req at its version and returns its correlation id.
func (c *testClient) send(req kmsg.Request) int32 {
	c.t.Helper()
	c.corr++
	c.write(c.f.AppendRequest(nil, req, c.corr))
	return c.corr
}

func (c *testClient) write(b []byte) {
	c.t.Helper()
	c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// frame reads one response frame.
func (c *testClient) frame() ([]byte, error) {
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(c.r, b)
	return b, err
}

// recv reads the response to req, which must have correlation id corr.
func (c *testClient) recv(req kmsg.Request, corr int32) kmsg.Response {
	c.t.Helper()
	b, err := c.frame()
	if err != nil {
		c.t.Fatalf("read response to %s: %v", kmsg.NameForKey(req.Key()), err)
	}
	if got := int32(binary.BigEndian.Uint32(b)); got != corr {
		c.t.Fatalf("response to %s has correlation id %d, want %d", kmsg.NameForKey(req.Key()), got, corr)
	}
	b = b[4:]
	if req.IsFlexible() && req.Key() != apiVersionsKey {
		if len(b) == 0 || b[0] != 0 {
			c.t.Fatalf("response to %s: bad header tags", kmsg.NameForKey(req.Key()))
		}
		b = b[1:]
	}
	resp := req.ResponseKind()
	if err := resp.ReadFrom(b); err != nil {
		c.t.Fatalf("decode response to %s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

// do sends req and returns its response.
func (c *testClient) do(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	return c.recv(req, c.send(req))
}

// closed checks that the server closes the connection without another
// response.
func (c *testClient) closed() {
	c.t.Helper()
	b, err := c.frame()
	if err == nil {
		c.t.Fatalf("got a %d-byte response, want the connection closed", len(b))
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatalf("connection still open: %v", err)
	}
}
