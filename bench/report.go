package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strings"
	"time"
)

// report is everything one run of the program measured.
type report struct {
	Command   string   `json:"command"`
	Date      string   `json:"date"`
	Elapsed   string   `json:"elapsed"`
	Mode      string   `json:"mode"`
	Runs      int      `json:"runs"`
	Machine   machine  `json:"machine"`
	Limits    []limit  `json:"limits"`
	Results   []row    `json:"results"`
	Footnotes []string `json:"-"`
}

type machine struct {
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	CPUs       int    `json:"cpus"`
	CPUModel   string `json:"cpu_model"`
	Go         string `json:"go"`
	Kernel     string `json:"kernel"`
	LoadBefore string `json:"load_before"`
	LoadAfter  string `json:"load_after"`
}

func newReport(e *env) *report {
	m := machine{
		GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU(), Go: runtime.Version(),
		CPUModel: cpuModel(), Kernel: firstLine("/proc/sys/kernel/osrelease"), LoadBefore: firstLine("/proc/loadavg"),
	}
	modes := map[mode]string{modeFull: "full", modeQuick: "quick", modeTiny: "tiny"}
	return &report{Date: time.Now().UTC().Format(time.RFC3339), Mode: modes[e.mode], Runs: e.runs, Machine: m}
}

// row is one system in one variant: its runs and what they add up to.
type row struct {
	Case          string   `json:"case"`
	Variant       string   `json:"variant"`
	System        string   `json:"system"`
	Durability    string   `json:"durability"`
	Unit          string   `json:"unit,omitempty"`
	ByCPU         bool     `json:"per_cpu_second,omitempty"`
	Limit         string   `json:"limit,omitempty"`
	Samples       []sample `json:"runs"`
	RecordsPerSec stat     `json:"records_per_sec"`
	MBPerSec      stat     `json:"mb_per_sec"`
	CPUNote       string   `json:"cpu_note,omitempty"`
	CPUPerGB      *stat    `json:"cpu_seconds_per_gb,omitempty"`
	CPUPerRecord  *stat    `json:"cpu_ns_per_record,omitempty"`
	P50           *stat    `json:"p50_ns,omitempty"` // of the runs' medians of single operations
	P99           *stat    `json:"p99_ns,omitempty"` // of the runs' 99th percentiles
	RatioStrata   float64  `json:"ratio_to_strata,omitempty"`
	RatioLimit    float64  `json:"ratio_to_limit,omitempty"`
	Error         string   `json:"error,omitempty"`

	baseline bool
}

// summarize computes the row's medians and spreads from its samples.
func (r *row) summarize() {
	var rec, mb, perGB, perRec, p50, p99 []float64
	for _, s := range r.Samples {
		if s.P50 > 0 {
			p50 = append(p50, float64(s.P50))
			p99 = append(p99, float64(s.P99))
		}
		secs := s.Elapsed.Seconds()
		if r.ByCPU {
			secs = s.CPU.Seconds()
		}
		if secs <= 0 {
			continue
		}
		rec = append(rec, float64(s.Records)/secs)
		mb = append(mb, float64(s.Bytes)/secs/1e6)
		if s.CPU > 0 && s.Bytes > 0 {
			perGB = append(perGB, s.CPU.Seconds()/(float64(s.Bytes)/1e9))
		}
		if s.CPU > 0 && s.Records > 0 {
			perRec = append(perRec, float64(s.CPU.Nanoseconds())/float64(s.Records))
		}
	}
	r.RecordsPerSec, r.MBPerSec = statOf(rec), statOf(mb)
	if len(perGB) > 0 {
		st := statOf(perGB)
		r.CPUPerGB = &st
	}
	if len(perRec) > 0 {
		st := statOf(perRec)
		r.CPUPerRecord = &st
	}
	if len(p50) > 0 {
		s50, s99 := statOf(p50), statOf(p99)
		r.P50, r.P99 = &s50, &s99
	}
}

// addRows adds a variant's rows with their ratios to Strata and the limit.
func (rep *report) addRows(rows []row) {
	var base float64
	for _, r := range rows {
		if r.baseline && r.Error == "" {
			base = r.RecordsPerSec.Median
		}
	}
	for i := range rows {
		r := &rows[i]
		if base > 0 && r.Error == "" {
			r.RatioStrata = r.RecordsPerSec.Median / base
		}
		switch l := rep.limit(r.Limit); {
		case l == nil || r.Error != "":
		case l.PerOp && l.OpsPerSec.Median > 0:
			r.RatioLimit = r.RecordsPerSec.Median / l.OpsPerSec.Median
		case l.MBPerSec.Median > 0:
			r.RatioLimit = r.MBPerSec.Median / l.MBPerSec.Median
		}
	}
	rep.Results = append(rep.Results, rows...)
}

