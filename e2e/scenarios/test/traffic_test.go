package scenariotest

import (
	"fmt"
	"time"

	"kshard.local/e2e/scenarios/load"
)

const (
	trafficDriver     = "traffic"
	trafficIncrements = 20
	trafficRate       = 300
)

// scenarioTraffic (2): 1,000 counters × 20 increments, each through a random pod, besides the
// continuous load; afterwards every counter equals the increments it acknowledged.
func scenarioTraffic(c sc, s *suite) {
	start := time.Now()
	d := load.Start(load.Config{Name: trafficDriver, Entities: s.traffic, Rate: trafficRate,
		Increments: trafficIncrements, Pods: s.pods, Recorder: s.rec, Port: publicPort, Timeout: requestTimeout})
	waitDriven(c, d, len(s.traffic)*trafficIncrements, trafficRate)
	end := time.Now()
	st := s.window(c, start, end, trafficDriver, continuousDriver)
	tr := c.r.Requests[trafficDriver]
	c.r.figure("increments", fmt.Sprintf("%d sent, %d acknowledged, %d failed", tr.Sent, tr.Acked, tr.Failed))
	c.r.figure("rate", fmt.Sprintf("%.0f/s", tr.RatePerSecond))
	c.r.figure("latency p50 / p99", fmt.Sprintf("%.1f / %.1f ms", tr.P50, tr.P99))
	if st.Failed > 0 {
		c.errorf("%d of %d requests failed (traffic and continuous drivers)", st.Failed, st.Sent)
	}

	// Every counter now equals what it acknowledged (the drivers are its only writers).
	exact := s.checkAcknowledged(c, s.traffic)
	c.r.figure("counters equal to their acknowledged increments", fmt.Sprintf("%d of %d", exact, len(s.traffic)))
}

// waitDriven waits for a finite driver's `want` increments at `rate` a second, three times as
// long as they take plus a minute at the most; then it stops the driver and fails the scenario.
func waitDriven(c sc, d *load.Driver, want, rate int) {
	c.Helper()
	deadline := time.Duration(float64(want)/float64(rate)*3)*time.Second + time.Minute
	select {
	case <-d.Done():
	case <-time.After(deadline):
		d.Stop()
		c.errorf("the %d increments did not finish within %s (the rate is %d/s)", want, deadline, rate)
	}
}

func head(s []string, n int) []string {
	if len(s) > n {
		return append(append([]string(nil), s[:n]...), fmt.Sprintf("… %d more", len(s)-n))
	}
	return s
}
