// Package temporalconn connects hookrelay to a Temporal cluster: the
// connection's TLS and credentials (Settings, Dial), and the namespace
// hookrelay needs, checked at start (Check) and prepared on request
// (Setup).
package temporalconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
)

// Settings say how to reach the Temporal frontend.
type Settings struct {
	// Address is the frontend's host:port.
	Address string
	// Namespace is where hookrelay's workflows run.
	Namespace string
	// TLS connects over TLS. CAFile, CertFile and APIKey each turn it on
	// too.
	TLS bool
	// CAFile is a PEM file of the CAs that sign the frontend's
	// certificate. Defaults to the system's roots.
	CAFile string
	// CertFile and KeyFile are PEM files of the client certificate and
	// key presented to the frontend (mTLS).
	CertFile, KeyFile string
	// ServerName is the name the frontend's certificate must carry.
	// Defaults to Address's host.
	ServerName string
	// APIKey is sent as a bearer token (Temporal Cloud).
	APIKey string
	// Uncompressed sends requests without gzip (the responses follow): a
	// frontend on loopback gains nothing from it and the CPU is saved.
	// Defaults to false: gzip, the SDK's default.
	Uncompressed bool
	// Interceptors are the client's; those that are also worker
	// interceptors (tracing) apply to the workers built on it too.
	Interceptors []interceptor.ClientInterceptor
}

// TLSOn reports whether the connection uses TLS.
func (s Settings) TLSOn() bool {
	return s.TLS || s.CAFile != "" || s.CertFile != "" || s.ServerName != "" || s.APIKey != ""
}

// ClientOptions are the SDK's options for s; logger receives the SDK's
// logs.
func (s Settings) ClientOptions(logger sdklog.Logger) (client.Options, error) {
	opts := client.Options{HostPort: s.Address, Namespace: s.Namespace, Logger: logger, Interceptors: s.Interceptors}
	if s.Uncompressed {
		opts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
	}
	if s.APIKey != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(s.APIKey)
	}
	if !s.TLSOn() {
		return opts, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.ServerName}
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(s.Address); err == nil {
			cfg.ServerName = host
		}
	}
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return opts, fmt.Errorf("temporal TLS CA: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return opts, fmt.Errorf("temporal TLS CA %s: no PEM certificate in it", s.CAFile)
		}
	}
	if s.CertFile != "" || s.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
		if err != nil {
			return opts, fmt.Errorf("temporal TLS client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	opts.ConnectionOptions.TLS = cfg
	return opts, nil
}

// ConnectError is a frontend that could not be reached, or that refused
// the connection (a TLS or mTLS frontend reached without TLS or without a
// client certificate fails so).
type ConnectError struct {
	Address string
	// Reachable: a TCP connection to Address opened, so the refusal came
	// from TLS, credentials or the frontend itself.
	Reachable bool
	// TLS, ClientCert and APIKey say how the connection was tried.
	TLS, ClientCert, APIKey bool
	Err                     error
}

func (e *ConnectError) Error() string {
	if !e.Reachable {
		return fmt.Sprintf("connect to Temporal at %s: nothing answers there (check --temporal-address and that the frontend runs): %v", e.Address, e.Err)
	}
	var how, hint string
	switch {
	case e.APIKey:
		how, hint = "over TLS with an API key", "check the API key, and that the address is the namespace's endpoint for API keys"
	case e.ClientCert:
		how, hint = "over TLS with a client certificate", "check that the frontend trusts the certificate's CA, and --temporal-tls-ca and --temporal-tls-server-name for the frontend's own certificate"
	case e.TLS:
		how, hint = "over TLS without a client certificate", "a frontend that requires mTLS needs --temporal-tls-cert and --temporal-tls-key (Temporal Cloud: those, or --temporal-api-key); check --temporal-tls-ca for a private CA"
	default:
		how, hint = "without TLS", "a frontend that requires TLS needs --temporal-tls (--temporal-tls-ca for a private CA), and for mTLS --temporal-tls-cert and --temporal-tls-key"
	}
	return fmt.Sprintf("connect to Temporal at %s %s: %v (%s)", e.Address, how, e.Err, hint)
}

func (e *ConnectError) Unwrap() error { return e.Err }

// DialLazy returns a client that connects on its first call, and again
// on each call while the frontend does not answer: for a process that must
// start while Temporal is unreachable (the API, whose ingest needs only
// Postgres).
func DialLazy(s Settings, logger sdklog.Logger) (client.Client, error) {
	opts, err := s.ClientOptions(logger)
	if err != nil {
		return nil, err
	}
	return client.NewLazyClient(opts)
}

// Dial connects to the frontend (the SDK checks it answers).
func Dial(ctx context.Context, s Settings, logger sdklog.Logger) (client.Client, error) {
	opts, err := s.ClientOptions(logger)
	if err != nil {
		return nil, err
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		ce := &ConnectError{Address: s.Address, TLS: s.TLSOn(), ClientCert: s.CertFile != "", APIKey: s.APIKey != "", Err: err}
		var d net.Dialer
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if conn, derr := d.DialContext(dctx, "tcp", s.Address); derr == nil {
			ce.Reachable = true
			_ = conn.Close()
		}
		return nil, ce
	}
	return c, nil
}
