// Command sidekick-transfer-quicgo is sidekick-transfer (examples/src/bin/sidekick-transfer.rs)
// on quic-go, and with --stack x-net-quic on Go's golang.org/x/net/quic (xnet.go): bulk download and upload over the raw-stream protocol (ALPN "sidekick-transfer")
// or over HTTP/3 (quic-go/http3: GET /download/N, POST /upload/N, GET /stats), with the same
// one-line JSON report, so quic-go servers and clients interoperate with the quinn and quiche
// ones in the lab (app.stack / app.client_stack = "quic-go").
//
//	sidekick-transfer-quicgo server [--stack quic-go|x-net-quic] --listen IP:PORT [--once] [--http3]
//	sidekick-transfer-quicgo client [--stack quic-go|x-net-quic] --connect IP:PORT (--download N | --upload N)
//	                               [--json] [--timeout SECS] [--http3] [--cc cubic]
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/quic-go/quic-go"
)

const (
	stackName   = "quic-go"
	alpnRaw     = "sidekick-transfer"
	alpnH3      = "h3"
	idleTimeout = 30 * time.Second
	// closeWait bounds how long a server waits for its client to close after the last reply.
	closeWait = 60 * time.Second
)

func main() {
	if len(os.Args) < 2 {
		usage(os.Stderr)
		os.Exit(2)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var err error
	switch os.Args[1] {
	case "server":
		err = serverMain(os.Args[2:], logger)
	case "client":
		err = clientMain(os.Args[2:])
	case "--help", "-h", "help":
		usage(os.Stdout)
		return
	default:
		usage(os.Stderr)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "sidekick-transfer-quicgo: %v\n", err)
		os.Exit(1)
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Bulk transfer over QUIC on quic-go, interoperable with sidekick-transfer (quinn, quiche).

Usage:
  sidekick-transfer-quicgo server [--stack quic-go|x-net-quic] --listen IP:PORT [--once] [--http3]
  sidekick-transfer-quicgo client [--stack quic-go|x-net-quic] --connect IP:PORT (--download N | --upload N)
                                  [--json] [--timeout SECS] [--http3] [--cc cubic]
`)
}

// commonFlags are the flags sidekick-transfer takes on both sides that mean something here.
type commonFlags struct {
	stack *string
	cc    *string
	http3 *bool
}

func addCommon(fs *flag.FlagSet) commonFlags {
	return commonFlags{
		stack: fs.String("stack", stackName, "QUIC implementation: quic-go, or x-net-quic (golang.org/x/net/quic, raw stream only)"),
		cc:    fs.String("cc", "cubic", "congestion controller (quic-go has CUBIC only; x-net-quic runs NewReno whatever is asked)"),
		http3: fs.Bool("http3", false, "speak HTTP/3 (ALPN h3) instead of the raw stream protocol"),
	}
}

func (c commonFlags) check() error {
	if *c.stack == xnetStack {
		if *c.http3 {
			return errors.New("--http3: golang.org/x/net/quic has no HTTP/3; x-net-quic speaks the raw stream protocol only")
		}
		return nil
	}
	if *c.stack != stackName {
		return fmt.Errorf("--stack %s: this binary runs quic-go or %s", *c.stack, xnetStack)
	}
	if *c.cc != "cubic" {
		return fmt.Errorf("--cc %s: quic-go offers CUBIC only", *c.cc)
	}
	return nil
}

func (c commonFlags) alpn() string {
	if *c.http3 {
		return alpnH3
	}
	return alpnRaw
}

func quicConfig() *quic.Config {
	return &quic.Config{MaxIdleTimeout: idleTimeout, KeepAlivePeriod: idleTimeout / 3}
}

func serverMain(args []string, logger *slog.Logger) error {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	common := addCommon(fs)
	listen := fs.String("listen", "", "address to listen on (IP:PORT)")
	once := fs.Bool("once", false, "exit after the first connection")
	certBytes := fs.Int("cert-bytes", 0, "pad the certificate to at least this many DER bytes (0: unpadded)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *listen == "" {
		return errors.New("--listen is required")
	}
	if err := common.check(); err != nil {
		return err
	}
	tlsConf, err := selfSignedTLS(common.alpn(), *certBytes)
	if err != nil {
		return fmt.Errorf("certificate: %w", err)
	}
	if *common.stack == xnetStack {
		return xnetServe(context.Background(), *listen, tlsConf, *once, logger)
	}
	ln, err := quic.ListenAddr(*listen, tlsConf, quicConfig())
	if err != nil {
		return fmt.Errorf("listening on %s: %w", *listen, err)
	}
	defer ln.Close()
	logger.Info("listening", "addr", ln.Addr().String(), "http3", *common.http3)
	return serve(context.Background(), ln, *once, *common.http3, logger)
}

// serve accepts connections until ctx ends (or after the first with once) and serves each.
func serve(ctx context.Context, ln *quic.Listener, once, http3 bool, logger *slog.Logger) error {
	h3 := newH3Server(logger)
	return acceptLoop(ctx, ln.Accept, once, func(conn *quic.Conn) {
		peer := conn.RemoteAddr().String()
		var err error
		if http3 {
			err = h3.ServeQUICConn(conn)
		} else {
			err = serveRaw(conn, logger)
		}
		if err != nil {
			logger.Warn("connection failed", "peer", peer, "err", err)
			_ = conn.CloseWithError(1, "server error")
		}
	})
}

// acceptLoop accepts connections with accept until ctx ends (or after the first with once) and
// serves each with serveConn, on its own goroutine unless once (either Go stack).
func acceptLoop[C any](ctx context.Context, accept func(context.Context) (C, error), once bool, serveConn func(C)) error {
	for {
		conn, err := accept(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accepting: %w", err)
		}
		if once {
			serveConn(conn)
			return nil
		}
		go serveConn(conn)
	}
}

func clientMain(args []string) error {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	common := addCommon(fs)
	connect := fs.String("connect", "", "server address (IP:PORT)")
	down := fs.Uint64("download", 0, "download this many bytes (server to client)")
	up := fs.Uint64("upload", 0, "upload this many bytes (client to server)")
	asJSON := fs.Bool("json", false, "print exactly one JSON line")
	timeout := fs.Float64("timeout", 120, "give up after this many seconds")
	sidekick := fs.Bool("sidekick", false, "not available on quic-go (the SDK integrates quinn and quiche)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := common.check(); err != nil {
		return err
	}
	if *sidekick {
		return errors.New("--sidekick: the SDK has no quic-go integration; use a quinn or quiche client")
	}
	if *connect == "" || (*down == 0) == (*up == 0) {
		return errors.New("--connect and exactly one of --download N / --upload N (N > 0) are required")
	}
	req := request{dir: download, bytes: *down}
	if *up > 0 {
		req = request{dir: upload, bytes: *up}
	}
	if *timeout <= 0 || *timeout > 86400 {
		return fmt.Errorf("--timeout %v out of range", *timeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(*timeout*float64(time.Second)))
	defer cancel()
	var rep report
	var err error
	if *common.stack == xnetStack {
		rep, err = xnetTransfer(ctx, *connect, req)
	} else {
		rep, err = runClient(ctx, *connect, req, *common.http3)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		line, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		fmt.Println(string(line))
	} else {
		fmt.Printf("%s %s %d bytes in %.3f s: %.2f Mbit/s (sender: %s packets, %s lost)\n",
			rep.Stack, rep.Direction, rep.Bytes, rep.DurationS, rep.GoodputMbps, opt(rep.SentPackets), opt(rep.LostPackets))
	}
	return nil
}

// runClient dials addr, runs one transfer and closes the connection.
func runClient(ctx context.Context, addr string, req request, http3 bool) (report, error) {
	alpn := alpnRaw
	if http3 {
		alpn = alpnH3
	}
	tlsConf := &tls.Config{
		ServerName: "localhost",
		// The lab's servers have self-signed certificates, as for the Rust clients.
		InsecureSkipVerify: true, //nolint:gosec
		NextProtos:         []string{alpn},
	}
	dialed := time.Now()
	conn, err := quic.DialAddr(ctx, addr, tlsConf, quicConfig())
	if err != nil {
		return report{}, fmt.Errorf("handshake with %s: %w", addr, err)
	}
	var d time.Duration
	var stats senderStats
	if http3 {
		d, stats, err = h3Transfer(ctx, conn, req)
	} else {
		d, stats, err = rawTransfer(ctx, conn, req)
	}
	if err != nil {
		_ = conn.CloseWithError(1, "client error")
		return report{}, err
	}
	_ = conn.CloseWithError(0, "done")
	return newReport(req.dir, req.bytes, dialed, d, stats), nil
}

// connSummary is a summary of conn's own counters (quic-go counts lost packets; their frames
// are what it retransmits, as quinn's report does).
func connSummary(conn *quic.Conn) summary {
	s := conn.ConnectionStats()
	return summary{sentPackets: s.PacketsSent, lostPackets: s.PacketsLost, retransmissions: s.PacketsLost}
}

// opt is a counter for the human-readable line, "?" when the server did not report it.
func opt(v *uint64) string {
	if v == nil {
		return "?"
	}
	return fmt.Sprint(*v)
}
