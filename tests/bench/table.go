package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Row is one figure of the table, beside the baseline measured in the same
// run.
type Row struct {
	Figure   string
	Unit     string  // of Value and Baseline: "frames/s", "ms", "B" …
	Value    float64 // median over the run's repetitions
	Baseline float64 // 0 when the figure has none
	BaseName string  // what the baseline is; "" when there is none
	// Ratio is Value ÷ Baseline, or for paired measurements the median of
	// the per-repetition ratios, which holds up better on a shared machine
	// than the ratio of two medians. 0 when there is no baseline.
	Ratio  float64
	Target *Target // nil when the issue sets none
	Note   string

	// why, when set, profiles the figure to explain a missed target.
	why func(*prober) (string, error)
}

// Target is what a figure must reach.
type Target struct {
	Text string
	Met  func(r Row) bool
}

// ratioAtLeast, ratioAtMost, atMost, atLeast and withinOf are the issues' kinds
// of target.
func ratioAtLeast(min float64) *Target {
	return &Target{Text: fmt.Sprintf("≥ %.2f× baseline", min), Met: func(r Row) bool { return r.Ratio >= min }}
}

func ratioAtMost(max float64) *Target {
	return &Target{Text: fmt.Sprintf("≤ %.2f× baseline", max), Met: func(r Row) bool { return r.Ratio <= max }}
}

func atMost(max float64, text string) *Target {
	return &Target{Text: text, Met: func(r Row) bool { return r.Value <= max }}
}

func atLeast(min float64, text string) *Target {
	return &Target{Text: text, Met: func(r Row) bool { return r.Value >= min }}
}

func withinOf(delta float64, text string) *Target {
	return &Target{Text: text, Met: func(r Row) bool { return r.Value-r.Baseline <= delta }}
}

// paired makes a row from paired repetitions: values[i] and bases[i] were
// measured side by side.
func paired(figure, unit, baseName string, values, bases []float64) Row {
	ratios := make([]float64, len(values))
	for i := range values {
		ratios[i] = values[i] / bases[i]
	}
	return Row{Figure: figure, Unit: unit, Value: median(values), Baseline: median(bases), BaseName: baseName, Ratio: median(ratios)}
}

// check says which rows are missing a measurement: a zero, NaN or infinite
// figure or baseline means the harness, not the code under test, broke.
func check(rows []Row) error {
	var errs []error
	bad := func(v float64) bool { return v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) }
	for _, r := range rows {
		if bad(r.Value) || (r.BaseName != "" && (bad(r.Baseline) || bad(r.Ratio))) {
			errs = append(errs, fmt.Errorf("%s: no measurement (value %v, baseline %v, ratio %v)", r.Figure, r.Value, r.Baseline, r.Ratio))
		}
	}
	return errors.Join(errs...)
}

// Render writes rows as one markdown table, with a line saying how its
// ratios are computed.
func Render(w io.Writer, rows []Row) {
	fmt.Fprintln(w, "| figure | value | baseline | ratio | target | |")
	fmt.Fprintln(w, "|---|--:|---|--:|---|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n",
			r.Figure+note(r.Note), quantity(r.Value, r.Unit), baseline(r), ratio(r), targetText(r), verdict(r))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, RatioNote)
}

// RatioNote says how the table's ratios are computed, since a ratio is not
// always the quotient of the two values printed beside it.
const RatioNote = "Values are medians over the run's repetitions. Where the two were measured side by side " +
	"(inbound, CPU, reload) the ratio is the median of the per-repetition ratios, which can differ from the quotient " +
	"of the two medians; for round-trip percentiles it is the quotient of the two percentiles."

func note(n string) string {
	if n == "" {
		return ""
	}
	return " (" + n + ")"
}

func baseline(r Row) string {
	if r.BaseName == "" {
		return "—"
	}
	return quantity(r.Baseline, r.Unit) + " " + r.BaseName
}

func ratio(r Row) string {
	if r.BaseName == "" {
		return "—"
	}
	return strconv.FormatFloat(r.Ratio, 'f', 2, 64) + "×"
}

func targetText(r Row) string {
	if r.Target == nil {
		return "—"
	}
	return r.Target.Text
}

func verdict(r Row) string {
	switch {
	case r.Target == nil:
		return ""
	case r.Target.Met(r):
		return "met"
	default:
		return "**missed**"
	}
}

// quantity prints v with a precision that suits its size, thousands
// separated.
func quantity(v float64, unit string) string {
	var s string
	switch a := math.Abs(v); {
	case a >= 100:
		s = thousands(strconv.FormatFloat(v, 'f', 0, 64))
	case a >= 10:
		s = strconv.FormatFloat(v, 'f', 1, 64)
	default:
		s = strconv.FormatFloat(v, 'f', 2, 64)
	}
	return s + " " + unit
}

// count prints n thousands separated.
func count(n int) string { return thousands(strconv.Itoa(n)) }

func thousands(digits string) string {
	neg := strings.HasPrefix(digits, "-")
	digits = strings.TrimPrefix(digits, "-")
	var b strings.Builder
	for i, c := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// median of xs (0 for none); xs is not modified.
func median(xs []float64) float64 {
	return percentile(xs, 50)
}

// percentile p of xs by nearest rank (0 for none); xs is not modified.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if p == 50 && len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[max(rank, 1)-1]
}