func (rep *report) limit(key string) *limit {
	for i := range rep.Limits {
		if rep.Limits[i].Key == key {
			return &rep.Limits[i]
		}
	}
	return nil
}

func writeJSON(path string, rep *report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// writeMarkdown prints the limits and the results as Markdown tables.
func writeMarkdown(w io.Writer, rep *report) {
	rep.Machine.LoadAfter = firstLine("/proc/loadavg")
	m := rep.Machine
	fmt.Fprintf(w, "Strata side-by-side benchmarks — `%s` (%s mode, %d runs each; median [min–max])\n\n", strings.TrimSpace(rep.Command), rep.Mode, rep.Runs)
	fmt.Fprintf(w, "%s, %s; %s/%s, %d CPUs (%s), Linux %s; load average before: %s, after: %s; took %s.\n\n",
		rep.Date, m.Go, m.GOOS, m.GOARCH, m.CPUs, m.CPUModel, m.Kernel, m.LoadBefore, m.LoadAfter, rep.Elapsed)

	fmt.Fprintln(w, "| limit (same run) | MB/s | ops/s | what |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, l := range rep.Limits {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", l.Name, fmtStat(l.MBPerSec), fmtStat(l.OpsPerSec), l.What)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| case | system | records/s | MB/s | × Strata | × limit | CPU | durability |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, r := range rep.Results {
		if r.Error != "" {
			fmt.Fprintf(w, "| %s | %s | error: %s | | | | | %s |\n", r.Variant, r.System, oneLine(r.Error), r.Durability)
			continue
		}
		recs := fmtStat(r.RecordsPerSec)
		if r.Unit != "" {
			recs += " " + r.Unit
		}
		if r.P50 != nil {
			recs += fmt.Sprintf("; p50 %s [%s–%s] µs, p99 %s [%s–%s] µs", us(r.P50.Median), us(r.P50.Min), us(r.P50.Max),
				us(r.P99.Median), us(r.P99.Min), us(r.P99.Max))
		}
		mbs := "–"
		if r.MBPerSec.Median > 0 {
			mbs = fmtStat(r.MBPerSec)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Variant, r.System, recs, mbs,
			fmtRatio(r.RatioStrata), fmtLimitRatio(r.RatioLimit, rep.limit(r.Limit)), fmtCPU(r), r.Durability)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "MB = 10⁶ bytes of record values (zero copy: bytes on the wire). × Strata: records/s over Strata's in the same case (higher is faster).")
	fmt.Fprintln(w, "× limit: MB/s over the named limit's (records/s over its ops/s for a limit that moves no bytes). CPU: process CPU time (all goroutines and their kernel work) per record, timer or start;")
	fmt.Fprintln(w, "zero copy: CPU time of the sending thread per GB. p50, p99: of single operations within each run (median of the runs [min–max]). Medians of noisy runs: read the spread before a ratio.")
	fmt.Fprintln(w)
}

func fmtStat(s stat) string {
	if s.Median == 0 && s.Max == 0 {
		return "–"
	}
	return fmt.Sprintf("%s [%s–%s]", si(s.Median), si(s.Min), si(s.Max))
}

// si prints x with three significant digits and a k/M/G suffix.
func si(x float64) string {
	suffix := ""
	for _, u := range []struct {
		v float64
		s string
	}{{1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if math.Abs(x) >= u.v {
			x /= u.v
			suffix = u.s
			break
		}
	}
	switch {
	case math.Abs(x) >= 100:
		return fmt.Sprintf("%.0f%s", x, suffix)
	case math.Abs(x) >= 10:
		return fmt.Sprintf("%.1f%s", x, suffix)
	}
	return fmt.Sprintf("%.2f%s", x, suffix)
}

func fmtRatio(x float64) string {
	if x == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", x)
}

func fmtLimitRatio(x float64, l *limit) string {
	if x == 0 || l == nil {
		return "–"
	}
	return fmt.Sprintf("%.2f× %s", x, l.Short)
}

func fmtCPU(r row) string {
	switch {
	case r.CPUNote == cpuPerGB && r.CPUPerGB != nil:
		s := r.CPUPerGB
		return fmt.Sprintf("%.2f [%.2f–%.2f] s/GB", s.Median, s.Min, s.Max)
	case r.CPUNote != "" && r.CPUPerRecord != nil:
		s := r.CPUPerRecord
		return fmt.Sprintf("%s [%s–%s] µs/%s", us(s.Median), us(s.Min), us(s.Max), r.CPUNote)
	}
	return "–"
}

// cpuPerGB in a variant's cpuNote makes the CPU column show CPU seconds
// per GB sent; any other non-empty note names what one record is, and the
// column shows CPU µs per record.
const cpuPerGB = "GB"

// us prints ns as µs with three significant digits.
func us(ns float64) string { return si(ns / 1e3) }

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

func firstLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "?"
	}
	s, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(s)
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}
