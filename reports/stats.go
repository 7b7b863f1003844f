package reports

import (
	"math"
	"sort"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Summary is a distribution of durations in nanoseconds. Percentiles come
// from an HDR histogram with 3 significant digits (at most 0.1% error);
// Mean and StdDev are exact.
type Summary struct {
	Count  int     `json:"count"`
	Min    int64   `json:"minNs"`
	P50    int64   `json:"p50Ns"`
	P90    int64   `json:"p90Ns"`
	P99    int64   `json:"p99Ns"`
	P999   int64   `json:"p999Ns"`
	Max    int64   `json:"maxNs"`
	Mean   float64 `json:"meanNs"`
	StdDev float64 `json:"stdDevNs"`
}

// Precision states the percentile precision of Summary.
const Precision = "HDR histogram, 3 significant digits (<= 0.1% relative error)"

// Summarize builds a Summary of samples (ns). Values are clamped to
// [1 ns, 1 h] for the histogram. Empty input gives a zero Summary.
func Summarize(samplesNs []int64) Summary {
	if len(samplesNs) == 0 {
		return Summary{}
	}
	h := hdrhistogram.New(1, int64(3600e9), 3)
	xs := make([]float64, len(samplesNs))
	for i, v := range samplesNs {
		_ = h.RecordValue(max(1, min(v, int64(3600e9))))
		xs[i] = float64(v)
	}
	mean, sd := stat.MeanStdDev(xs, nil)
	if len(xs) < 2 {
		sd = 0
	}
	return Summary{
		Count: len(samplesNs), Min: h.Min(), Max: h.Max(),
		P50: h.ValueAtQuantile(50), P90: h.ValueAtQuantile(90), P99: h.ValueAtQuantile(99), P999: h.ValueAtQuantile(99.9),
		Mean: mean, StdDev: sd,
	}
}

// Fairness describes how one service's connections spread over its
// endpoints, against the expected shares (equal unless weighted).
type Fairness struct {
	Endpoints int `json:"endpoints"`
	Samples   int `json:"samples"`
	// Jain is Jain's fairness index of the weight-normalised shares,
	// (Σx)²/(n·Σx²) = mean²/(mean²+popvar): 1 is perfectly even, 1/n all on one.
	Jain float64 `json:"jain"`
	// MaxMin is the largest over the smallest normalised share; 0 when an
	// endpoint got nothing (see Starved).
	MaxMin float64 `json:"maxMin"`
	// Starved counts endpoints that got no connection.
	Starved int `json:"starved"`
	// CV is the coefficient of variation (population) of the normalised shares.
	CV float64 `json:"cv"`
	// ChiSquare is Pearson's statistic against the expected counts, with
	// DoF = Endpoints-1 degrees of freedom; PValue its upper tail.
	ChiSquare float64 `json:"chiSquare"`
	DoF       int     `json:"dof"`
	PValue    float64 `json:"pValue"`
}

// ComputeFairness measures hits (connections per endpoint) against weights
// (nil means equal). Statistics come from gonum: stat.PopMeanVariance,
// stat.ChiSquare and the chi-squared distribution's survival function.
func ComputeFairness(hits []float64, weights []float64) Fairness {
	n := len(hits)
	f := Fairness{Endpoints: n}
	if n == 0 {
		return f
	}
	if weights == nil {
		weights = make([]float64, n)
		for i := range weights {
			weights[i] = 1
		}
	}
	var total, wsum float64
	for i := range hits {
		total += hits[i]
		wsum += weights[i]
	}
	f.Samples = int(total)
	norm := make([]float64, n)
	exp := make([]float64, n)
	for i := range hits {
		norm[i] = hits[i] / weights[i]
		exp[i] = total * weights[i] / wsum
	}
	mean, pvar := stat.PopMeanVariance(norm, nil)
	if mean > 0 {
		f.Jain = mean * mean / (mean*mean + pvar)
		f.CV = math.Sqrt(pvar) / mean
	}
	s := append([]float64(nil), norm...)
	sort.Float64s(s)
	if s[0] > 0 {
		f.MaxMin = s[n-1] / s[0]
	}
	for _, h := range hits {
		if h == 0 {
			f.Starved++
		}
	}
	if n > 1 && total > 0 {
		f.ChiSquare = stat.ChiSquare(hits, exp)
		f.DoF = n - 1
		f.PValue = distuv.ChiSquared{K: float64(n - 1)}.Survival(f.ChiSquare)
	} else {
		f.PValue = 1
	}
	return f
}

// FairnessSummary pools the per-service fairness of a mode: the worst
// Jain index and, since independent chi-square statistics add, the
// p-value of their sum against the summed degrees of freedom.
type FairnessSummary struct {
	// Services is how many fixed positions (one service each: first,
	// middle, last) were pooled, not the scenario's service count; the
	// fairness table's "positions" column.
	Services  int     `json:"services"`
	Samples   int     `json:"samples"`
	MinJain   float64 `json:"minJain"`
	ChiSquare float64 `json:"chiSquare"`
	DoF       int     `json:"dof"`
	PValue    float64 `json:"pValue"`
	MaxMaxMin float64 `json:"maxMaxMin"`
	Starved   int     `json:"starved"`
}

// PoolFairness combines per-service results.
func PoolFairness(fs []Fairness) FairnessSummary {
	out := FairnessSummary{MinJain: 1, PValue: 1}
	for _, f := range fs {
		if f.Samples == 0 {
			continue
		}
		out.Services++
		out.Samples += f.Samples
		out.MinJain = min(out.MinJain, f.Jain)
		out.ChiSquare += f.ChiSquare
		out.DoF += f.DoF
		out.MaxMaxMin = max(out.MaxMaxMin, f.MaxMin)
		out.Starved += f.Starved
	}
	if out.DoF > 0 {
		out.PValue = distuv.ChiSquared{K: float64(out.DoF)}.Survival(out.ChiSquare)
	}
	if out.Services == 0 {
		out.MinJain = 0
	}
	return out
}
