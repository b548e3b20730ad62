package controlplane

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the key material of one plane, as PEM files in its folder.
type pki struct {
	caCert, caKey     string
	serverCert, key   string // the apiserver's serving pair
	saKey, saPub      string // service-account signing key pair
	caPEM             []byte
	ca                *x509.Certificate
	caSigner          crypto.Signer
	clientPairs       map[string][2]string // user -> cert, key file
	clientPEM         map[string][2][]byte // user -> cert, key PEM
	certValidFor      time.Duration
	serialNumberLimit *big.Int
}

// clientUser is one identity of a client certificate.
type clientUser struct {
	name   string // file stem
	cn     string
	groups []string
}

var clientUsers = []clientUser{
	{name: "admin", cn: "admin", groups: []string{"system:masters"}},
	{name: "controller-manager", cn: "system:kube-controller-manager"},
	{name: "scheduler", cn: "system:kube-scheduler"},
	// kwok plays the kubelets; it updates Node and Pod status of every
	// node it manages, which is more than the Node authorizer allows a
	// single kubelet.
	{name: "kwok", cn: "kwok", groups: []string{"system:masters"}},
	// The apiserver's identity towards the kubelet endpoint.
	{name: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client"},
}

// newPKI writes a CA, a serving certificate, the client certificates and
// a service-account key pair into dir.
func newPKI(dir string) (*pki, error) {
	p := &pki{
		caCert:            filepath.Join(dir, "ca.crt"),
		caKey:             filepath.Join(dir, "ca.key"),
		serverCert:        filepath.Join(dir, "apiserver.crt"),
		key:               filepath.Join(dir, "apiserver.key"),
		saKey:             filepath.Join(dir, "sa.key"),
		saPub:             filepath.Join(dir, "sa.pub"),
		clientPairs:       map[string][2]string{},
		clientPEM:         map[string][2][]byte{},
		certValidFor:      7 * 24 * time.Hour,
		serialNumberLimit: new(big.Int).Lsh(big.NewInt(1), 127),
	}
	now := time.Now()

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("controlplane: CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          p.serial(),
		Subject:               pkix.Name{CommonName: "widget-operator-test-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(p.certValidFor),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("controlplane: CA: %w", err)
	}
	if p.ca, err = x509.ParseCertificate(caDER); err != nil {
		return nil, fmt.Errorf("controlplane: CA: %w", err)
	}
	p.caSigner = caKey
	p.caPEM = pemBlock("CERTIFICATE", caDER)
	if err := writePEM(p.caCert, p.caPEM); err != nil {
		return nil, err
	}
	if err := writeKey(p.caKey, caKey); err != nil {
		return nil, err
	}

	// The serving certificate.
	srv := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 96, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	certPEM, keyPEM, err := p.issue(srv, now)
	if err != nil {
		return nil, err
	}
	if err := writePEM(p.serverCert, certPEM); err != nil {
		return nil, err
	}
	if err := writePEM(p.key, keyPEM); err != nil {
		return nil, err
	}

	for _, u := range clientUsers {
		tmpl := &x509.Certificate{
			Subject:     pkix.Name{CommonName: u.cn, Organization: u.groups},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		certPEM, keyPEM, err := p.issue(tmpl, now)
		if err != nil {
			return nil, err
		}
		certFile := filepath.Join(dir, u.name+".crt")
		keyFile := filepath.Join(dir, u.name+".key")
		if err := writePEM(certFile, certPEM); err != nil {
			return nil, err
		}
		if err := writePEM(keyFile, keyPEM); err != nil {
			return nil, err
		}
		p.clientPairs[u.name] = [2]string{certFile, keyFile}
		p.clientPEM[u.name] = [2][]byte{certPEM, keyPEM}
	}

	// Service-account tokens are signed with RSA, which every consumer of
	// the tokens understands.
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("controlplane: service-account key: %w", err)
	}
	if err := writeKey(p.saKey, saKey); err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return nil, fmt.Errorf("controlplane: service-account key: %w", err)
	}
	if err := writePEM(p.saPub, pemBlock("PUBLIC KEY", pubDER)); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *pki) serial() *big.Int {
	n, err := rand.Int(rand.Reader, p.serialNumberLimit)
	if err != nil {
		// crypto/rand does not fail on supported platforms.
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

// issue signs tmpl with the CA under a fresh ECDSA key and returns the
// certificate and key as PEM.
func (p *pki) issue(tmpl *x509.Certificate, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("controlplane: key: %w", err)
	}
	tmpl.SerialNumber = p.serial()
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.Add(p.certValidFor)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, key.Public(), p.caSigner)
	if err != nil {
		return nil, nil, fmt.Errorf("controlplane: certificate %s: %w", tmpl.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("controlplane: key: %w", err)
	}
	return pemBlock("CERTIFICATE", der), pemBlock("PRIVATE KEY", keyDER), nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func writeKey(path string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("controlplane: key: %w", err)
	}
	return writePEM(path, pemBlock("PRIVATE KEY", der))
}

func writePEM(path string, data []byte) error {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	return nil
}
