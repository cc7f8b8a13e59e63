// Command sidekick-rtc-quicgo is the RTC frames server of sidekick-rtc (PEMI §6.1.2) on
// quic-go: the same application protocol (ALPN "sidekick-rtc", examples/src/rtc.rs), so the
// sidekick-rtc client (quinn or quiche) measures a quic-go sender. PEMI assists the sender's
// loss recovery and congestion control, so the sender is the stack a PEMI run tests.
//
//	sidekick-rtc-quicgo server --listen IP:PORT [--once] [--fps 30] [--kbps 3000]
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"os"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
)

// Values shared with examples/src/rtc.rs.
const (
	alpn            = "sidekick-rtc"
	defaultFPS      = 30
	defaultKbps     = 3000
	maxDurationMs   = 3_600_000
	maxBacklog      = 3000 // frames created but not yet handed to the transport
	idleTimeout     = 30 * time.Second
	closeWaitWindow = 60 * time.Second // how long the server waits for the client to close
)

func main() {
	if len(os.Args) >= 2 && (os.Args[1] == "--help" || os.Args[1] == "-h" || os.Args[1] == "help") {
		usage(os.Stdout)
		return
	}
	if len(os.Args) < 2 || os.Args[1] != "server" {
		usage(os.Stderr)
		os.Exit(2)
	}
	fs := flag.NewFlagSet("server", flag.ExitOnError)
	listen := fs.String("listen", "", "address to listen on (IP:PORT)")
	once := fs.Bool("once", false, "exit after the first connection")
	fps := fs.Uint("fps", defaultFPS, "frames per second (1..1000)")
	kbps := fs.Uint("kbps", defaultKbps, "bit rate of the frame payloads, kbit/s (1..1000000)")
	fs.Usage = func() { usage(fs.Output()); fs.PrintDefaults() }
	_ = fs.Parse(os.Args[2:])
	if *listen == "" || *fps < 1 || *fps > 1000 || *kbps < 1 || *kbps > 1_000_000 {
		fs.Usage()
		os.Exit(2)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	params := frameParams{fps: uint32(*fps), kbps: uint32(*kbps)}
	if err := serve(*listen, *once, params, logger); err != nil {
		fmt.Fprintf(os.Stderr, "sidekick-rtc-quicgo: %v\n", err)
		os.Exit(1)
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `RTC frames over QUIC on quic-go: the server sends frames (default 30 fps, 3000 kbit/s), each on
its own unidirectional stream, to a sidekick-rtc client, which reports frame delay, frame-level
jitter and goodput.

Usage:
  sidekick-rtc-quicgo server --listen IP:PORT [--once] [--fps 30] [--kbps 3000]

Client: sidekick-rtc client --stack quinn|quiche --connect IP:PORT --duration SECS --json
`)
}

func serve(listen string, once bool, params frameParams, logger *slog.Logger) error {
	tlsConf, err := selfSignedTLS()
	if err != nil {
		return fmt.Errorf("certificate: %w", err)
	}
	ln, err := quic.ListenAddr(listen, tlsConf, &quic.Config{
		MaxIdleTimeout:  idleTimeout,
		KeepAlivePeriod: idleTimeout / 3,
	})
	if err != nil {
		return fmt.Errorf("listening on %s: %w", listen, err)
	}
	defer ln.Close()
	logger.Info("listening", "addr", ln.Addr().String(), "fps", params.fps, "kbps", params.kbps)
	var wg sync.WaitGroup
	for {
		conn, err := ln.Accept(context.Background())
		if err != nil {
			return fmt.Errorf("accepting: %w", err)
		}
		run := func() {
			peer := conn.RemoteAddr().String()
			if err := serveConnection(conn, params, logger); err != nil {
				logger.Warn("connection failed", "peer", peer, "err", err)
				_ = conn.CloseWithError(1, "server error")
			}
		}
		if once {
			run()
			return nil
		}
		wg.Add(1)
		go func() { defer wg.Done(); run() }()
	}
}

func serveConnection(conn *quic.Conn, params frameParams, logger *slog.Logger) error {
	peer := conn.RemoteAddr().String()
	ctx := conn.Context()
	req, err := conn.AcceptStream(ctx)
	if err != nil {
		return fmt.Errorf("accepting request stream: %w", err)
	}
	var buf [requestLen]byte
	if _, err := io.ReadFull(req, buf[:]); err != nil {
		return fmt.Errorf("reading request: %w", err)
	}
	durationMs, err := decodeRequest(buf[:])
	if err != nil {
		return fmt.Errorf("request: %w", err)
	}
	if durationMs > maxDurationMs {
		return fmt.Errorf("%s asked for %d ms (at most %d)", peer, durationMs, maxDurationMs)
	}
	frames := params.frameCount(durationMs)
	logger.Info("request", "peer", peer, "duration_ms", durationMs, "frames", frames)
	payload := make([]byte, params.frameBytes())
	for i := range payload {
		payload[i] = byte(i)
	}

	// The timer loop creates frames on schedule; the writer opens their streams in order and
	// writes each from its own goroutine (a quic-go Write returns once the data is sent), so a
	// stream limit or a full send window delays frames without shifting the schedule.
	queue := make(chan []byte, maxBacklog)
	writerErr := make(chan error, 1)
	go func() { writerErr <- writeFrames(ctx, conn, queue) }()
	start := time.Now()
	for i := uint32(0); i < frames; i++ {
		time.Sleep(time.Until(start.Add(params.due(i))))
		frame := encodeFrame(i, uint64(time.Now().UnixNano()), payload)
		select {
		case queue <- frame:
		case <-ctx.Done():
			close(queue)
			<-writerErr
			return fmt.Errorf("connection ended after %d of %d frames: %w", i, frames, context.Cause(ctx))
		default:
			close(queue)
			if err := <-writerErr; err != nil {
				return err
			}
			return fmt.Errorf("%s: more than %d frames waiting for the transport", peer, maxBacklog)
		}
	}
	close(queue)
	if err := <-writerErr; err != nil {
		return err
	}
	if _, err := req.Write(encodeEndOfFrames(frames)); err != nil {
		return fmt.Errorf("sending end marker: %w", err)
	}
	if err := req.Close(); err != nil {
		return fmt.Errorf("finishing request stream: %w", err)
	}
	// The client closes once it has every frame.
	select {
	case <-ctx.Done():
		logger.Info("connection closed", "peer", peer, "frames", frames, "reason", context.Cause(ctx))
	case <-time.After(closeWaitWindow):
		return errors.New("client did not close the connection")
	}
	return nil
}

// writeFrames hands every queued frame to quic-go on its own unidirectional stream, oldest
// first: non-incremental streams of one urgency are sent in stream-id order and quic-go sends
// retransmissions before new data, as a media sender wants it.
func writeFrames(ctx context.Context, conn *quic.Conn, queue <-chan []byte) error {
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	fail := func(err error) { once.Do(func() { firstErr = err }) }
	for frame := range queue {
		s, err := conn.OpenUniStreamSync(ctx)
		if err != nil {
			fail(fmt.Errorf("opening frame stream: %w", err))
			break
		}
		s.SetPriority(3, false)
		wg.Add(1)
		go func(s *quic.SendStream, frame []byte) {
			defer wg.Done()
			if _, err := s.Write(frame); err != nil {
				fail(fmt.Errorf("sending frame: %w", err))
				return
			}
			if err := s.Close(); err != nil {
				fail(fmt.Errorf("finishing frame stream: %w", err))
			}
		}(s, frame)
	}
	// Drain what is left after a failure so the producer never blocks.
	for range queue {
	}
	wg.Wait()
	return firstErr
}

// selfSignedTLS is a fresh self-signed certificate (the sidekick-rtc client accepts any).
func selfSignedTLS() (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, &tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		NextProtos:   []string{alpn},
	}, nil
}
