package main

import (
	"math"
	"sort"
	"time"
)

// arrivalAt is when gang k (0-based) is due, from the start of the arrival window: gangs of `gang` pods at an
// offered rate of `rate` pods/s arrive every gang/rate seconds, open loop (a slow apiserver or scheduler does
// not slow the arrivals down).
func arrivalAt(k, gang int, rate float64) time.Duration {
	return time.Duration(float64(k) * float64(gang) / rate * float64(time.Second))
}

// arrivals is how many gangs are due in a window of `window` (arrivalAt < window).
func arrivals(window time.Duration, gang int, rate float64) int {
	n := 0
	for arrivalAt(n, gang, rate) < window {
		n++
	}
	return n
}

// percentile is the nearest-rank q-quantile (0 < q <= 1) of values; an unbound pod counts as +Inf, so a
// quantile that falls on one is +Inf. NaN for no values.
func percentile(values []float64, q float64) float64 {
	if len(values) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), values...)
	sort.Float64s(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// jsonSeconds rounds to the millisecond; +Inf and NaN (not JSON numbers) become nil.
func jsonSeconds(v float64) any {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return nil
	}
	return math.Round(v*1000) / 1000
}
