package devstack

import (
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
