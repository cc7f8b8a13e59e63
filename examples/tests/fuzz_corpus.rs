//! The committed fuzz seeds of the applications' wire formats (`fuzz/corpus/{media_wire,
//! rtc_frames, transfer_frames}/`), made by their encoders. Every seed runs through its fuzz
//! body here; `SIDEKICK_WRITE_FUZZ_SEEDS=1 cargo test -p sidekick-examples --test fuzz_corpus`
//! rewrites them.
#![allow(clippy::unwrap_used)]

use sidekick_examples::rtc::{EndOfFrames, FrameHeader, RtcRequest, encode_frame};
use sidekick_examples::transfer::{Request, Summary, TransferDirection};
use sidekick_examples::wire::{
    Codec, MediaPacket, encode_fin, encode_hello, encode_nacks, encode_summary,
};

/// The committed seeds of `target` (`fuzz/corpus/TARGET/`).
fn corpus(target: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

/// With `SIDEKICK_WRITE_FUZZ_SEEDS=1`, (re)writes the seeds of `target`; then runs every seed
/// of `target` through its fuzz body (a seed that once crashed stays a regression test).
fn seeds(target: &str, make: impl FnOnce() -> Vec<(&'static str, Vec<u8>)>, body: fn(&[u8])) {
    let dir = corpus(target);
    if std::env::var_os("SIDEKICK_WRITE_FUZZ_SEEDS").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in make() {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let bytes = std::fs::read(e.unwrap().path()).unwrap();
        body(&bytes);
        n += 1;
    }
    assert!(n > 0, "no seeds in {}", dir.display());
}

fn media_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut codec = Codec::new(0);
    let data = codec.seal(&MediaPacket {
        seq: 42,
        gen_unix_us: 1_700_000_000_000_000,
        echo_us: 5,
        payload: vec![9; 64],
    });
    vec![
        ("data", data),
        (
            "nack",
            encode_nacks(1_700_000_000_000_000, &[3, 4, 9]).remove(0),
        ),
        ("hello", encode_hello(10_000)),
        ("fin", encode_fin(500)),
        ("summary", encode_summary("{\"received\":498,\"lost\":2}")),
    ]
}

fn rtc_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let header = FrameHeader {
        index: 3,
        created_unix_ns: 1_700_000_000_000_000_000,
        payload_len: 16,
    };
    let mut stream = RtcRequest { duration_ms: 2000 }.encode().to_vec();
    stream.extend(encode_frame(0, 1_700_000_000_000_000_000, &[7; 16]));
    stream.extend(EndOfFrames { frames_sent: 1 }.encode());
    vec![
        (
            "request",
            RtcRequest { duration_ms: 2000 }.encode().to_vec(),
        ),
        ("header", header.encode().to_vec()),
        ("end", EndOfFrames { frames_sent: 60 }.encode().to_vec()),
        // The body splits at the first byte's value ('S' = 83): a frame stream in two pieces.
        ("stream", stream),
    ]
}

fn transfer_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let summary = Summary {
        bytes: 3_000_000,
        first_byte_unix_ns: 1_700_000_000_000_000_000,
        last_byte_unix_ns: 1_700_000_001_000_000_000,
        sent_packets: 2500,
        lost_packets: 40,
        retransmissions: 41,
    };
    vec![
        (
            "download",
            Request {
                direction: TransferDirection::Download,
                bytes: 3_000_000,
            }
            .encode()
            .to_vec(),
        ),
        (
            "upload",
            Request {
                direction: TransferDirection::Upload,
                bytes: 1 << 20,
            }
            .encode()
            .to_vec(),
        ),
        ("summary", summary.encode().to_vec()),
    ]
}

#[test]
fn fuzz_seeds() {
    seeds(
        "media_wire",
        media_seeds,
        sidekick_examples::wire::fuzz_parse,
    );
    seeds("rtc_frames", rtc_seeds, sidekick_examples::rtc::fuzz_parse);
    seeds(
        "transfer_frames",
        transfer_seeds,
        sidekick_examples::transfer::fuzz_parse,
    );
}
