package kafka

import (
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// SASL (KIP-43, KIP-152): a connection that must authenticate may send
// ApiVersions, then SaslHandshake naming a mechanism, then the mechanism's
// messages — in SaslAuthenticate requests after SaslHandshake v1, or as
// raw size-prefixed tokens after v0. Until it has authenticated, its
// requests are handled by the reader one at a time, and any other request
// closes it. A failed authentication is answered (SaslAuthenticate) and
// the connection closed.

// Mechanism names.
const (
	mechPlain    = "PLAIN"
	mechSCRAM256 = "SCRAM-SHA-256"
	mechSCRAM512 = "SCRAM-SHA-512"
)

// saslState is a connection's progress through authentication.
type saslState struct {
	done bool
	mech mechanism // chosen by SaslHandshake; nil before
	raw  bool      // SaslHandshake v0: raw tokens follow
	user string    // once done
}

// mechanism is one SASL exchange on the server side.
type mechanism interface {
	// step takes the client's next message and returns the server's
	// answer; done once the client is authenticated.
	step(msg []byte) (answer []byte, done bool, err error)
	user() string
}

// errAuthFailed is a failed authentication.
var errAuthFailed = errors.New("kafka: authentication failed")

// mechanisms lists the mechanisms cfg offers.
func (cfg *SASLConfig) mechanisms() []string {
	var out []string
	if cfg.Plain != nil {
		out = append(out, mechPlain)
	}
	if cfg.SCRAM256 != nil {
		out = append(out, mechSCRAM256)
	}
	if cfg.SCRAM512 != nil {
		out = append(out, mechSCRAM512)
	}
	return out
}

// start returns an exchange of the named mechanism, nil if not offered.
// A SCRAM user's credential is runtime's if it has one (nil: none), else
// cfg's.
func (cfg *SASLConfig) start(name string, runtime SCRAMBackend) mechanism {
	switch {
	case name == mechPlain && cfg.Plain != nil:
		return &plainServer{lookup: cfg.Plain}
	case name == mechSCRAM256 && cfg.SCRAM256 != nil:
		return newSCRAMServer(scramSHA256, scramLookup(runtime, scramSHA256, cfg.SCRAM256))
	case name == mechSCRAM512 && cfg.SCRAM512 != nil:
		return newSCRAMServer(scramSHA512, scramLookup(runtime, scramSHA512, cfg.SCRAM512))
	}
	return nil
}

// authenticate handles a request of a connection that has not
// authenticated yet; false closes the connection.
func (c *conn) authenticate(h header, req kmsg.Request) bool {
	st, cfg := c.sasl, c.s.cfg.SASL
	switch req := req.(type) {
	case *kmsg.ApiVersionsRequest:
		resp := c.s.apiVersions(errNone)
		resp.SetVersion(h.version)
		c.enqueueDone(h, resp)
		return true
	case *kmsg.SASLHandshakeRequest:
		resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
		resp.SupportedMechanisms = cfg.mechanisms()
		if st.mech != nil {
			resp.ErrorCode = errIllegalSaslState
			c.failAuth(h, resp)
			return false
		}
		st.mech = cfg.start(req.Mechanism, c.s.caps.scram)
		if st.mech == nil {
			c.logger.Warn("kafka: SASL mechanism not offered", "mechanism", req.Mechanism)
			resp.ErrorCode = errUnsupportedSaslMechanism
			c.failAuth(h, resp)
			return false
		}
		st.raw = h.version == 0
		c.enqueueDone(h, resp)
		return true
	case *kmsg.SASLAuthenticateRequest:
		resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		if st.mech == nil || st.raw {
			resp.ErrorCode = errIllegalSaslState
			resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate before SaslHandshake v1")
			c.failAuth(h, resp)
			return false
		}
		answer, done, err := st.mech.step(req.SASLAuthBytes)
		if err != nil {
			c.logger.Warn("kafka: SASL authentication failed", "err", err)
			resp.ErrorCode = errSaslAuthenticationFailed
			resp.ErrorMessage = kmsg.StringPtr("authentication failed")
			c.failAuth(h, resp)
			return false
		}
		resp.SASLAuthBytes = answer
		c.enqueueDone(h, resp)
		if done {
			c.authenticated()
		}
		return true
	}
	c.logger.Warn("kafka: closing connection: request before authentication", "api", kmsg.NameForKey(h.key))
	c.failAuth(h, nil)
	return false
}

// failAuth queues the answer to a failed authentication, resp (nil: none),
// to be written after Config.FailedAuthenticationDelay, as Kafka does, and
// the connection closed then: a client guessing passwords gets one guess
// per connection and delay. The worker writing it waits, nothing else.
func (c *conn) failAuth(h header, resp kmsg.Response) {
	p := &pending{h: h, closeAfter: true, delay: c.s.cfg.FailedAuthenticationDelay}
	if resp != nil {
		p.out = net.Buffers{appendResponse(nil, h, resp)}
	}
	p.obs.failed = true
	c.enqueueReady(p)
}

// rawToken handles one raw SASL token (after SaslHandshake v0): the
// answer goes back size-prefixed; a failure closes the connection without
// one, as Kafka does.
func (c *conn) rawToken(tok []byte) bool {
	answer, done, err := c.sasl.mech.step(tok)
	if err != nil {
		c.logger.Warn("kafka: SASL authentication failed", "err", err)
		c.failAuth(header{}, nil)
		return false
	}
	p := &pending{}
	p.out = net.Buffers{binary.BigEndian.AppendUint32(nil, uint32(len(answer))), answer}
	c.enqueueReady(p)
	if done {
		c.authenticated()
	}
	return true
}

func (c *conn) authenticated() {
	c.sasl.done, c.sasl.user = true, c.sasl.mech.user()
	c.logger = c.logger.With("user", c.sasl.user)
	c.logger.Debug("kafka: authenticated")
}

// plainServer is SASL PLAIN (RFC 4616): one message, authzid NUL authcid
// NUL password.
type plainServer struct {
	lookup func(string) (string, bool)
	name   string
}

func (p *plainServer) user() string { return p.name }

func (p *plainServer) step(msg []byte) ([]byte, bool, error) {
	var parts [3][]byte
	n := 0
	start := 0
	for i, b := range msg {
		if b == 0 {
			if n == 2 {
				return nil, false, fmt.Errorf("%w: PLAIN message with more than 3 fields", errAuthFailed)
			}
			parts[n], n, start = msg[start:i], n+1, i+1
		}
	}
	if n != 2 {
		return nil, false, fmt.Errorf("%w: PLAIN message needs 3 fields", errAuthFailed)
	}
	parts[2] = msg[start:]
	authz, user, pass := string(parts[0]), string(parts[1]), parts[2]
	if authz != "" && authz != user {
		return nil, false, fmt.Errorf("%w: PLAIN: %q may not act as %q", errAuthFailed, user, authz)
	}
	want, ok := p.lookup(user)
	// Compare even for an unknown user, so that the time taken does not
	// tell which users exist. An empty password is never right.
	if subtle.ConstantTimeCompare([]byte(want), pass) != 1 || !ok || want == "" {
		return nil, false, fmt.Errorf("%w: PLAIN: bad user or password for %q", errAuthFailed, user)
	}
	p.name = user
	return nil, true, nil
}
