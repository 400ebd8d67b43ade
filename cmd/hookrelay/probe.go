package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"
)

// probeTimeout bounds one probe's request.
const probeTimeout = 3 * time.Second

// probe GETs a URL and exits 0 on a 2xx, 1 otherwise: a container health
// check for images with no shell or curl (hookrelay's is distroless).
func probe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: hookrelay probe URL   (exit 0 when GET URL answers 2xx, 1 otherwise)")
	}
	if err := fs.Parse(args); err != nil {
		return parseStatus(err)
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fs.Arg(0), nil)
	if err != nil {
		fmt.Fprintln(stderr, "hookrelay probe:", err)
		return 2
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(stderr, "hookrelay probe:", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	fmt.Fprintf(stdout, "%s %s\n", resp.Status, body)
	if resp.StatusCode/100 != 2 {
		return 1
	}
	return 0
}
