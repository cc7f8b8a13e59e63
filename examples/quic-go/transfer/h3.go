package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// h3NoError is HTTP/3's H3_NO_ERROR, the code a client closes with when done.
const h3NoError = 0x100

type connKey struct{}

// maxSummaryBody caps what a client reads of a summary body.
const maxSummaryBody = 4096

// newH3Server is the HTTP/3 server of the transfer: GET /download/N, POST /upload/N (answered
// with the summary), GET /stats (the summary of the connection's counters).
func newH3Server(logger *slog.Logger) *http3.Server {
	return &http3.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handleH3(w, r, logger) }),
		ConnContext: func(ctx context.Context, c *quic.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
		Logger: logger,
	}
}

func pathNumber(path, prefix string) (uint64, bool) {
	rest, ok := strings.CutPrefix(path, prefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(rest, 10, 64)
	return n, err == nil
}

func handleH3(w http.ResponseWriter, r *http.Request, logger *slog.Logger) {
	conn, _ := r.Context().Value(connKey{}).(*quic.Conn)
	stats := func() summary {
		if conn == nil {
			return summary{}
		}
		return connSummary(conn)
	}
	logger.Info("request", "method", r.Method, "path", r.URL.Path)
	if n, ok := pathNumber(r.URL.Path, "/download/"); ok && r.Method == http.MethodGet {
		w.Header().Set("content-length", strconv.FormatUint(n, 10))
		w.WriteHeader(http.StatusOK)
		if err := writePattern(w, n); err != nil {
			logger.Warn("download failed", "err", err)
		}
		return
	}
	if n, ok := pathNumber(r.URL.Path, "/upload/"); ok && r.Method == http.MethodPost {
		got, first, last, err := readCounting(r.Body, n)
		if err != nil {
			logger.Warn("upload failed", "err", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		s := stats()
		s.bytes, s.firstByteUnixNs, s.lastByteUnixNs = got, first, last
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(s.encode())
		return
	}
	if r.URL.Path == "/stats" && r.Method == http.MethodGet {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(stats().encode())
		return
	}
	w.WriteHeader(http.StatusNotFound)
}

// patternReader yields n bytes of the payload pattern.
type patternReader struct {
	left uint64
	buf  []byte
	off  int
}

func (p *patternReader) Read(b []byte) (int, error) {
	if p.left == 0 {
		return 0, io.EOF
	}
	k := copy(b, p.buf[p.off:])
	k = int(min(uint64(k), p.left))
	p.off = (p.off + k) % len(p.buf)
	p.left -= uint64(k)
	return k, nil
}

// h3Transfer runs one HTTP/3 transfer on a client connection: the goodput interval and the
// data sender's statistics.
func h3Transfer(ctx context.Context, conn *quic.Conn, req request) (time.Duration, senderStats, error) {
	cc := (&http3.Transport{}).NewClientConn(conn)
	defer func() { _ = conn.CloseWithError(h3NoError, "done") }()
	start := time.Now()
	startWall := unixNs(start)
	if req.dir == download {
		r, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://localhost/download/%d", req.bytes), nil)
		if err != nil {
			return 0, senderStats{}, err
		}
		resp, err := cc.RoundTrip(r)
		if err != nil {
			return 0, senderStats{}, fmt.Errorf("download request: %w", err)
		}
		got, err := io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		d := time.Since(start)
		if resp.StatusCode != http.StatusOK {
			return 0, senderStats{}, fmt.Errorf("server answered %d", resp.StatusCode)
		}
		if err != nil || uint64(got) != req.bytes {
			return 0, senderStats{}, fmt.Errorf("download ended after %d of %d bytes: %v", got, req.bytes, err)
		}
		// A server of another stack (ngtcp2's) has no /stats: its counters stay unknown.
		sum, err := h3Summary(ctx, cc, http.MethodGet, "https://localhost/stats", nil)
		return d, senderStats{
			sentPackets:         sum.sentPackets,
			lostPackets:         sum.lostPackets,
			retransmissions:     sum.retransmissions,
			receiverSentPackets: conn.ConnectionStats().PacketsSent,
			senderUnknown:       err != nil,
		}, nil
	}
	body := &patternReader{left: req.bytes, buf: patternChunk()}
	sum, err := h3Summary(ctx, cc, http.MethodPost, fmt.Sprintf("https://localhost/upload/%d", req.bytes), body)
	if err != nil {
		return 0, senderStats{}, err
	}
	elapsed := time.Since(start)
	if sum.bytes != req.bytes {
		return 0, senderStats{}, fmt.Errorf("server received %d of %d bytes", sum.bytes, req.bytes)
	}
	own := connSummary(conn)
	return uploadDuration(startWall, sum, elapsed), senderStats{
		sentPackets:         own.sentPackets,
		lostPackets:         own.lostPackets,
		retransmissions:     own.retransmissions,
		receiverSentPackets: sum.sentPackets,
	}, nil
}

// h3Summary sends a request whose answer is a summary (POST /upload/N, GET /stats).
func h3Summary(ctx context.Context, cc *http3.ClientConn, method, url string, body *patternReader) (summary, error) {
	var rd io.Reader
	if body != nil {
		rd = body
	}
	r, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return summary{}, err
	}
	if body != nil {
		r.ContentLength = int64(body.left)
	}
	resp, err := cc.RoundTrip(r)
	if err != nil {
		return summary{}, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return summary{}, fmt.Errorf("%s %s: server answered %d", method, url, resp.StatusCode)
	}
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, io.LimitReader(resp.Body, maxSummaryBody)); err != nil {
		return summary{}, fmt.Errorf("%s %s: reading summary: %w", method, url, err)
	}
	return decodeSummary(buf.Bytes())
}
