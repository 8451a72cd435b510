package labresult

import (
	"math"
	"slices"
)

// The confidence levels of a claim's interval. The verdict is always read
// from the Level interval; the stricter InterimLevel only decides whether
// the lab may stop adding pairs before its budget is spent (see Paired).
const (
	Level        = 0.95
	InterimLevel = 0.999
)

// interval is a confidence interval of a ratio, from pair ratios.
type interval struct {
	est, lo, hi float64 // geometric mean of the ratios and its interval
	n           int
}

// ratioInterval returns the geometric mean of ratios and its confidence
// interval at level: a Student t interval on the logarithms of the ratios.
//
// Why this method: each pair's two runs happened back to back, so the
// ratio cancels what drifts on the machine between pairs; its logarithm
// makes A/B and B/A mirror images and turns the multiplicative noise of
// throughput (a few percent either way) into roughly normal, additive
// noise. With the few pairs a lab can afford (3 to 12), the t interval is
// exact for normal noise and stays honest for mild departures from it,
// where the bootstrap's percentile interval is known to be too narrow
// (its coverage at 5 pairs is nearer 85% than 95%). ok is false when
// there are fewer than two ratios or a ratio is not a positive, finite
// number (a row that answered nothing).
func ratioInterval(ratios []float64, level float64) (iv interval, ok bool) {
	n := len(ratios)
	if n < 2 {
		return interval{n: n}, false
	}
	logs := make([]float64, n)
	for i, r := range ratios {
		if !(r > 0) || math.IsInf(r, 0) {
			return interval{n: n}, false
		}
		logs[i] = math.Log(r)
	}
	var mean float64
	for _, l := range logs {
		mean += l
	}
	mean /= float64(n)
	var ss float64
	for _, l := range logs {
		ss += (l - mean) * (l - mean)
	}
	se := math.Sqrt(ss/float64(n-1)) / math.Sqrt(float64(n))
	half := tQuantile(1-(1-level)/2, float64(n-1)) * se
	return interval{est: math.Exp(mean), lo: math.Exp(mean - half), hi: math.Exp(mean + half), n: n}, true
}

// tQuantile returns the p quantile (0.5 < p < 1) of Student's t
// distribution with df degrees of freedom, by bisection on its CDF.
func tQuantile(p, df float64) float64 {
	lo, hi := 0.0, 1.0
	for tCDF(hi, df) < p {
		hi *= 2
		if hi > 1e12 {
			return math.Inf(1)
		}
	}
	for range 200 {
		mid := (lo + hi) / 2
		if tCDF(mid, df) < p {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// tCDF is Student's t CDF at t >= 0: 1 - I_x(df/2, 1/2)/2 with
// x = df/(df+t²), I the regularized incomplete beta function.
func tCDF(t, df float64) float64 {
	x := df / (df + t*t)
	return 1 - 0.5*regIncBeta(df/2, 0.5, x)
}

// regIncBeta is the regularized incomplete beta function I_x(a, b), by
// its continued fraction (Numerical Recipes' betacf, modified Lentz).
func regIncBeta(a, b, x float64) float64 {
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	front := math.Exp(lab - la - lb + a*math.Log(x) + b*math.Log(1-x))
	if x < (a+1)/(a+b+2) {
		return front * betaCF(a, b, x) / a
	}
	return 1 - front*betaCF(b, a, 1-x)/b
}

func betaCF(a, b, x float64) float64 {
	const tiny = 1e-300
	nonzero := func(v float64) float64 {
		if math.Abs(v) < tiny {
			return tiny
		}
		return v
	}
	c, d := 1.0, 1/nonzero(1-(a+b)*x/(a+1))
	h := d
	// step applies one term of the fraction and returns its factor.
	step := func(aa float64) float64 {
		d = 1 / nonzero(1+aa*d)
		c = nonzero(1 + aa/c)
		return d * c
	}
	for m := 1.0; m <= 300; m++ {
		m2 := 2 * m
		h *= step(m * (b - m) * x / ((a + m2 - 1) * (a + m2)))
		del := step(-(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1)))
		h *= del
		if math.Abs(del-1) < 1e-14 {
			break
		}
	}
	return h
}

// Median is the median of v (0 when empty), as rows report their runs:
// for an experiment's figures derived per run.
func Median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
