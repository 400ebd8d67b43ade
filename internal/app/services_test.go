package app

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestHTTPServiceStopsAfterOpenRequests: an HTTP service's Run returns
// only once its open requests finished (within its shutdown), so the
// supervisor stops the worker, and Close the pools, after them.
func TestHTTPServiceStopsAfterOpenRequests(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	inHandler, release := make(chan struct{}), make(chan struct{})
	h := &httpService{name: "http", listener: l, shutdown: 10 * time.Second, srv: &http.Server{
		Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { close(inHandler); <-release })}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	go func() {
		if resp, err := http.Get("http://" + l.Addr().String()); err == nil {
			resp.Body.Close()
		}
	}()
	<-inHandler
	cancel()
	select {
	case <-done:
		close(release)
		t.Fatal("Run returned while a request was still being served")
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return once the request finished")
	}
}
