package main

import (
	"math"
	"testing"
	"time"
)

func TestGangsArriveEveryGangOverRateSeconds(t *testing.T) {
	// 8-pod gangs at 40 pods/s: one gang every 200 ms
	for k, want := range []time.Duration{0, 200 * time.Millisecond, 400 * time.Millisecond, 2 * time.Second} {
		if k == 3 {
			k = 10
		}
		if got := arrivalAt(k, 8, 40); got != want {
			t.Errorf("arrivalAt(%d, 8, 40) = %v, want %v", k, got, want)
		}
	}
	if n := arrivals(10*time.Second, 8, 40); n != 50 {
		t.Errorf("arrivals in 10 s of 8-pod gangs at 40 pods/s = %d, want 50", n)
	}
}

func TestPercentileIsNearestRankAndUnboundPodsCountAsInfinite(t *testing.T) {
	values := []float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	if got := percentile(values, 0.5); got != 5 {
		t.Errorf("p50 = %v, want 5", got)
	}
	if got := percentile(values, 0.99); got != 10 {
		t.Errorf("p99 = %v, want 10", got)
	}
	withUnbound := append(values, math.Inf(1))
	if got := percentile(withUnbound, 0.99); !math.IsInf(got, 1) {
		t.Errorf("p99 with an unbound pod among 11 = %v, want +Inf", got)
	}
	if jsonSeconds(math.Inf(1)) != nil || jsonSeconds(1.23456) != 1.235 {
		t.Errorf("jsonSeconds: +Inf must be null, 1.23456 -> 1.235")
	}
	if !math.IsNaN(percentile(nil, 0.5)) {
		t.Errorf("percentile of nothing must be NaN")
	}
}
