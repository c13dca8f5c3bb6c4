package main

import (
	"log/slog"
	"net/http"
	"net/http/pprof"
)

// startPprof serves the Go profiles of the mount server on addr (hidden
// flag --pprof), for profiling the engine under a real workload:
//
//	go tool pprof http://127.0.0.1:6060/debug/pprof/profile?seconds=20
func startPprof(addr string, lg *slog.Logger) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	go func() {
		if err := http.ListenAndServe(addr, mux); err != nil {
			lg.Error("pprof server stopped", "addr", addr, "err", err)
		}
	}()
}
