package main

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"

	"github.com/strata-log/strata/log"
)

// recordFormat is a parsed kcat -f format: literal text and % tokens.
type recordFormat []formatPart

type formatPart struct {
	lit   string
	token byte // 0 for a literal
}

const formatTokens = `%s value, %S value size, %k key, %K key size, %t topic, %p partition,
%o offset, %T timestamp (ms), %h headers (k=v,...), %% a percent sign;
\n, \t, \r and \\ are escapes`

// parseFormat parses a kcat-style format string.
func parseFormat(f string) (recordFormat, error) {
	var parts recordFormat
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, formatPart{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(f); i++ {
		c := f[i]
		switch {
		case c == '%' || c == '\\':
			if i+1 == len(f) {
				return nil, fmt.Errorf("format %q ends with a lone %c", f, c)
			}
			i++
			n := f[i]
			if c == '\\' {
				switch n {
				case 'n':
					lit.WriteByte('\n')
				case 't':
					lit.WriteByte('\t')
				case 'r':
					lit.WriteByte('\r')
				case '\\':
					lit.WriteByte('\\')
				default:
					return nil, fmt.Errorf("format %q: unknown escape \\%c", f, n)
				}
				continue
			}
			if n == '%' {
				lit.WriteByte('%')
				continue
			}
			if !strings.ContainsRune("sSkKtpoTh", rune(n)) {
				return nil, fmt.Errorf("format %q: unknown token %%%c (known: %s)", f, n, formatTokens)
			}
			flush()
			parts = append(parts, formatPart{token: n})
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return parts, nil
}

// write prints r in the format.
func (f recordFormat) write(w *bufio.Writer, r *log.Record) {
	for _, p := range f {
		switch p.token {
		case 0:
			w.WriteString(p.lit)
		case 's':
			w.Write(r.Value)
		case 'S':
			w.WriteString(strconv.Itoa(nullableLen(r.Value)))
		case 'k':
			w.Write(r.Key)
		case 'K':
			w.WriteString(strconv.Itoa(nullableLen(r.Key)))
		case 't':
			w.WriteString(r.Topic)
		case 'p':
			w.WriteString(strconv.Itoa(r.Partition))
		case 'o':
			w.WriteString(strconv.FormatInt(r.Offset, 10))
		case 'T':
			w.WriteString(strconv.FormatInt(r.Timestamp.UnixMilli(), 10))
		case 'h':
			for i, h := range r.Headers {
				if i > 0 {
					w.WriteByte(',')
				}
				w.WriteString(h.Key)
				w.WriteByte('=')
				w.Write(h.Value)
			}
		}
	}
}

// recordWriter prints a record.
type recordWriter interface {
	write(w *bufio.Writer, r *log.Record)
}

// propertyFormat is kafka-console-consumer.sh's default formatter, set up by
// its --property flags: print.timestamp, print.partition, print.offset,
// print.headers, print.key, print.value, and the separators.
type propertyFormat struct {
	timestamp, partition, offset, headers, key, value bool
	keySep, lineSep, headersSep, nullLiteral          string
}

// parseConsumerProperties builds the formatter from KEY=VALUE properties.
func parseConsumerProperties(props []string) (*propertyFormat, error) {
	f := &propertyFormat{value: true, keySep: "\t", lineSep: "\n", headersSep: ",", nullLiteral: "null"}
	for _, kv := range props {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("--property %q: want KEY=VALUE", kv)
		}
		flags := map[string]*bool{"print.timestamp": &f.timestamp, "print.partition": &f.partition, "print.offset": &f.offset,
			"print.headers": &f.headers, "print.key": &f.key, "print.value": &f.value}
		seps := map[string]*string{"key.separator": &f.keySep, "line.separator": &f.lineSep,
			"headers.separator": &f.headersSep, "null.literal": &f.nullLiteral}
		if b, ok := flags[k]; ok {
			x, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("--property %s: want true or false", kv)
			}
			*b = x
		} else if s, ok := seps[k]; ok {
			*s = v
		} else {
			return nil, fmt.Errorf("--property %q: unknown (known: print.timestamp, print.partition, print.offset, print.headers, print.key, print.value, key.separator, line.separator, headers.separator, null.literal)", k)
		}
	}
	return f, nil
}

func (f *propertyFormat) write(w *bufio.Writer, r *log.Record) {
	first := true
	field := func() {
		if !first {
			w.WriteString(f.keySep)
		}
		first = false
	}
	nullable := func(b []byte) {
		if b == nil {
			w.WriteString(f.nullLiteral)
		} else {
			w.Write(b)
		}
	}
	if f.timestamp {
		field()
		fmt.Fprintf(w, "CreateTime:%d", r.Timestamp.UnixMilli())
	}
	if f.partition {
		field()
		fmt.Fprintf(w, "Partition:%d", r.Partition)
	}
	if f.offset {
		field()
		fmt.Fprintf(w, "Offset:%d", r.Offset)
	}
	if f.headers {
		field()
		if len(r.Headers) == 0 {
			w.WriteString("NO_HEADERS")
		}
		for i, h := range r.Headers {
			if i > 0 {
				w.WriteString(f.headersSep)
			}
			w.WriteString(h.Key)
			w.WriteByte(':')
			nullable(h.Value)
		}
	}
	if f.key {
		field()
		nullable(r.Key)
	}
	if f.value {
		field()
		nullable(r.Value)
	}
	w.WriteString(f.lineSep)
}
