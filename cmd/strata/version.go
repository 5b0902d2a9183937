package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

const versionHelp = `
Prints strata's version: the module version it was built at (go install
github.com/strata-log/strata/cmd/strata@v1.2.3 gives v1.2.3), or for a
build from a checkout the commit it was built from, then the Go version
and platform. 'strata --version' prints the same.`

func runVersion(e *env, args []string) error {
	fs := newFlags(e, "version", "", versionHelp)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected arguments %q", pos)
	}
	bi, _ := debug.ReadBuildInfo()
	fmt.Fprintf(e.stdout, "strata %s (%s %s/%s)\n", buildVersion(bi), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}

// buildVersion is the version of the build bi describes: the main
// module's version when go install or go build gave it one, else "devel"
// and the VCS revision the build stamped (+dirty for a modified tree),
// else "devel" alone (a build without VCS information, or nil bi).
func buildVersion(bi *debug.BuildInfo) string {
	if bi == nil {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified == "true" {
		rev += "+dirty"
	}
	return "devel " + rev
}
