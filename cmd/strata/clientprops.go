package main

import (
	"flag"
	"fmt"
	"slices"
	"strings"
)

// clientProps are a Kafka client's properties as Kafka's console tools take
// them: --producer.config FILE (--consumer.config), a Java properties file,
// then --producer-property KEY=VALUE (--consumer-property), repeatable, the
// flags winning over the file. A command maps the properties it knows to
// its configuration; a property it does not use is a warning on stderr, as
// Kafka's clients warn of a configuration "supplied but isn't a known
// config", and a bad value of a known one is a usage error.
type clientProps struct {
	kind string // "producer" or "consumer"
	file string
	kvs  stringList
}

func (p *clientProps) register(fs *flag.FlagSet, kind string, known []string) {
	p.kind = kind
	fs.StringVar(&p.file, kind+".config", "", "`FILE`: Kafka "+kind+" properties (Java properties file): "+strings.Join(known, ", ")+",\nbootstrap.servers, client.id, and the TLS and SASL ones of --command-config; others are warned of and ignored")
	fs.Var(&p.kvs, kind+"-property", "`KEY=VALUE`: a "+kind+" property, as in --"+kind+".config, winning over it; repeatable")
}

// read returns the properties of the file, then of the flags.
func (p *clientProps) read() (map[string]string, error) {
	props := map[string]string{}
	if p.file != "" {
		var err error
		if props, err = readProperties(p.file); err != nil {
			return nil, usagef("--%s.config: %v", p.kind, err)
		}
	}
	for _, kv := range p.kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, usagef("--%s-property %q: want KEY=VALUE", p.kind, kv)
		}
		props[strings.TrimSpace(k)] = v
	}
	return props, nil
}

// source names where property k came from, for an error message.
func (p *clientProps) source(k string) string {
	for _, kv := range p.kvs {
		if strings.HasPrefix(kv, k+"=") {
			return "--" + p.kind + "-property " + kv
		}
	}
	return "--" + p.kind + ".config " + p.file + ": " + k
}

// isSecurityProperty reports whether k is a connection property that
// clientSecurity reads (as in --command-config).
func isSecurityProperty(k string) bool {
	return k == "security.protocol" || strings.HasPrefix(k, "sasl.") || strings.HasPrefix(k, "ssl.")
}

// applyConnection takes the properties every client has from props into t:
// bootstrap.servers (when neither --bootstrap-server nor --data-dir is
// given), client.id and the TLS and SASL ones, which --command-config and
// the --tls and --sasl flags win over. It deletes them from props.
func applyConnection(t *target, props map[string]string) {
	if v, ok := props["bootstrap.servers"]; ok {
		if t.bootstrap == "" && t.dataDir == "" {
			t.bootstrap = strings.ReplaceAll(v, " ", "")
		}
		delete(props, "bootstrap.servers")
	}
	if v, ok := props["client.id"]; ok {
		t.sec.clientID = v
		delete(props, "client.id")
	}
	for k, v := range props {
		if isSecurityProperty(k) {
			if t.sec.props == nil {
				t.sec.props = map[string]string{}
			}
			t.sec.props[k] = v
			delete(props, k)
		}
	}
}

// warnUnused prints one warning line per property left in props: a
// property strata does not use.
func warnUnused(e *env, cmd string, props map[string]string, known []string) {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(e.stderr, "strata %s: warning: property %s is not used by strata (it uses %s, bootstrap.servers, client.id, security.protocol, sasl.*, ssl.*)\n",
			cmd, k, strings.Join(known, ", "))
	}
}
