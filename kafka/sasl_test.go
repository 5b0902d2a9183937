package kafka

import (
	"crypto/pbkdf2"
	"encoding/base64"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// RFC 7677's SCRAM-SHA-256 example, step by step.
func TestSCRAMRFC7677Vector(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	cred, err := newSCRAMCredential(mechSCRAM256, "pencil", salt, 4096)
	require.NoError(t, err)
	s := newSCRAMServer(scramSHA256, func(u string) (SCRAMCredential, bool) { return cred, u == "user" })
	s.nonce = func() string { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0" }
	first, done, err := s.step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	require.NoError(t, err)
	require.False(t, done)
	require.Equal(t, "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", string(first))
	final, done, err := s.step([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	require.NoError(t, err)
	require.True(t, done)
	require.Equal(t, "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=", string(final))
	require.Equal(t, "user", s.user())
}

func TestSCRAMRejects(t *testing.T) {
	cred, err := NewSCRAMCredential(mechSCRAM256, "pencil", 0)
	require.NoError(t, err)
	lookup := func(u string) (SCRAMCredential, bool) { return cred, u == "user" }
	for _, tc := range []struct{ name, first, final string }{
		{"unknown user", "n,,n=nobody,r=abc", ""},
		{"channel binding", "p=tls-unique,,n=user,r=abc", ""},
		{"no nonce", "n,,n=user", ""},
		{"bad escape", "n,,n=us=er,r=abc", ""},
		{"mandatory extension", "n,,n=user,r=abc,m=x", ""},
		{"garbage", "\x00\xff", ""},
		{"wrong nonce", "n,,n=user,r=abc", "c=biws,r=abcXYZ,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="},
		{"wrong proof", "n,,n=user,r=abc", "c=biws,r=abcN,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="},
		{"wrong binding", "n,,n=user,r=abc", "c=eSws,r=abcN,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="},
		{"no proof", "n,,n=user,r=abc", "c=biws,r=abcN"},
		{"short proof", "n,,n=user,r=abc", "c=biws,r=abcN,p=AAAA"},
	} {
		s := newSCRAMServer(scramSHA256, lookup)
		s.nonce = func() string { return "N" }
		_, _, err := s.step([]byte(tc.first))
		if tc.final != "" {
			require.NoError(t, err, tc.name)
			_, _, err = s.step([]byte(tc.final))
		}
		require.ErrorIs(t, err, errAuthFailed, tc.name)
	}
	_, err = NewSCRAMCredential("SCRAM-MD5", "x", 0)
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = NewSCRAMCredential(mechSCRAM512, "x", 100)
	require.ErrorIs(t, err, ErrInvalidConfig)
}

func TestPlainRejects(t *testing.T) {
	p := &plainServer{lookup: func(u string) (string, bool) { return "pw", u == "alice" }}
	for _, msg := range []string{"alice\x00pw", "\x00alice\x00nope", "\x00bob\x00pw", "bob\x00alice\x00pw", "\x00alice\x00pw\x00", ""} {
		_, _, err := p.step([]byte(msg))
		require.ErrorIs(t, err, errAuthFailed, "%q", msg)
	}
	_, done, err := p.step([]byte("alice\x00alice\x00pw"))
	require.NoError(t, err)
	require.True(t, done)
}

func saslConfig(t *testing.T) *SASLConfig {
	c256, err := NewSCRAMCredential(mechSCRAM256, "s3cret", 0)
	require.NoError(t, err)
	c512, err := NewSCRAMCredential(mechSCRAM512, "s3cret", 0)
	require.NoError(t, err)
	return &SASLConfig{
		Plain:    func(u string) (string, bool) { return "s3cret", u == "alice" },
		SCRAM256: func(u string) (SCRAMCredential, bool) { return c256, u == "alice" },
		SCRAM512: func(u string) (SCRAMCredential, bool) { return c512, u == "alice" },
	}
}

func handshake(c *testClient, v int16, mech string) *kmsg.SASLHandshakeResponse {
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.SetVersion(v)
	req.Mechanism = mech
	return c.do(req).(*kmsg.SASLHandshakeResponse)
}

func authenticate(c *testClient, v int16, msg []byte) *kmsg.SASLAuthenticateResponse {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SetVersion(v)
	req.SASLAuthBytes = msg
	return c.do(req).(*kmsg.SASLAuthenticateResponse)
}

// scramClient runs the client side of SCRAM through send, as RFC 5802
// says, and checks the server's signature.
func scramClient(t *testing.T, h scramHash, user, pass string, send func([]byte) []byte) {
	t.Helper()
	bare := "n=" + user + ",r=clientnonce"
	first := string(send([]byte("n,," + bare)))
	var nonce, salt64 string
	var iters int
	for _, a := range strings.Split(first, ",") {
		switch {
		case strings.HasPrefix(a, "r="):
			nonce = a[2:]
		case strings.HasPrefix(a, "s="):
			salt64 = a[2:]
		case strings.HasPrefix(a, "i="):
			iters, _ = strconv.Atoi(a[2:])
		}
	}
	require.True(t, strings.HasPrefix(nonce, "clientnonce"))
	salt, err := base64.StdEncoding.DecodeString(salt64)
	require.NoError(t, err)
	salted, err := pbkdf2.Key(h.new, pass, salt, iters, h.new().Size())
	require.NoError(t, err)
	clientKey := h.hmac(salted, []byte("Client Key"))
	withoutProof := "c=biws,r=" + nonce
	authMsg := []byte(bare + "," + first + "," + withoutProof)
	sig := h.hmac(h.sum(clientKey), authMsg)
	proof := make([]byte, len(sig))
	for i := range sig {
		proof[i] = clientKey[i] ^ sig[i]
	}
	final := string(send([]byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof))))
	serverSig := h.hmac(h.hmac(salted, []byte("Server Key")), authMsg)
	require.Equal(t, "v="+base64.StdEncoding.EncodeToString(serverSig), final)
}

func TestSASLOverTheWire(t *testing.T) {
	leaktest.Check(t)
	s, _, logs := start(t, Config{SASL: saslConfig(t)})
	served := func(c *testClient) {
		t.Helper()
		resp := c.do(metadataV9()).(*kmsg.MetadataResponse)
		require.Len(t, resp.Brokers, 1)
	}

	t.Run("ApiVersions first, then PLAIN", func(t *testing.T) {
		for v := int16(0); v <= 2; v++ {
			c := dial(t, s.Addr())
			av := kmsg.NewPtrApiVersionsRequest()
			av.SetVersion(3)
			keys := map[int16]bool{}
			for _, k := range c.do(av).(*kmsg.ApiVersionsResponse).ApiKeys {
				keys[k.ApiKey] = true
			}
			require.True(t, keys[saslHandshakeKey] && keys[saslAuthenticateKey])
			hs := handshake(c, 1, "PLAIN")
			require.Equal(t, errNone, hs.ErrorCode)
			require.ElementsMatch(t, []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}, hs.SupportedMechanisms)
			require.Equal(t, errNone, authenticate(c, v, []byte("\x00alice\x00s3cret")).ErrorCode)
			served(c)
			// A second handshake after authenticating is out of order.
			require.Equal(t, errIllegalSaslState, handshake(c, 1, "PLAIN").ErrorCode)
			served(c)
		}
	})
	t.Run("SCRAM", func(t *testing.T) {
		for _, h := range []scramHash{scramSHA256, scramSHA512} {
			c := dial(t, s.Addr())
			require.Equal(t, errNone, handshake(c, 1, h.name).ErrorCode)
			scramClient(t, h, "alice", "s3cret", func(msg []byte) []byte {
				resp := authenticate(c, 2, msg)
				require.Equal(t, errNone, resp.ErrorCode)
				return resp.SASLAuthBytes
			})
			served(c)
		}
	})
	t.Run("SaslHandshake v0 and raw tokens", func(t *testing.T) {
		c := dial(t, s.Addr())
		require.Equal(t, errNone, handshake(c, 0, mechSCRAM512).ErrorCode)
		scramClient(t, scramSHA512, "alice", "s3cret", func(msg []byte) []byte {
			c.write(sized(msg))
			b, err := c.frame()
			require.NoError(t, err)
			return b
		})
		served(c)

		c = dial(t, s.Addr())
		require.Equal(t, errNone, handshake(c, 0, "PLAIN").ErrorCode)
		c.write(sized([]byte("\x00alice\x00s3cret")))
		b, err := c.frame()
		require.NoError(t, err)
		require.Empty(t, b)
		served(c)

		c = dial(t, s.Addr())
		require.Equal(t, errNone, handshake(c, 0, "PLAIN").ErrorCode)
		c.write(sized([]byte("\x00alice\x00wrong")))
		c.closed()
	})
	t.Run("failures close the connection", func(t *testing.T) {
		c := dial(t, s.Addr())
		c.send(metadataV9())
		c.closed()
		require.Contains(t, logs.String(), "request before authentication")

		// Before authenticating, a large frame closes the connection.
		c = dial(t, s.Addr())
		big := kmsg.NewPtrSASLAuthenticateRequest()
		big.SetVersion(1)
		big.SASLAuthBytes = make([]byte, 600<<10)
		c.write(c.f.AppendRequest(nil, big, 1)[:64]) // the size is enough
		c.closed()
		require.Contains(t, logs.String(), "larger than the maximum request size 524288")

		c = dial(t, s.Addr())
		hs := handshake(c, 1, "GSSAPI")
		require.Equal(t, errUnsupportedSaslMechanism, hs.ErrorCode)
		require.NotEmpty(t, hs.SupportedMechanisms)
		c.closed()

		c = dial(t, s.Addr())
		require.Equal(t, errIllegalSaslState, authenticate(c, 1, []byte("\x00alice\x00s3cret")).ErrorCode)
		c.closed()

		c = dial(t, s.Addr())
		require.Equal(t, errNone, handshake(c, 1, "PLAIN").ErrorCode)
		resp := authenticate(c, 1, []byte("\x00alice\x00wrong"))
		require.Equal(t, errSaslAuthenticationFailed, resp.ErrorCode)
		require.NotNil(t, resp.ErrorMessage)
		c.closed()

		c = dial(t, s.Addr())
		require.Equal(t, errNone, handshake(c, 1, mechSCRAM256).ErrorCode)
		require.Equal(t, errSaslAuthenticationFailed, authenticate(c, 1, []byte("n,,n=mallory,r=x")).ErrorCode)
		c.closed()

		c = dial(t, s.Addr())
		require.Equal(t, errNone, handshake(c, 1, "PLAIN").ErrorCode)
		require.Equal(t, errIllegalSaslState, handshake(c, 1, "PLAIN").ErrorCode)
		c.closed()
	})
}
