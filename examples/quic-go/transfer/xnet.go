package main

// The raw-stream protocol on Go's own QUIC package, golang.org/x/net/quic (--stack x-net-quic):
// a second Go stack with its own loss recovery (NewReno), ACK policy and packet-number
// skipping, none of which the proxy's inference was developed against. No HTTP/3 (the package
// has none) and no transport counters (it exports none): its server's summary carries zeros
// for them, and its client's report leaves the sender's counters out.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	xquic "golang.org/x/net/quic"
)

// xnetStack is the --stack name of golang.org/x/net/quic.
const xnetStack = "x-net-quic"

// xnetConfig is the endpoint and connection configuration of both sides.
func xnetConfig(tlsConf *tls.Config) *xquic.Config {
	// QUIC needs TLS 1.3 (RFC 9001 §4.2); quic-go raises the minimum itself, this package
	// leaves it to the caller.
	tlsConf = tlsConf.Clone()
	tlsConf.MinVersion = tls.VersionTLS13
	return &xquic.Config{
		TLSConfig:      tlsConf,
		MaxIdleTimeout: idleTimeout,
		// The download's whole payload may sit in flight on the lab's slowest links.
		MaxStreamReadBufferSize: 8 << 20,
		MaxConnReadBufferSize:   8 << 20,
	}
}

// xnetServe listens on addr and serves raw-stream transfers until ctx ends (or after the first
// connection with once).
func xnetServe(ctx context.Context, addr string, tlsConf *tls.Config, once bool, logger *slog.Logger) error {
	ep, err := xquic.Listen("udp", addr, xnetConfig(tlsConf))
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	defer func() { _ = ep.Close(context.Background()) }()
	logger.Info("listening", "addr", ep.LocalAddr().String(), "stack", xnetStack)
	return xnetServeEndpoint(ctx, ep, once, logger)
}

// xnetServeEndpoint accepts connections on ep until ctx ends (or after the first with once)
// and serves each.
func xnetServeEndpoint(ctx context.Context, ep *xquic.Endpoint, once bool, logger *slog.Logger) error {
	return acceptLoop(ctx, ep.Accept, once, func(conn *xquic.Conn) {
		peer := conn.RemoteAddr().String()
		if err := xnetServeConn(ctx, conn, logger); err != nil {
			logger.Warn("connection failed", "peer", peer, "err", err)
			conn.Abort(&xquic.ApplicationError{Code: 1, Reason: "server error"})
		}
	})
}

// xnetServeConn serves one raw-stream transfer on conn and waits for the client to close.
func xnetServeConn(ctx context.Context, conn *xquic.Conn, logger *slog.Logger) error {
	peer := conn.RemoteAddr().String()
	str, err := conn.AcceptStream(ctx)
	if err != nil {
		return fmt.Errorf("accepting stream: %w", err)
	}
	if err := answerRequest(str, peer, logger, str.Flush, func() summary { return summary{} }); err != nil {
		return err
	}
	str.CloseWrite()
	wait, cancel := context.WithTimeout(ctx, closeWait)
	defer cancel()
	err = conn.Wait(wait)
	var app *xquic.ApplicationError
	switch {
	case err == nil, errors.As(err, &app) && app.Code == 0:
		// NO_ERROR, or the clients' application close with code 0.
		logger.Info("connection closed", "peer", peer)
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return errors.New("client did not close the connection")
	default:
		return fmt.Errorf("closing: %w", err)
	}
}

// xnetTransfer dials addr with golang.org/x/net/quic and runs one raw-stream transfer.
func xnetTransfer(ctx context.Context, addr string, req request) (report, error) {
	tlsConf := &tls.Config{
		ServerName: "localhost",
		// The lab's servers have self-signed certificates, as for the other clients.
		InsecureSkipVerify: true, //nolint:gosec
		NextProtos:         []string{alpnRaw},
	}
	// An endpoint of the server's address family: a dual-stack socket sends IPv4 peers'
	// datagrams as v4-mapped IPv6, which the package does not unmap.
	local := "0.0.0.0:0"
	if ap, err := netip.ParseAddrPort(addr); err == nil && ap.Addr().Is6() && !ap.Addr().Is4In6() {
		local = "[::]:0"
	}
	ep, err := xquic.Listen("udp", local, nil)
	if err != nil {
		return report{}, fmt.Errorf("client endpoint: %w", err)
	}
	defer func() { _ = ep.Close(context.Background()) }()
	dialed := time.Now()
	conn, err := ep.Dial(ctx, "udp", addr, xnetConfig(tlsConf))
	if err != nil {
		return report{}, fmt.Errorf("handshake with %s: %w", addr, err)
	}
	d, stats, err := xnetRawTransfer(ctx, conn, req)
	if err != nil {
		conn.Abort(&xquic.ApplicationError{Code: 1, Reason: "client error"})
		return report{}, err
	}
	conn.Abort(&xquic.ApplicationError{Code: 0, Reason: "done"})
	rep := newReport(req.dir, req.bytes, dialed, d, stats)
	rep.Stack = xnetStack
	return rep, nil
}

// xnetRawTransfer is rawTransfer on a golang.org/x/net/quic connection.
func xnetRawTransfer(ctx context.Context, conn *xquic.Conn, req request) (time.Duration, senderStats, error) {
	str, err := conn.NewStream(ctx)
	if err != nil {
		return 0, senderStats{}, fmt.Errorf("opening stream: %w", err)
	}
	str.SetReadContext(ctx)
	str.SetWriteContext(ctx)
	finish := func() error {
		str.CloseWrite()
		return nil
	}
	d, _, firstByte, err := rawExchange(str, req, str.Flush, finish)
	if err != nil {
		return 0, senderStats{}, err
	}
	// Counters the package does not export are left out of the report.
	return d, senderStats{senderUnknown: true, firstByte: firstByte}, nil
}
