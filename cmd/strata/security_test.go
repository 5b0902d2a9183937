package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCA writes, in dir, a CA certificate and a certificate with its key
// for 127.0.0.1 and "localhost" signed by it: <name>-ca.pem, <name>.pem,
// <name>-key.pem (and <name>-both.pem, key and certificate in one file,
// Kafka's PEM keystore).
func testCA(t *testing.T, dir, name string) (ca, cert, key, both string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature,
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(leafKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(file string, blocks ...*pem.Block) string {
		var b []byte
		for _, bl := range blocks {
			b = append(b, pem.EncodeToMemory(bl)...)
		}
		p := filepath.Join(dir, file)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	certBlock := &pem.Block{Type: "CERTIFICATE", Bytes: leafDER}
	keyBlock := &pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}
	return write(name+"-ca.pem", &pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		write(name+".pem", certBlock), write(name+"-key.pem", keyBlock), write(name+"-both.pem", keyBlock, certBlock)
}

// serve with TLS and SASL; the topics, produce, consume and groups
// commands reach it with the client flags or with a Kafka properties file,
// and fail, saying why, without them or with a wrong password.
func TestSecureServe(t *testing.T) {
	tmp := t.TempDir()
	ca, cert, key, _ := testCA(t, tmp, "broker")
	users := filepath.Join(tmp, "users")
	if err := os.WriteFile(users, []byte("# the users\nalice:s3cret\nbob:hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, filepath.Join(tmp, "data"), "--tls-cert", cert, "--tls-key", key, "--sasl-users", users)
	defer s.stop(t)
	flags := []string{"--bootstrap-server", s.addr, "--tls-ca", ca, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "alice", "--sasl-password", "s3cret"}
	with := func(args ...string) []string { return append(args, flags...) }

	ok(t, "", "", with("topics", "create", "--topic", "secure", "--partitions", "2")...)
	if out := ok(t, "", "", with("topics", "list")...); strings.TrimSpace(out) != "secure" {
		t.Fatalf("topics list over TLS+SASL: %q", out)
	}
	ok(t, "", "k1:v1\nk2:v2\n", with("produce", "--topic", "secure", "--key-separator", ":")...)
	out := ok(t, "", "", with("consume", "--topic", "secure", "--from-beginning", "--exit-at-end", "-f", "%k=%s\n")...)
	if got := strings.Fields(out); len(got) != 2 {
		t.Fatalf("consume over TLS+SASL: %q", out)
	}

	// The same through a Kafka client properties file: SASL_SSL, PLAIN,
	// the JAAS line, a PEM truststore.
	props := filepath.Join(tmp, "client.properties")
	os.WriteFile(props, []byte(strings.Join([]string{
		"security.protocol=SASL_SSL",
		"sasl.mechanism=PLAIN",
		`sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \`,
		`    username="bob" password="hunter2";`,
		"ssl.truststore.type=PEM",
		"ssl.truststore.location=" + ca,
	}, "\n")), 0o600)
	out = ok(t, "", "", "consume", "--bootstrap-server", s.addr, "--command-config", props, "--topic", "secure", "--from-beginning", "--exit-at-end")
	if got := strings.Fields(out); len(got) != 2 {
		t.Fatalf("consume with --command-config: %q", out)
	}
	// The password from the environment.
	cmd := []string{"topics", "list", "--bootstrap-server", s.addr, "--tls-ca", ca, "--sasl-mechanism", "PLAIN", "--sasl-username", "bob"}
	t.Setenv("STRATA_SASL_PASSWORD", "hunter2")
	if out := ok(t, "", "", cmd...); strings.TrimSpace(out) != "secure" {
		t.Fatalf("topics list with $STRATA_SASL_PASSWORD: %q", out)
	}
	t.Setenv("STRATA_SASL_PASSWORD", "")

	for _, bad := range [][]string{
		{"topics", "list", "--bootstrap-server", s.addr},                 // plaintext to a TLS listener
		{"topics", "list", "--bootstrap-server", s.addr, "--tls-ca", ca}, // no SASL
		{"topics", "list", "--bootstrap-server", s.addr, "--tls-ca", ca, "--sasl-mechanism", "PLAIN", "--sasl-username", "alice", "--sasl-password", "wrong"},
		{"topics", "list", "--bootstrap-server", s.addr, "--sasl-mechanism", "PLAIN", "--sasl-username", "alice", "--sasl-password", "s3cret", "--tls"}, // CA not trusted
	} {
		r := strata(t, "", "", bad...)
		if r.code == 0 {
			t.Errorf("strata %s: exit 0, want a failure; stdout %q", strings.Join(bad, " "), r.stdout)
		}
	}
}

// A broker that requires client certificates (--tls-client-ca) takes a
// client with a certificate of that CA and refuses one without.
func TestServeMutualTLS(t *testing.T) {
	tmp := t.TempDir()
	ca, cert, key, _ := testCA(t, tmp, "broker")
	clientCA, _, _, clientBoth := testCA(t, tmp, "client")
	s := startServe(t, filepath.Join(tmp, "data"), "--tls-cert", cert, "--tls-key", key, "--tls-client-ca", clientCA)
	defer s.stop(t)
	ok(t, "", "", "topics", "create", "--topic", "m", "--bootstrap-server", s.addr, "--tls-ca", ca, "--tls-cert", clientBoth, "--tls-key", clientBoth)
	props := filepath.Join(tmp, "client.properties")
	os.WriteFile(props, []byte("security.protocol=SSL\nssl.truststore.location="+ca+"\nssl.keystore.type=PEM\nssl.keystore.location="+clientBoth+"\n"), 0o600)
	if out := ok(t, "", "", "topics", "list", "--bootstrap-server", s.addr, "--command-config", props); strings.TrimSpace(out) != "m" {
		t.Fatalf("topics list with a PEM keystore: %q", out)
	}
	if r := strata(t, "", "", "topics", "list", "--bootstrap-server", s.addr, "--tls-ca", ca); r.code == 0 {
		t.Errorf("a client without a certificate was served: %q", r.stdout)
	}
}

func TestClientSecurityFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--sasl-username", "a"},
		{"--sasl-mechanism", "PLAIN"},
		{"--sasl-mechanism", "GSSAPI", "--sasl-username", "a"},
		{"--tls-cert", "x.pem"},
		{"--tls-ca", "/does/not/exist"},
		{"--command-config", "/does/not/exist"},
	} {
		r := strata(t, "", "", append([]string{"topics", "list", "--bootstrap-server", "127.0.0.1:1"}, args...)...)
		if r.code != 2 {
			t.Errorf("topics list %s: exit %d, want 2 (usage); stderr %q", strings.Join(args, " "), r.code, r.stderr)
		}
	}
}
