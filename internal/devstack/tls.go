package devstack

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"go.temporal.io/server/common/config"
)

// TLS makes the embedded frontend require TLS and a client certificate
// (mTLS), as production clusters do. The internal services keep talking
// in the clear.
type TLS struct {
	// CAFile is a PEM file of the CA that signs the frontend's certificate
	// and the clients'.
	CAFile string
	// CertFile and KeyFile are the frontend's certificate and key.
	CertFile, KeyFile string
	// ClientCertFile and ClientKeyFile are the certificate the server's own
	// system worker, and Start, present to the frontend.
	ClientCertFile, ClientKeyFile string
	// ServerName is the name in the frontend's certificate.
	ServerName string
}

// apply sets the server configuration's TLS.
func (t *TLS) apply(conf *config.Config) {
	conf.Global.TLS.Frontend.Server = config.ServerTLS{
		CertFile: t.CertFile, KeyFile: t.KeyFile,
		ClientCAFiles: []string{t.CAFile}, RequireClientAuth: true,
	}
	client := config.ClientTLS{ServerName: t.ServerName, RootCAFiles: []string{t.CAFile}}
	conf.Global.TLS.Frontend.Client = client
	conf.Global.TLS.SystemWorker = config.WorkerTLS{CertFile: t.ClientCertFile, KeyFile: t.ClientKeyFile, Client: client}
}

// clientConfig is the TLS a client of the frontend uses (with the client
// certificate).
func (t *TLS) clientConfig() (*tls.Config, error) {
	pem, err := os.ReadFile(t.CAFile)
	if err != nil {
		return nil, fmt.Errorf("embedded temporal TLS: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, errors.New("embedded temporal TLS: no certificate in the CA file")
	}
	cert, err := tls.LoadX509KeyPair(t.ClientCertFile, t.ClientKeyFile)
	if err != nil {
		return nil, fmt.Errorf("embedded temporal TLS: %w", err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots, Certificates: []tls.Certificate{cert}, ServerName: t.ServerName}, nil
}
