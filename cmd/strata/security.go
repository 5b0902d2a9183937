package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/strata-log/strata/kafka"
)

// clientSecurity is how a command connects to --bootstrap-server: TLS and
// SASL from flags of their own, or from a Kafka client properties file
// (--command-config, as Kafka's tools take), the flags winning.
type clientSecurity struct {
	commandConfig string

	tls                       bool
	caFile, certFile, keyFile string
	serverName                string
	insecureSkipVerify        bool
	skipHostname              bool // ssl.endpoint.identification.algorithm= (empty)
	mechanism, user, password string
	passwordSet, tlsSet       bool

	// props are the security properties of --producer.config,
	// --consumer.config and their -property flags: read as
	// --command-config's, and winning over them.
	props    map[string]string
	clientID string // client.id of those; "" → "strata"
}

func (s *clientSecurity) register(fs *flag.FlagSet) {
	fs.StringVar(&s.commandConfig, "command-config", "", "`FILE`: Kafka client properties (security.protocol, sasl.mechanism, sasl.jaas.config,\nssl.truststore.location and ssl.keystore.location of PEM files, ssl.endpoint.identification.algorithm)")
	fs.Var((*tlsFlag)(s), "tls", "connect with TLS (implied by the other --tls flags; --tls=false turns it off)")
	fs.StringVar(&s.caFile, "tls-ca", "", "`FILE`: PEM certificates of the CAs to trust (default: the system's)")
	fs.StringVar(&s.certFile, "tls-cert", "", "`FILE`: PEM client certificate, for brokers that require one")
	fs.StringVar(&s.keyFile, "tls-key", "", "`FILE`: PEM private key of --tls-cert")
	fs.StringVar(&s.serverName, "tls-server-name", "", "`NAME` to verify the broker's certificate against (default: the host of the address)")
	fs.BoolVar(&s.insecureSkipVerify, "tls-insecure-skip-verify", false, "do not verify the broker's certificate (tests only)")
	fs.StringVar(&s.mechanism, "sasl-mechanism", "", "`MECH`: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	fs.StringVar(&s.user, "sasl-username", "", "`USER` to authenticate as")
	fs.Func("sasl-password", "`PASSWORD` of --sasl-username (default: $STRATA_SASL_PASSWORD)", func(v string) error {
		s.password, s.passwordSet = v, true
		return nil
	})
}

// tlsFlag is --tls: a boolean flag that remembers being set.
type tlsFlag clientSecurity

func (f *tlsFlag) IsBoolFlag() bool { return true }
func (f *tlsFlag) String() string {
	if f != nil && f.tls {
		return "true"
	}
	return "false"
}
func (f *tlsFlag) Set(v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return err
	}
	f.tls, f.tlsSet = b, true
	return nil
}

// dialConfig returns the kafka.DialConfig of seeds with the TLS and SASL
// the flags and the properties file ask for.
func (s *clientSecurity) dialConfig(seeds []string) (kafka.DialConfig, error) {
	cfg := kafka.DialConfig{Seeds: seeds, ClientID: "strata"}
	if s.clientID != "" {
		cfg.ClientID = s.clientID
	}
	eff := *s
	if s.commandConfig != "" || len(s.props) > 0 {
		props := map[string]string{}
		if s.commandConfig != "" {
			var err error
			if props, err = readProperties(s.commandConfig); err != nil {
				return cfg, usagef("--command-config: %v", err)
			}
		}
		for k, v := range s.props {
			props[k] = v
		}
		if err := eff.applyProperties(props); err != nil {
			if s.commandConfig == "" {
				return cfg, usagef("client properties: %v", err)
			}
			return cfg, usagef("--command-config %s: %v", s.commandConfig, err)
		}
		eff.overlay(s)
	}
	if !eff.passwordSet {
		eff.password = os.Getenv("STRATA_SASL_PASSWORD")
	}
	useTLS := eff.tls || eff.caFile != "" || eff.certFile != "" || eff.keyFile != "" || eff.serverName != "" || eff.insecureSkipVerify || eff.skipHostname
	if s.tlsSet && !s.tls {
		useTLS = false
	}
	if useTLS {
		tc, err := eff.tlsConfig()
		if err != nil {
			return cfg, err
		}
		cfg.TLS = tc
	}
	switch {
	case eff.mechanism == "" && eff.user == "":
	case eff.mechanism == "":
		return cfg, usagef("--sasl-username needs --sasl-mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)")
	case eff.user == "":
		return cfg, usagef("--sasl-mechanism needs --sasl-username")
	default:
		mech := strings.ToUpper(eff.mechanism)
		switch mech {
		case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		default:
			return cfg, usagef("--sasl-mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", eff.mechanism)
		}
		cfg.SASL = &kafka.DialSASL{Mechanism: mech, User: eff.user, Password: eff.password}
	}
	return cfg, nil
}

