package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/quic-go/quic-go"
)

// serveRaw serves one raw-stream transfer on conn (the protocol of examples/src/transfer/mod.rs)
// and waits for the client to close.
func serveRaw(conn *quic.Conn, logger *slog.Logger) error {
	ctx := conn.Context()
	peer := conn.RemoteAddr().String()
	str, err := conn.AcceptStream(ctx)
	if err != nil {
		return fmt.Errorf("accepting stream: %w", err)
	}
	if err := answerRequest(str, peer, logger, nil, func() summary { return connSummary(conn) }); err != nil {
		return err
	}
	if err := str.Close(); err != nil {
		return fmt.Errorf("finishing stream: %w", err)
	}
	select {
	case <-ctx.Done():
		logger.Info("connection closed", "peer", peer, "reason", context.Cause(ctx))
		return nil
	case <-time.After(closeWait):
		return errors.New("client did not close the connection")
	}
}

// answerRequest is the server's side of one raw-stream transfer on str, on either Go stack: the
// request, the payload sent (download) or counted (upload), and the summary, whose transport
// counters come from counters() once the data has gone. flush, when not nil, sends what str
// holds back (golang.org/x/net/quic sends small writes only when flushed; quic-go at once).
func answerRequest(str io.ReadWriter, peer string, logger *slog.Logger, flush func() error, counters func() summary) error {
	var hdr [requestLen]byte
	if _, err := io.ReadFull(str, hdr[:]); err != nil {
		return fmt.Errorf("reading request: %w", err)
	}
	req, err := decodeRequest(hdr[:])
	if err != nil {
		return fmt.Errorf("request: %w", err)
	}
	logger.Info("request", "peer", peer, "direction", req.dir.String(), "bytes", req.bytes)
	var sum summary
	switch req.dir {
	case download:
		if err := writePattern(str, req.bytes); err != nil {
			return fmt.Errorf("sending payload: %w", err)
		}
		if flush != nil {
			if err := flush(); err != nil {
				return fmt.Errorf("sending payload: %w", err)
			}
		}
		// The client finishes its side once it holds every byte.
		if _, err := io.Copy(io.Discard, str); err != nil {
			return fmt.Errorf("awaiting client FIN: %w", err)
		}
		sum = counters()
		sum.bytes = req.bytes
	case upload:
		got, first, last, err := readCounting(str, req.bytes)
		if err != nil {
			return fmt.Errorf("receiving payload: %w", err)
		}
		if got != req.bytes {
			return fmt.Errorf("upload from %s: got %d of %d bytes", peer, got, req.bytes)
		}
		sum = counters()
		sum.bytes, sum.firstByteUnixNs, sum.lastByteUnixNs = got, first, last
	}
	if _, err := str.Write(sum.encode()); err != nil {
		return fmt.Errorf("sending summary: %w", err)
	}
	return nil
}

// writePattern writes n bytes of the payload pattern to w.
func writePattern(w io.Writer, n uint64) error {
	buf := patternChunk()
	for n > 0 {
		k := min(n, uint64(len(buf)))
		if _, err := w.Write(buf[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// readCounting reads r to its end and returns the bytes read and the wall-clock times of the
// first byte and of the byte that completed want.
func readCounting(r io.Reader, want uint64) (got, first, last uint64, err error) {
	buf := make([]byte, chunk)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if got == 0 {
				first = unixNs(time.Now())
			}
			got += uint64(n)
			if got >= want && last == 0 {
				last = unixNs(time.Now())
			}
		}
		if errors.Is(err, io.EOF) {
			return got, first, last, nil
		}
		if err != nil {
			return got, first, last, err
		}
	}
}

// rawTransfer runs one transfer on a client connection: the goodput interval and the data
// sender's statistics.
func rawTransfer(ctx context.Context, conn *quic.Conn, req request) (time.Duration, senderStats, error) {
	str, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return 0, senderStats{}, fmt.Errorf("opening stream: %w", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = str.SetDeadline(dl)
	}
	d, sum, firstByte, err := rawExchange(str, req, nil, str.Close)
	if err != nil {
		return 0, senderStats{}, err
	}
	if req.dir == download {
		return d, senderStats{
			sentPackets:         sum.sentPackets,
			lostPackets:         sum.lostPackets,
			retransmissions:     sum.retransmissions,
			receiverSentPackets: conn.ConnectionStats().PacketsSent,
			firstByte:           firstByte,
		}, nil
	}
	own := connSummary(conn)
	return d, senderStats{
		sentPackets:         own.sentPackets,
		lostPackets:         own.lostPackets,
		retransmissions:     own.retransmissions,
		receiverSentPackets: sum.sentPackets,
	}, nil
}

// rawExchange is the client's side of one raw-stream transfer on str, on either Go stack: the
// goodput interval (download: request to last byte; upload: uploadDuration), the server's
// summary, and when a download's first payload byte arrived. flush, when not nil, sends what
// str holds back (as for answerRequest); finish sends the client's FIN.
func rawExchange(str io.ReadWriter, req request, flush, finish func() error) (time.Duration, summary, time.Time, error) {
	start := time.Now()
	startWall := unixNs(start)
	if _, err := str.Write(req.encode()); err != nil {
		return 0, summary{}, time.Time{}, fmt.Errorf("sending request: %w", err)
	}
	switch req.dir {
	case download:
		if flush != nil {
			if err := flush(); err != nil {
				return 0, summary{}, time.Time{}, fmt.Errorf("sending request: %w", err)
			}
		}
		// The first byte alone first: its arrival is the time to first byte.
		var firstByte time.Time
		var got int64
		if req.bytes > 0 {
			var first [1]byte
			if _, err := io.ReadFull(str, first[:]); err != nil {
				return 0, summary{}, time.Time{}, fmt.Errorf("server sent no payload: %w", err)
			}
			firstByte, got = time.Now(), 1
		}
		n, err := io.CopyN(io.Discard, str, int64(req.bytes)-got)
		if err != nil {
			return 0, summary{}, time.Time{}, fmt.Errorf("server finished after %d of %d bytes: %w", got+n, req.bytes, err)
		}
		d := time.Since(start)
		if err := finish(); err != nil {
			return 0, summary{}, time.Time{}, fmt.Errorf("finishing stream: %w", err)
		}
		sum, err := readSummary(str)
		if err != nil {
			return 0, summary{}, time.Time{}, err
		}
		return d, sum, firstByte, nil
	default:
		if err := writePattern(str, req.bytes); err != nil {
			return 0, summary{}, time.Time{}, fmt.Errorf("sending payload: %w", err)
		}
		if err := finish(); err != nil {
			return 0, summary{}, time.Time{}, fmt.Errorf("finishing stream: %w", err)
		}
		sum, err := readSummary(str)
		if err != nil {
			return 0, summary{}, time.Time{}, err
		}
		elapsed := time.Since(start)
		if sum.bytes != req.bytes {
			return 0, summary{}, time.Time{}, fmt.Errorf("server received %d of %d bytes", sum.bytes, req.bytes)
		}
		return uploadDuration(startWall, sum, elapsed), sum, time.Time{}, nil
	}
}

func readSummary(r io.Reader) (summary, error) {
	var buf [summaryLen]byte
	if _, err := io.ReadFull(r, buf[:]); err != nil {
		return summary{}, fmt.Errorf("reading summary: %w", err)
	}
	return decodeSummary(buf[:])
}
