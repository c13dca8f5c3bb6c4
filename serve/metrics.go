package serve

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the server's Prometheus metrics.
type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newMetrics(reg *prometheus.Registry, s *Server) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentfs_serve_requests_total",
			Help: "HTTP requests by route (METHOD PATTERN) and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentfs_serve_request_duration_seconds",
			Help:    "HTTP request latency by route (METHOD PATTERN).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 120},
		}, []string{"route"}),
	}
	gauges := []prometheus.Collector{
		m.requests, m.latency,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "agentfs_serve_commands_running",
			Help: "Commands running (exec requests and background jobs).",
		}, func() float64 { n, _ := s.limits.running(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "agentfs_serve_jobs_running",
			Help: "Background jobs running.",
		}, func() float64 { _, n := s.limits.running(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "agentfs_serve_workspaces_mounted",
			Help: "Workspaces mounted now.",
		}, func() float64 { return float64(s.mgr.Mounted()) }),
	}
	for _, c := range gauges {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// observe counts one request.
func (m *metrics) observe(route string, status int, d time.Duration) {
	if status == 0 {
		status = 200
	}
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.latency.WithLabelValues(route).Observe(d.Seconds())
}
