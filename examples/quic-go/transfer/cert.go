package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"math/big"
	"time"
)

// padOID names the padding extension, as examples/src/transfer/cert.rs (a private arc).
var padOID = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 55555, 1}

// selfSignedTLS is a fresh self-signed certificate for localhost (the clients accept any),
// padded by a non-critical extension to at least minDER bytes (and at most 4 more) when
// minDER > 0 and the bare certificate is smaller: ReACKed QUICer (IMC '24) §3 varies the certificate size to reach the server's
// anti-amplification limit.
func selfSignedTLS(alpn string, minDER int) (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	pad := 0
	for range 8 {
		der, err := selfSigned(key, pad)
		if err != nil {
			return nil, err
		}
		n := len(der)
		// An unpadded certificate already larger than asked for is kept as it is.
		if minDER <= 0 || (n >= minDER && (pad == 0 || n <= minDER+4)) {
			return &tls.Config{
				Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
				NextProtos:   []string{alpn},
			}, nil
		}
		// DER length fields and the signature's length move the size by a few bytes; the
		// difference converges in two or three rounds.
		if n < minDER {
			pad += max(minDER-n, 1)
		} else {
			pad = max(pad-(n-minDER-1), 1)
		}
	}
	return nil, fmt.Errorf("could not pad the certificate to %d bytes", minDER)
}

func selfSigned(key *ecdsa.PrivateKey, pad int) ([]byte, error) {
	tmpl := x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
	if pad > 0 {
		value, err := asn1.Marshal(make([]byte, pad))
		if err != nil {
			return nil, err
		}
		tmpl.ExtraExtensions = []pkix.Extension{{Id: padOID, Value: value}}
	}
	return x509.CreateCertificate(rand.Reader, &tmpl, &tmpl, &key.PublicKey, key)
}
