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
	"testing"
	"time"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/log/logtest"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// With mutual TLS, the principal is the client certificate's subject, as
// Kafka's default principal builder has it ("User:CN=alice,O=acme").
func TestAuthorizeMutualTLSPrincipal(t *testing.T) {
	srvTLS, cliTLS := selfSigned(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "alice", Organization: []string{"acme"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	srvTLS.ClientAuth, srvTLS.ClientCAs = tls.RequireAndVerifyClientCert, pool
	cliTLS.Certificates = []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}

	s, b, _ := start(t, Config{TLS: srvTLS, Authorizer: &acl.Config{}}, logtest.Topic("t", 1))
	do := func(req kmsg.Request) kmsg.Response {
		nc, err := tls.Dial("tcp", s.Addr(), cliTLS)
		require.NoError(t, err)
		defer nc.Close()
		c := &testClient{t: t, nc: nc, r: bufio.NewReader(nc), f: kmsg.NewRequestFormatter()}
		return c.do(req)
	}
	pr := do(produceReq(9, -1, "t", 0, records("x"))).(*kmsg.ProduceResponse)
	require.Equal(t, errTopicAuthorizationFailed, pr.Topics[0].Partitions[0].ErrorCode)
	_, err = b.CreateACLs(t.Context(), []acl.Binding{allowTo("CN=alice,O=acme", acl.OpWrite, acl.Topic("t"))})
	require.NoError(t, err)
	pr = do(produceReq(9, -1, "t", 0, records("x"))).(*kmsg.ProduceResponse)
	require.Equal(t, errNone, pr.Topics[0].Partitions[0].ErrorCode)
}
