package main

import (
	"bufio"
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/strata-log/strata/kafka"
)

// serverSecurity is serve's TLS and SASL: the listener's certificate, the
// CA of the client certificates it requires (mutual TLS), and the users of
// SASL with the mechanisms offered.
type serverSecurity struct {
	certFile, keyFile, clientCA string
	usersFile                   string
	mechanisms                  string
}

func (s *serverSecurity) register(fs *flag.FlagSet) {
	fs.StringVar(&s.certFile, "tls-cert", "", "`FILE`: PEM certificate (chain) of the listener: clients connect with TLS")
	fs.StringVar(&s.keyFile, "tls-key", "", "`FILE`: PEM private key of --tls-cert")
	fs.StringVar(&s.clientCA, "tls-client-ca", "", "`FILE`: PEM CA certificates; clients must present a certificate they signed (mutual TLS)")
	fs.StringVar(&s.usersFile, "sasl-users", "", "`FILE` of user:password lines: clients must authenticate with SASL as one of them")
	fs.StringVar(&s.mechanisms, "sasl-mechanisms", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", "`LIST` of SASL mechanisms offered with --sasl-users")
}

// apply sets the server config's TLS and SASL.
func (s *serverSecurity) apply(cfg *kafka.Config) error {
	switch {
	case s.certFile != "" && s.keyFile != "":
		cert, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
		if err != nil {
			return usagef("--tls-cert/--tls-key: %v", err)
		}
		cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	case s.certFile != "" || s.keyFile != "":
		return usagef("--tls-cert and --tls-key go together")
	}
	if s.clientCA != "" {
		if cfg.TLS == nil {
			return usagef("--tls-client-ca needs --tls-cert and --tls-key")
		}
		pool, err := readCertPool(s.clientCA)
		if err != nil {
			return usagef("--tls-client-ca: %v", err)
		}
		cfg.TLS.ClientCAs = pool
		cfg.TLS.ClientAuth = tls.RequireAndVerifyClientCert
	}
	if s.usersFile == "" {
		return nil
	}
	users, err := readUsers(s.usersFile)
	if err != nil {
		return usagef("--sasl-users: %v", err)
	}
	sasl := &kafka.SASLConfig{}
	for _, m := range strings.Split(s.mechanisms, ",") {
		switch mech := strings.ToUpper(strings.TrimSpace(m)); mech {
		case "PLAIN":
			sasl.Plain = func(user string) (string, bool) {
				pw, ok := users[user]
				return pw, ok
			}
		case "SCRAM-SHA-256", "SCRAM-SHA-512":
			creds := make(map[string]kafka.SCRAMCredential, len(users))
			for u, pw := range users {
				c, err := kafka.NewSCRAMCredential(mech, pw, 0)
				if err != nil {
					return err
				}
				creds[u] = c
			}
			lookup := func(user string) (kafka.SCRAMCredential, bool) {
				c, ok := creds[user]
				return c, ok
			}
			if mech == "SCRAM-SHA-256" {
				sasl.SCRAM256 = lookup
			} else {
				sasl.SCRAM512 = lookup
			}
		default:
			return usagef("--sasl-mechanisms: %q is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", m)
		}
	}
	cfg.SASL = sasl
	return nil
}

// readUsers reads user:password lines; blank lines and # comments are
// skipped.
func readUsers(file string) (map[string]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	users := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		u, pw, ok := strings.Cut(line, ":")
		if !ok || u == "" {
			return nil, fmt.Errorf("%s:%d: want user:password", file, n)
		}
		if pw == "" {
			return nil, fmt.Errorf("%s:%d: user %q has an empty password", file, n, u)
		}
		users[u] = pw
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(users) == 0 {
		return nil, fmt.Errorf("%s names no user", file)
	}
	return users, nil
}
