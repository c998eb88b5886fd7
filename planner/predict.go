package planner

import (
	"sort"
	"strings"
)

// Traffic is what the throughput floor plans for: a request rate and the mean request shape.
type Traffic struct {
	Rate    float64 // requests per second
	ISL     float64 // mean prompt length, tokens
	OSL     float64 // mean output length, tokens
	HitRate float64 // fraction of prompt tokens found in the prefix cache, in [0, 1]
}

// Predictor forecasts the next window's traffic from the windows seen so far. The constant predictor is
// the only one today; ARIMA or Kalman filters (reference §11) fit behind the same two methods.
type Predictor interface {
	Observe(Traffic) // one window, oldest first
	Predict() Traffic
}

// Predictors returns the traffic predictors by their config name, each a constructor of a fresh one.
func Predictors() map[string]func() Predictor {
	return map[string]func() Predictor{
		"constant": func() Predictor { return new(Constant) },
	}
}

func predictorNames() string {
	var names []string
	for n := range Predictors() {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// Constant predicts that the next window repeats the last one (Dynamo's "constant" load predictor).
// Before any window it predicts no traffic.
type Constant struct{ last Traffic }

// Observe implements Predictor.
func (c *Constant) Observe(t Traffic) { c.last = t }

// Predict implements Predictor.
func (c *Constant) Predict() Traffic { return c.last }
