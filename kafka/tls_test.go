package kafka

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log/logtest"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// selfSigned returns a server TLS config for 127.0.0.1 and a client
// config that trusts it.
func selfSigned(t *testing.T) (server, client *tls.Config) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "strata test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
		&tls.Config{RootCAs: pool}
}

func TestTLSWithSASL(t *testing.T) {
	leaktest.Check(t)
	srvTLS, cliTLS := selfSigned(t)
	s, _, _ := start(t, Config{TLS: srvTLS, SASL: saslConfig(t)}, logtest.Topic("t", 1))
	nc, err := tls.Dial("tcp", s.Addr(), cliTLS)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	c := &testClient{t: t, nc: nc, r: bufio.NewReader(nc), f: kmsg.NewRequestFormatter()}
	require.Equal(t, errNone, handshake(c, 1, mechSCRAM256).ErrorCode)
	scramClient(t, scramSHA256, "alice", "s3cret", func(msg []byte) []byte {
		return authenticate(c, 2, msg).SASLAuthBytes
	})
	pr := c.do(produceReq(9, -1, "t", 0, records("over", "tls"))).(*kmsg.ProduceResponse)
	require.Equal(t, errNone, pr.Topics[0].Partitions[0].ErrorCode)
	fr := c.do(fetchReq(12, "t", 0, 0, time.Second)).(*kmsg.FetchResponse)
	require.Equal(t, []string{"over", "tls"}, values(t, fr.Topics[0].Partitions[0].RecordBatches))

	// A plaintext client gets nothing and is closed.
	plain := dial(t, s.Addr())
	plain.send(metadataV9())
	plain.closed()
}
