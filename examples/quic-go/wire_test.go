package main

import (
	"bytes"
	"encoding/hex"
	"testing"
	"time"
)

// The byte strings below are what examples/src/rtc.rs encodes for the same values (its
// `wire_vectors_match_the_go_server` test holds the same strings).
const (
	vecRequest = "534b52310000 4e20"
	vecFrame   = "534b4631 00000007 00000000000003e8 00000003 010203"
	vecEnd     = "534b4531 00000258"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(string(bytes.ReplaceAll([]byte(s), []byte(" "), nil)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWireVectors(t *testing.T) {
	if got, want := encodeRequest(20_000), unhex(t, vecRequest); !bytes.Equal(got, want) {
		t.Fatalf("request %x, want %x", got, want)
	}
	if got, want := encodeFrame(7, 1000, []byte{1, 2, 3}), unhex(t, vecFrame); !bytes.Equal(got, want) {
		t.Fatalf("frame %x, want %x", got, want)
	}
	if got, want := encodeEndOfFrames(600), unhex(t, vecEnd); !bytes.Equal(got, want) {
		t.Fatalf("end %x, want %x", got, want)
	}
	d, err := decodeRequest(unhex(t, vecRequest))
	if err != nil || d != 20_000 {
		t.Fatalf("decoded %d, %v", d, err)
	}
}

func TestDecodeRequestRejects(t *testing.T) {
	if _, err := decodeRequest([]byte("SKR1\x00")); err == nil {
		t.Fatal("truncated request accepted")
	}
	if _, err := decodeRequest([]byte("SKX1\x00\x00\x00\x01")); err != errBadMagic {
		t.Fatalf("bad magic: %v", err)
	}
}

func TestFrameParamsMatchRust(t *testing.T) {
	p := frameParams{fps: 30, kbps: 3000}
	if p.frameBytes() != 12_500 || p.frameCount(2000) != 60 || p.due(30) != time.Second {
		t.Fatalf("%d %d %v", p.frameBytes(), p.frameCount(2000), p.due(30))
	}
	// Rounding: 7 fps at 1 kbit/s is 17.86 bytes -> 18; 1.5 s at 7 fps is 10.5 -> 11 frames.
	q := frameParams{fps: 7, kbps: 1}
	if q.frameBytes() != 18 || q.frameCount(1500) != 11 {
		t.Fatalf("%d %d", q.frameBytes(), q.frameCount(1500))
	}
}

// FuzzDecodeRequest: any input decodes without panicking, and a decoded request re-encodes to
// the input's first 8 bytes.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte("SKR1\x00\x00\x4e\x20"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := decodeRequest(b)
		if err == nil && !bytes.Equal(encodeRequest(d), b[:requestLen]) {
			t.Fatalf("%x re-encodes to %x", b[:requestLen], encodeRequest(d))
		}
	})
}
