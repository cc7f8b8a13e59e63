package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// The wire format of sidekick-transfer (examples/src/transfer/mod.rs; integers big-endian).
const (
	requestLen = 13 // "SKT1", direction 'D'|'U', bytes u64
	summaryLen = 52 // "SKS1", six u64 fields
	chunk      = 64 * 1024
)

var (
	requestMagic = [4]byte{'S', 'K', 'T', '1'}
	summaryMagic = [4]byte{'S', 'K', 'S', '1'}

	errBadMagic = errors.New("bad magic")
)

// direction of the payload.
type direction byte

const (
	download direction = 'D'
	upload   direction = 'U'
)

func (d direction) String() string {
	if d == upload {
		return "upload"
	}
	return "download"
}

// request is the client's first bytes on the stream.
type request struct {
	dir   direction
	bytes uint64
}

func (r request) encode() []byte {
	out := append([]byte{}, requestMagic[:]...)
	out = append(out, byte(r.dir))
	return binary.BigEndian.AppendUint64(out, r.bytes)
}

func decodeRequest(b []byte) (request, error) {
	if len(b) < requestLen {
		return request{}, fmt.Errorf("truncated: need %d bytes, have %d", requestLen, len(b))
	}
	if [4]byte(b[:4]) != requestMagic {
		return request{}, errBadMagic
	}
	d := direction(b[4])
	if d != download && d != upload {
		return request{}, fmt.Errorf("unknown direction byte %#x", b[4])
	}
	return request{dir: d, bytes: binary.BigEndian.Uint64(b[5:13])}, nil
}

// summary is the server's last bytes on the stream (or the body of an HTTP/3 upload or /stats).
type summary struct {
	bytes           uint64
	firstByteUnixNs uint64
	lastByteUnixNs  uint64
	sentPackets     uint64
	lostPackets     uint64
	retransmissions uint64
}

func (s summary) encode() []byte {
	out := append([]byte{}, summaryMagic[:]...)
	for _, f := range []uint64{s.bytes, s.firstByteUnixNs, s.lastByteUnixNs, s.sentPackets, s.lostPackets, s.retransmissions} {
		out = binary.BigEndian.AppendUint64(out, f)
	}
	return out
}

func decodeSummary(b []byte) (summary, error) {
	if len(b) < summaryLen {
		return summary{}, fmt.Errorf("truncated summary: need %d bytes, have %d", summaryLen, len(b))
	}
	if [4]byte(b[:4]) != summaryMagic {
		return summary{}, errBadMagic
	}
	f := func(i int) uint64 { return binary.BigEndian.Uint64(b[4+8*i : 12+8*i]) }
	return summary{f(0), f(1), f(2), f(3), f(4), f(5)}, nil
}

// senderStats are the data sender's transport statistics in the report.
type senderStats struct {
	sentPackets, lostPackets, retransmissions, receiverSentPackets uint64
	// senderUnknown: the server reported no counters (an HTTP/3 server without /stats, such
	// as ngtcp2's); the first three fields are left out of the report.
	senderUnknown bool
	// firstByte: when the first payload byte of a raw-stream download reached the client
	// (zero otherwise), for the report's time to first byte.
	firstByte time.Time
}

// report is the client's one JSON line, with the keys of sidekick-transfer's TransferReport.
type report struct {
	Stack               string  `json:"stack"`
	Direction           string  `json:"direction"`
	Bytes               uint64  `json:"bytes"`
	DurationS           float64 `json:"duration_s"`
	GoodputMbps         float64 `json:"goodput_mbps"`
	Retransmissions     *uint64 `json:"retransmissions,omitempty"`
	LostPackets         *uint64 `json:"lost_packets,omitempty"`
	SentPackets         *uint64 `json:"sent_packets,omitempty"`
	ReceiverSentPackets uint64  `json:"receiver_sent_packets"`
	// TtfbMs: from before the client's first Initial to the first payload byte of a raw-stream
	// download (ReACKed QUICer (IMC '24) §3), as sidekick-transfer's ttfb_ms.
	TtfbMs *float64 `json:"ttfb_ms,omitempty"`
}

// newReport is the report of a transfer of d whose connection started at dialed.
func newReport(dir direction, bytes uint64, dialed time.Time, d time.Duration, s senderStats) report {
	secs := d.Seconds()
	goodput := 0.0
	if secs > 0 {
		goodput = float64(bytes) * 8 / secs / 1e6
	}
	r := report{
		Stack:               stackName,
		Direction:           dir.String(),
		Bytes:               bytes,
		DurationS:           secs,
		GoodputMbps:         goodput,
		ReceiverSentPackets: s.receiverSentPackets,
	}
	if !s.senderUnknown {
		r.Retransmissions, r.LostPackets, r.SentPackets = &s.retransmissions, &s.lostPackets, &s.sentPackets
	}
	if !s.firstByte.IsZero() {
		ttfb := float64(s.firstByte.Sub(dialed)) / float64(time.Millisecond)
		r.TtfbMs = &ttfb
	}
	return r
}

// uploadDuration is the request-to-last-byte time by the server's clock when it lies within
// the client's elapsed time (same host or synchronised clocks), else the client's elapsed time
// (as upload_duration in examples/src/transfer/mod.rs).
func uploadDuration(startUnixNs uint64, s summary, elapsed time.Duration) time.Duration {
	if s.lastByteUnixNs >= startUnixNs {
		d := time.Duration(s.lastByteUnixNs - startUnixNs)
		if d > 0 && d <= elapsed {
			return d
		}
	}
	return elapsed
}

// unixNs is the wall clock in ns since the Unix epoch (0 before it).
func unixNs(t time.Time) uint64 {
	n := t.UnixNano()
	if n < 0 {
		return 0
	}
	return uint64(n)
}

// patternChunk is the payload pattern of fill_pattern in examples/src/transfer/mod.rs.
func patternChunk() []byte {
	b := make([]byte, chunk)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}
