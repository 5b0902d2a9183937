package readme

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The check itself: a README made of the snippets passes (indented with
// tabs or with four spaces), one with a line changed or a section missing
// does not.
func TestCheck(t *testing.T) {
	src := "package x\n\nfunc f() {\n\t//readme:begin Embed it\n\tx := 1\n\tif x > 0 {\n\t\tx++\n\t}\n\t//readme:end\n}\n"
	code := Snippets([]byte(src))["Embed it"]
	if code != "x := 1\nif x > 0 {\n\tx++\n}\n" {
		t.Fatalf("snippet %q", code)
	}
	dir := t.TempDir()
	srcFile := filepath.Join(dir, "x.go")
	os.WriteFile(srcFile, []byte(src), 0o644)
	check := func(readme string) []error {
		p := filepath.Join(dir, "README.md")
		os.WriteFile(p, []byte(readme), 0o644)
		n, errs := Check(p, srcFile)
		if n != 1 {
			t.Fatalf("%d snippets", n)
		}
		return errs
	}
	section := func(code string) string {
		return "# T\n\n## Embed it\n\nText.\n\n```go\n" + code + "```\n\n## Next\n\n```go\ny := 2\n```\n"
	}
	if errs := check(section(code)); errs != nil {
		t.Fatalf("the snippet itself: %v", errs)
	}
	if errs := check(section(strings.ReplaceAll(code, "\t", "    "))); errs != nil {
		t.Fatalf("indented with spaces: %v", errs)
	}
	if errs := check(section(strings.Replace(code, "\n", "\n// changed\n", 1))); len(errs) != 1 {
		t.Fatalf("a changed snippet: %v", errs)
	}
	if errs := check("# T\n\n## Other\n\n```go\n" + code + "```\n"); len(errs) != 1 {
		t.Fatalf("a missing section: %v", errs)
	}
}
