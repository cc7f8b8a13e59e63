package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	xquic "golang.org/x/net/quic"
)

// What examples/src/transfer/mod.rs encodes for the same values: Request { Upload, 10_000_000 }
// and Summary { 1, 2, 3, 4, 5, 6 }.
const (
	vecRequest = "534b5431 55 0000000000989680"
	vecSummary = "534b5331 0000000000000001 0000000000000002 0000000000000003 0000000000000004 0000000000000005 0000000000000006"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWireVectors(t *testing.T) {
	r := request{dir: upload, bytes: 10_000_000}
	if got, want := r.encode(), unhex(t, vecRequest); !bytes.Equal(got, want) {
		t.Fatalf("request %x, want %x", got, want)
	}
	if got, err := decodeRequest(unhex(t, vecRequest)); err != nil || got != r {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	s := summary{1, 2, 3, 4, 5, 6}
	if got, want := s.encode(), unhex(t, vecSummary); !bytes.Equal(got, want) {
		t.Fatalf("summary %x, want %x", got, want)
	}
	if got, err := decodeSummary(unhex(t, vecSummary)); err != nil || got != s {
		t.Fatalf("decoded %+v, %v", got, err)
	}
}

func TestDecodeRejects(t *testing.T) {
	if _, err := decodeRequest([]byte("SKT1D")); err == nil {
		t.Fatal("truncated request accepted")
	}
	if _, err := decodeRequest([]byte("SKT1X00000000")); err == nil || !strings.Contains(err.Error(), "direction") {
		t.Fatalf("bad direction: %v", err)
	}
	if _, err := decodeRequest([]byte("XKT1D00000000")); err != errBadMagic {
		t.Fatalf("bad magic: %v", err)
	}
	bad := summary{}.encode()
	bad[0] = 'X'
	if _, err := decodeSummary(bad); err != errBadMagic {
		t.Fatalf("bad summary magic: %v", err)
	}
	if _, err := decodeSummary(bad[:10]); err == nil {
		t.Fatal("truncated summary accepted")
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte("SKT1D\x00\x00\x00\x00\x00\x00\x00\x01"))
	f.Add(summary{1, 2, 3, 4, 5, 6}.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := decodeRequest(b); err == nil && !bytes.Equal(r.encode(), b[:requestLen]) {
			t.Fatalf("request %x re-encodes to %x", b[:requestLen], r.encode())
		}
		if s, err := decodeSummary(b); err == nil && !bytes.Equal(s.encode(), b[:summaryLen]) {
			t.Fatalf("summary %x re-encodes to %x", b[:summaryLen], s.encode())
		}
	})
}

func TestUploadDuration(t *testing.T) {
	s := summary{lastByteUnixNs: 1_500_000_000}
	if d := uploadDuration(1_000_000_000, s, time.Second); d != 500*time.Millisecond {
		t.Fatalf("consistent clocks: %v", d)
	}
	if d := uploadDuration(2_000_000_000, s, time.Second); d != time.Second {
		t.Fatalf("server clock behind: %v", d)
	}
	if d := uploadDuration(0, s, time.Second); d != time.Second {
		t.Fatalf("server clock ahead: %v", d)
	}
}

func TestPatternReaderMatchesChunks(t *testing.T) {
	const n = 3*chunk + 17
	got, err := io.ReadAll(&patternReader{left: n, buf: patternChunk()})
	if err != nil || len(got) != n {
		t.Fatalf("%d bytes, %v", len(got), err)
	}
	var want bytes.Buffer
	if err := writePattern(&want, n); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatal("patternReader and writePattern differ")
	}
}

