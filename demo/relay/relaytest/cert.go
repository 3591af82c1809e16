package relaytest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Cert is a test certificate authority and a relay certificate it signed,
// written as PEM files: what -tls-cert, -tls-key and a client's CA file
// take. The relay certificate names 127.0.0.1, ::1 and localhost, so a relay
// on loopback verifies under any of them.
type Cert struct {
	CertFile, KeyFile string // the relay's certificate chain and its ECDSA key
	CAFile            string // the CA certificate, to trust
	Pool              *x509.CertPool
}

// ClientConfig is a client TLS config that trusts only the test CA.
func (c *Cert) ClientConfig() *tls.Config { return &tls.Config{RootCAs: c.Pool} }

// NewCert makes a CA and a relay certificate (ECDSA P-256, valid for a day)
// and writes them into dir.
func NewCert(t testing.TB, dir string) *Cert {
	t.Helper()
	c, err := WriteCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// WriteCert is NewCert outside a test.
func WriteCert(dir string) (*Cert, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "relaywasm test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	c := &Cert{
		CertFile: filepath.Join(dir, "relay-cert.pem"), KeyFile: filepath.Join(dir, "relay-key.pem"),
		CAFile: filepath.Join(dir, "ca.pem"), Pool: x509.NewCertPool(),
	}
	c.Pool.AddCert(caCert)
	for _, f := range []struct {
		path  string
		typ   string
		der   []byte
		perms os.FileMode
	}{
		{c.CertFile, "CERTIFICATE", leafDER, 0o644},
		{c.KeyFile, "EC PRIVATE KEY", keyDER, 0o600},
		{c.CAFile, "CERTIFICATE", caDER, 0o644},
	} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der}), f.perms); err != nil {
			return nil, err
		}
	}
	return c, nil
}
