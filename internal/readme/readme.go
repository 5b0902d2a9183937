// Package readme keeps the README's Go snippets compiled: a test file holds
// each snippet between "//readme:begin SECTION" and "//readme:end" lines,
// inside code that compiles and runs, and Check makes sure the README's
// section "## SECTION" shows exactly that code as its first go block.
package readme

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"
)

// Snippets returns the code between the readme markers of src, by
// section, one tab of indentation removed.
func Snippets(src []byte) map[string]string {
	out := map[string]string{}
	var name string
	var b strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(src))
	for sc.Scan() {
		line := sc.Text()
		switch trimmed := strings.TrimSpace(line); {
		case strings.HasPrefix(trimmed, "//readme:begin "):
			name = strings.TrimPrefix(trimmed, "//readme:begin ")
			b.Reset()
		case trimmed == "//readme:end":
			out[name] = b.String()
			name = ""
		case name != "":
			b.WriteString(strings.TrimPrefix(line, "\t"))
			b.WriteByte('\n')
		}
	}
	return out
}

// Block returns the first go block of the README section headed
// "## name".
func Block(readme []byte, name string) (string, bool) {
	heading := "## " + name + "\n"
	i := bytes.Index(readme, []byte(heading))
	if i < 0 {
		return "", false
	}
	rest := string(readme[i+len(heading):])
	if next := strings.Index(rest, "\n## "); next >= 0 {
		rest = rest[:next]
	}
	start := strings.Index(rest, "```go\n")
	if start < 0 {
		return "", false
	}
	block := rest[start+len("```go\n"):]
	end := strings.Index(block, "```")
	if end < 0 {
		return "", false
	}
	return block[:end], true
}

// NormIndent turns each leading tab of every line into four spaces, as a
// README may indent Go code either way.
func NormIndent(code string) string {
	lines := strings.Split(code, "\n")
	for i, l := range lines {
		rest := strings.TrimLeft(l, "\t")
		lines[i] = strings.Repeat("    ", len(l)-len(rest)) + rest
	}
	return strings.Join(lines, "\n")
}

// Check compares the snippets of the Go file src with the README at
// readmePath: every snippet's section must exist and show it. It returns
// one error per section that does not, and the number of snippets.
func Check(readmePath, src string) (int, []error) {
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		return 0, []error{err}
	}
	code, err := os.ReadFile(src)
	if err != nil {
		return 0, []error{err}
	}
	snippets := Snippets(code)
	var errs []error
	for name, want := range snippets {
		switch block, ok := Block(readme, name); {
		case !ok:
			errs = append(errs, fmt.Errorf("README has no section %q with a go block", name))
		case NormIndent(block) != NormIndent(want):
			errs = append(errs, fmt.Errorf("README section %q does not show %s's snippet; it should be:\n%s", name, src, want))
		}
	}
	return len(snippets), errs
}
