package kafka

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"hash"
	"strconv"
	"strings"
)

// SCRAM (RFC 5802, RFC 7677), as Kafka does it (KIP-84): no channel
// binding; the "tokenauth" extension is not supported.

// SCRAMCredential is what a server keeps of a SCRAM user's password (RFC
// 5802): never the password itself.
type SCRAMCredential struct {
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}

type scramHash struct {
	name string
	new  func() hash.Hash
}

var (
	scramSHA256 = scramHash{mechSCRAM256, sha256.New}
	scramSHA512 = scramHash{mechSCRAM512, sha512.New}
)

// minSCRAMIterations is Kafka's minimum (and default) iteration count.
const minSCRAMIterations = 4096

// NewSCRAMCredential derives the credential of password for mechanism
// ("SCRAM-SHA-256" or "SCRAM-SHA-512") with a random salt; iterations 0 →
// 4096, Kafka's minimum. An empty password is ErrInvalidConfig.
func NewSCRAMCredential(mechanism, password string, iterations int) (SCRAMCredential, error) {
	if password == "" {
		return SCRAMCredential{}, fmt.Errorf("%w: empty SCRAM password", ErrInvalidConfig)
	}
	salt := make([]byte, 24)
	rand.Read(salt)
	return newSCRAMCredential(mechanism, password, salt, iterations)
}

func newSCRAMCredential(mechanism, password string, salt []byte, iterations int) (SCRAMCredential, error) {
	var h scramHash
	switch mechanism {
	case mechSCRAM256:
		h = scramSHA256
	case mechSCRAM512:
		h = scramSHA512
	default:
		return SCRAMCredential{}, fmt.Errorf("%w: SCRAM mechanism %q", ErrInvalidConfig, mechanism)
	}
	if iterations == 0 {
		iterations = minSCRAMIterations
	}
	if iterations < minSCRAMIterations {
		return SCRAMCredential{}, fmt.Errorf("%w: %d SCRAM iterations < %d", ErrInvalidConfig, iterations, minSCRAMIterations)
	}
	salted, err := pbkdf2.Key(h.new, password, salt, iterations, h.new().Size())
	if err != nil {
		return SCRAMCredential{}, fmt.Errorf("kafka: SCRAM credential: %w", err)
	}
	clientKey := h.hmac(salted, []byte("Client Key"))
	return SCRAMCredential{
		Salt:       salt,
		Iterations: iterations,
		StoredKey:  h.sum(clientKey),
		ServerKey:  h.hmac(salted, []byte("Server Key")),
	}, nil
}

func (h scramHash) hmac(key, msg []byte) []byte {
	m := hmac.New(h.new, key)
	m.Write(msg)
	return m.Sum(nil)
}

func (h scramHash) sum(b []byte) []byte {
	d := h.new()
	d.Write(b)
	return d.Sum(nil)
}

// scramServer is the server side of one SCRAM exchange: client-first →
// server-first, client-final → server-final.
type scramServer struct {
	h      scramHash
	lookup func(string) (SCRAMCredential, bool)
	nonce  func() string // the server's nonce part (tests fix it)

	stage      int
	name       string
	cred       SCRAMCredential
	gs2        string // the client's GS2 header, "n,,"
	clientBare string // client-first-message-bare
	server1    string // server-first-message
	fullNonce  string
}

func newSCRAMServer(h scramHash, lookup func(string) (SCRAMCredential, bool)) *scramServer {
	return &scramServer{h: h, lookup: lookup, nonce: func() string {
		b := make([]byte, 18)
		rand.Read(b)
		return base64.RawStdEncoding.EncodeToString(b)
	}}
}

func (s *scramServer) user() string { return s.name }

func scramFail(format string, args ...any) error {
	return fmt.Errorf("%w: SCRAM: "+format, append([]any{errAuthFailed}, args...)...)
}

func (s *scramServer) step(msg []byte) ([]byte, bool, error) {
	switch s.stage {
	case 0:
		s.stage++
		return s.first(string(msg))
	case 1:
		s.stage++
		return s.final(string(msg))
	}
	return nil, false, scramFail("message after the exchange ended")
}

// first reads client-first-message: gs2-header client-first-message-bare,
// "n,,n=user,r=nonce".
func (s *scramServer) first(msg string) ([]byte, bool, error) {
	// gs2-header: cbind-flag "," [authzid] ","
	flag, rest, ok := strings.Cut(msg, ",")
	if !ok || (flag != "n" && flag != "y") {
		return nil, false, scramFail("channel binding %q is not supported", flag)
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, false, scramFail("truncated client-first-message")
	}
	s.gs2 = flag + "," + authz + ","
	s.clientBare = bare
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") {
		return nil, false, scramFail("client-first-message needs n= and r=")
	}
	for _, ext := range attrs[2:] {
		if strings.HasPrefix(ext, "m=") || strings.HasPrefix(ext, "tokenauth=") {
			return nil, false, scramFail("extension %q is not supported", ext)
		}
	}
	name, err := scramUnescape(attrs[0][2:])
	if err != nil {
		return nil, false, err
	}
	if authz != "" && authz != "a="+attrs[0][2:] {
		return nil, false, scramFail("%q may not act as %q", name, authz)
	}
	clientNonce := attrs[1][2:]
	if clientNonce == "" || strings.ContainsAny(clientNonce, ",") {
		return nil, false, scramFail("bad client nonce")
	}
	cred, ok := s.lookup(name)
	if !ok {
		return nil, false, scramFail("unknown user %q", name)
	}
	s.name, s.cred = name, cred
	s.fullNonce = clientNonce + s.nonce()
	s.server1 = "r=" + s.fullNonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(cred.Iterations)
	return []byte(s.server1), false, nil
}

// final reads client-final-message, "c=biws,r=nonce,p=proof", and checks
// the proof.
func (s *scramServer) final(msg string) ([]byte, bool, error) {
	withoutProof, proof64, ok := strings.Cut(msg, ",p=")
	if !ok || strings.Contains(proof64, ",") {
		return nil, false, scramFail("client-final-message needs p= last")
	}
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return nil, false, scramFail("client-final-message needs c= and r=")
	}
	cbind, err := base64.StdEncoding.DecodeString(attrs[0][2:])
	if err != nil || string(cbind) != s.gs2 {
		return nil, false, scramFail("channel binding does not match the GS2 header")
	}
	if subtle.ConstantTimeCompare([]byte(attrs[1][2:]), []byte(s.fullNonce)) != 1 {
		return nil, false, scramFail("nonce does not match")
	}
	proof, err := base64.StdEncoding.DecodeString(proof64)
	if err != nil || len(proof) != len(s.cred.StoredKey) {
		return nil, false, scramFail("bad proof encoding")
	}
	authMsg := []byte(s.clientBare + "," + s.server1 + "," + withoutProof)
	sig := s.h.hmac(s.cred.StoredKey, authMsg)
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ sig[i]
	}
	if subtle.ConstantTimeCompare(s.h.sum(clientKey), s.cred.StoredKey) != 1 {
		return nil, false, scramFail("bad password for %q", s.name)
	}
	serverSig := s.h.hmac(s.cred.ServerKey, authMsg)
	return []byte("v=" + base64.StdEncoding.EncodeToString(serverSig)), true, nil
}

// scramUnescape decodes a SCRAM saslname: "=2C" is ",", "=3D" is "=".
func scramUnescape(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b bytes.Buffer
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", scramFail("bad escape in user name %q", s)
		}
		i += 2
	}
	return b.String(), nil
}
