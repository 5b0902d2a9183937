package kafka

import (
	"context"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DialSASL is how a Client authenticates: Mechanism is "PLAIN",
// "SCRAM-SHA-256" or "SCRAM-SHA-512".
type DialSASL struct {
	Mechanism      string
	User, Password string
}

// saslAuthenticate runs SaslHandshake v1 and the mechanism's exchange in
// SaslAuthenticate requests.
func (c *brokerConn) saslAuthenticate(ctx context.Context, cfg *DialSASL) error {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = cfg.Mechanism
	resp, err := c.do(ctx, hs, 1)
	if err != nil {
		return err
	}
	if code := resp.(*kmsg.SASLHandshakeResponse).ErrorCode; code != errNone {
		return fmt.Errorf("SASL handshake %s: %w", cfg.Mechanism, codeError(code))
	}
	step := func(msg []byte) ([]byte, error) {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SASLAuthBytes = msg
		resp, err := c.do(ctx, req, 2)
		if err != nil {
			return nil, err
		}
		r := resp.(*kmsg.SASLAuthenticateResponse)
		if r.ErrorCode != errNone {
			return nil, fmt.Errorf("SASL %s: %w", cfg.Mechanism, codeError(r.ErrorCode))
		}
		return r.SASLAuthBytes, nil
	}
	switch cfg.Mechanism {
	case mechPlain:
		_, err := step([]byte("\x00" + cfg.User + "\x00" + cfg.Password))
		return err
	case mechSCRAM256:
		return scramClientExchange(scramSHA256, cfg.User, cfg.Password, step)
	case mechSCRAM512:
		return scramClientExchange(scramSHA512, cfg.User, cfg.Password, step)
	}
	return fmt.Errorf("%w: SASL mechanism %q", ErrInvalidConfig, cfg.Mechanism)
}

// scramClientExchange is the client side of SCRAM (RFC 5802): it proves the
// password and checks the server's signature.
func scramClientExchange(h scramHash, user, pass string, step func([]byte) ([]byte, error)) error {
	nb := make([]byte, 18)
	rand.Read(nb)
	nonce := base64.RawStdEncoding.EncodeToString(nb)
	name := strings.NewReplacer("=", "=3D", ",", "=2C").Replace(user)
	bare := "n=" + name + ",r=" + nonce
	first, err := step([]byte("n,," + bare))
	if err != nil {
		return err
	}
	var full, salt64 string
	iters := 0
	for _, a := range strings.Split(string(first), ",") {
		switch {
		case strings.HasPrefix(a, "r="):
			full = a[2:]
		case strings.HasPrefix(a, "s="):
			salt64 = a[2:]
		case strings.HasPrefix(a, "i="):
			iters, _ = strconv.Atoi(a[2:])
		}
	}
	salt, err := base64.StdEncoding.DecodeString(salt64)
	if err != nil || !strings.HasPrefix(full, nonce) || len(full) == len(nonce) || iters < minSCRAMIterations {
		return fmt.Errorf("%w: SCRAM: bad server-first-message", errAuthFailed)
	}
	salted, err := pbkdf2.Key(h.new, pass, salt, iters, h.new().Size())
	if err != nil {
		return err
	}
	clientKey := h.hmac(salted, []byte("Client Key"))
	withoutProof := "c=biws,r=" + full
	authMsg := []byte(bare + "," + string(first) + "," + withoutProof)
	sig := h.hmac(h.sum(clientKey), authMsg)
	proof := make([]byte, len(sig))
	for i := range sig {
		proof[i] = clientKey[i] ^ sig[i]
	}
	final, err := step([]byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)))
	if err != nil {
		return err
	}
	want := "v=" + base64.StdEncoding.EncodeToString(h.hmac(h.hmac(salted, []byte("Server Key")), authMsg))
	if subtle.ConstantTimeCompare(final, []byte(want)) != 1 {
		return fmt.Errorf("%w: SCRAM: the server's signature does not match", errAuthFailed)
	}
	return nil
}