// TestLoopbackTransfers runs the quic-go client against the quic-go server over real UDP
// sockets on loopback, raw and HTTP/3, both directions, and checks the report.
func TestLoopbackTransfers(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, h3 := range []bool{false, true} {
		alpn := alpnRaw
		if h3 {
			alpn = alpnH3
		}
		tlsConf, err := selfSignedTLS(alpn, 0)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := quic.ListenAddr("127.0.0.1:0", tlsConf, quicConfig())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		done := make(chan error, 1)
		go func() { done <- serve(ctx, ln, false, h3, logger) }()
		for _, req := range []request{{download, 2_000_003}, {upload, 1_500_001}} {
			rep, err := runClient(ctx, ln.Addr().String(), req, h3)
			if err != nil {
				t.Fatalf("http3=%v %v: %v", h3, req.dir, err)
			}
			if rep.Bytes != req.bytes || rep.Direction != req.dir.String() || rep.Stack != "quic-go" {
				t.Fatalf("report %+v for %+v", rep, req)
			}
			// The data sender sent at least one packet per 1500 bytes of payload.
			if rep.GoodputMbps <= 0 || rep.SentPackets == nil || *rep.SentPackets < req.bytes/1500 || rep.ReceiverSentPackets == 0 {
				t.Fatalf("implausible report %+v", rep)
			}
			// A raw-stream download reports its time to first byte (within the transfer's
			// whole time from the dial); nothing else does.
			wantTtfb := !h3 && req.dir == download
			if (rep.TtfbMs != nil) != wantTtfb || (wantTtfb && (*rep.TtfbMs <= 0 || *rep.TtfbMs > 30_000)) {
				t.Fatalf("http3=%v %v: ttfb %v", h3, req.dir, rep.TtfbMs)
			}
			line, err := json.Marshal(rep)
			if err != nil {
				t.Fatal(err)
			}
			for _, key := range []string{"stack", "direction", "bytes", "duration_s", "goodput_mbps", "retransmissions", "lost_packets", "sent_packets", "receiver_sent_packets"} {
				if !bytes.Contains(line, []byte(`"`+key+`":`)) {
					t.Fatalf("report %s lacks %q", line, key)
				}
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("server: %v", err)
		}
		ln.Close()
	}
}

// TestXNetLoopbackTransfers runs golang.org/x/net/quic (--stack x-net-quic) over real UDP
// sockets on loopback, both directions: its client against its server and against the quic-go
// server, and the quic-go client against its server. Its reports leave the counters it does not
// have out.
func TestXNetLoopbackTransfers(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	tlsConf, err := selfSignedTLS(alpnRaw, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ep, err := xquic.Listen("udp", "127.0.0.1:0", xnetConfig(tlsConf))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ep.Close(context.Background()) }()
	go func() { _ = xnetServeEndpoint(ctx, ep, false, logger) }()
	ln, err := quic.ListenAddr("127.0.0.1:0", tlsConf, quicConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { _ = serve(ctx, ln, false, false, logger) }()
	xnetAddr, quicgoAddr := ep.LocalAddr().String(), ln.Addr().String()
	for _, req := range []request{{download, 2_000_003}, {upload, 1_500_001}} {
		for _, addr := range []string{xnetAddr, quicgoAddr} {
			rep, err := xnetTransfer(ctx, addr, req)
			if err != nil {
				t.Fatalf("x-net-quic client to %s, %v: %v", addr, req.dir, err)
			}
			if rep.Stack != xnetStack || rep.Bytes != req.bytes || rep.GoodputMbps <= 0 {
				t.Fatalf("report %+v for %+v", rep, req)
			}
			if rep.SentPackets != nil || rep.LostPackets != nil {
				t.Fatalf("counters x/net/quic does not have: %+v", rep)
			}
			if (rep.TtfbMs != nil) != (req.dir == download) {
				t.Fatalf("%v: ttfb %v", req.dir, rep.TtfbMs)
			}
		}
		rep, err := runClient(ctx, xnetAddr, req, false)
		if err != nil {
			t.Fatalf("quic-go client to the x-net-quic server, %v: %v", req.dir, err)
		}
		if rep.Bytes != req.bytes || rep.Stack != stackName {
			t.Fatalf("report %+v for %+v", rep, req)
		}
	}
}

// TestPaddedCertificate checks the padded certificate's size (ReACKed QUICer's 1212 B and 5113 B
// certificates) and that it still parses.
func TestPaddedCertificate(t *testing.T) {
	for _, want := range []int{1212, 5113} {
		conf, err := selfSignedTLS(alpnRaw, want)
		if err != nil {
			t.Fatal(err)
		}
		der := conf.Certificates[0].Certificate[0]
		if len(der) < want || len(der) > want+4 {
			t.Fatalf("asked %d bytes, got %d", want, len(der))
		}
		if _, err := x509.ParseCertificate(der); err != nil {
			t.Fatalf("%d bytes: %v", want, err)
		}
	}
}
