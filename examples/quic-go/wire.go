package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// The wire format of examples/src/rtc.rs (all integers big-endian).
const (
	requestLen = 8  // "SKR1", duration ms u32
	headerLen  = 20 // "SKF1", index u32, created ns u64, payload length u32
	endLen     = 8  // "SKE1", frames sent u32
)

var (
	requestMagic = [4]byte{'S', 'K', 'R', '1'}
	headerMagic  = [4]byte{'S', 'K', 'F', '1'}
	endMagic     = [4]byte{'S', 'K', 'E', '1'}

	errBadMagic = errors.New("bad magic")
)

// decodeRequest reads the client's request: the duration in ms.
func decodeRequest(b []byte) (uint32, error) {
	if len(b) < requestLen {
		return 0, fmt.Errorf("truncated: need %d bytes, have %d", requestLen, len(b))
	}
	if [4]byte(b[:4]) != requestMagic {
		return 0, errBadMagic
	}
	return binary.BigEndian.Uint32(b[4:8]), nil
}

func encodeRequest(durationMs uint32) []byte {
	out := append([]byte{}, requestMagic[:]...)
	return binary.BigEndian.AppendUint32(out, durationMs)
}

// encodeFrame is a frame stream's whole content: header, then the payload.
func encodeFrame(index uint32, createdUnixNs uint64, payload []byte) []byte {
	out := make([]byte, 0, headerLen+len(payload))
	out = append(out, headerMagic[:]...)
	out = binary.BigEndian.AppendUint32(out, index)
	out = binary.BigEndian.AppendUint64(out, createdUnixNs)
	out = binary.BigEndian.AppendUint32(out, uint32(len(payload)))
	return append(out, payload...)
}

func encodeEndOfFrames(framesSent uint32) []byte {
	out := append([]byte{}, endMagic[:]...)
	return binary.BigEndian.AppendUint32(out, framesSent)
}

// frameParams are a server's frame rate and bit rate (FrameParams in rtc.rs).
type frameParams struct {
	fps  uint32
	kbps uint32
}

// frameBytes is kbps·1000/8/fps, rounded to the nearest byte.
func (p frameParams) frameBytes() int {
	fps := uint64(max(p.fps, 1))
	return int((uint64(p.kbps)*1000 + 4*fps) / (8 * fps))
}

// frameCount is duration·fps, rounded to the nearest frame.
func (p frameParams) frameCount(durationMs uint32) uint32 {
	return uint32((uint64(durationMs)*uint64(p.fps) + 500) / 1000)
}

// due is frame index's creation time after the start: index/fps, from the index (no drift).
func (p frameParams) due(index uint32) time.Duration {
	return time.Duration(uint64(index) * 1_000_000_000 / uint64(max(p.fps, 1)))
}
