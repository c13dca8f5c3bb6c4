package mountd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/agentfs/agentfs/fs/control"
)

// serveMetrics serves h at http://addr/metrics until stop is called. A
// listen failure (address in use, bad address) is returned at once, so a
// mount asked for metrics it cannot serve does not start.
func serveMetrics(addr string, h http.Handler, log *slog.Logger) (stop func(), err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+control.MetricsPath, h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "addr", addr, "err", err)
		}
	}()
	log.Info("serving metrics", "url", "http://"+l.Addr().String()+control.MetricsPath)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}