// overlay copies the fields set by flags over those read from the
// properties file.
func (s *clientSecurity) overlay(flags *clientSecurity) {
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&s.caFile, flags.caFile)
	set(&s.certFile, flags.certFile)
	set(&s.keyFile, flags.keyFile)
	set(&s.serverName, flags.serverName)
	set(&s.mechanism, flags.mechanism)
	set(&s.user, flags.user)
	if flags.passwordSet {
		s.password, s.passwordSet = flags.password, true
	}
	if flags.insecureSkipVerify {
		s.insecureSkipVerify = true
	}
	if flags.tlsSet {
		s.tls = flags.tls
	}
}

func (s *clientSecurity) tlsConfig() (*tls.Config, error) {
	tc := &tls.Config{ServerName: s.serverName, InsecureSkipVerify: s.insecureSkipVerify, MinVersion: tls.VersionTLS12}
	if s.caFile != "" {
		pool, err := readCertPool(s.caFile)
		if err != nil {
			return nil, usagef("--tls-ca: %v", err)
		}
		tc.RootCAs = pool
	}
	if s.skipHostname && !s.insecureSkipVerify {
		// Verify the chain, not the name (Kafka's empty
		// ssl.endpoint.identification.algorithm).
		roots := tc.RootCAs
		tc.InsecureSkipVerify = true
		tc.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return fmt.Errorf("broker sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			return err
		}
	}
	switch {
	case s.certFile != "" && s.keyFile != "":
		cert, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
		if err != nil {
			return nil, usagef("--tls-cert/--tls-key: %v", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	case s.certFile != "" || s.keyFile != "":
		return nil, usagef("--tls-cert and --tls-key go together")
	}
	return tc, nil
}

// readCertPool reads the PEM certificates of a file into a pool.
func readCertPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return pool, nil
}

// readProperties reads a Java properties file of key=value (or key:value)
// lines; # and ! start comments. Line continuations are not supported
// except the trailing backslash of a sasl.jaas.config split over lines.
func readProperties(file string) (map[string]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	props := map[string]string{}
	sc := bufio.NewScanner(f)
	var pending string
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if pending != "" {
			line = pending + line
			pending = ""
		}
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			pending = strings.TrimSuffix(line, `\`)
			continue
		}
		i := strings.IndexAny(line, "=:")
		if i < 0 {
			return nil, fmt.Errorf("line %q is not key=value", line)
		}
		props[strings.TrimSpace(line[:i])] = strings.TrimSpace(line[i+1:])
	}
	return props, sc.Err()
}

var jaasOption = regexp.MustCompile(`(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"`)

// applyProperties sets s from Kafka client properties.
func (s *clientSecurity) applyProperties(p map[string]string) error {
	switch proto := strings.ToUpper(p["security.protocol"]); proto {
	case "", "PLAINTEXT":
	case "SSL":
		s.tls = true
	case "SASL_PLAINTEXT":
	case "SASL_SSL":
		s.tls = true
	default:
		return fmt.Errorf("security.protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", proto)
	}
	s.mechanism = p["sasl.mechanism"]
	if jaas := p["sasl.jaas.config"]; jaas != "" {
		for _, m := range jaasOption.FindAllStringSubmatch(jaas, -1) {
			v := strings.ReplaceAll(m[2], `\"`, `"`)
			switch m[1] {
			case "username":
				s.user = v
			case "password":
				s.password, s.passwordSet = v, true
			}
		}
	}
	if t := p["ssl.truststore.type"]; t != "" && !strings.EqualFold(t, "PEM") {
		return fmt.Errorf("ssl.truststore.type %s: only PEM files are read", t)
	}
	if t := p["ssl.keystore.type"]; t != "" && !strings.EqualFold(t, "PEM") {
		return fmt.Errorf("ssl.keystore.type %s: only PEM files are read", t)
	}
	s.caFile = p["ssl.truststore.location"]
	if ks := p["ssl.keystore.location"]; ks != "" {
		// A PEM keystore holds the key and the certificate chain.
		s.certFile, s.keyFile = ks, ks
	}
	if alg, ok := p["ssl.endpoint.identification.algorithm"]; ok && alg == "" {
		s.skipHostname = true
	}
	return nil
}
