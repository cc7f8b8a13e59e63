//! The committed C header must be what cbindgen generates from the current sources, so it can
//! never go stale. Regenerate it with
//! `SIDEKICK_BLESS_HEADER=1 cargo test -p sidekick-capi --test header`.

// Test code: a failed expectation is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

fn generate() -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen parses the sources");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("the header is UTF-8")
}

#[test]
fn committed_header_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/sidekick.h");
    let fresh = generate();
    if std::env::var_os("SIDEKICK_BLESS_HEADER").is_some() {
        std::fs::write(&path, &fresh).expect("write include/sidekick.h");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == fresh,
        "bindings/include/sidekick.h is stale: regenerate it with \
         `SIDEKICK_BLESS_HEADER=1 cargo test -p sidekick-capi --test header` and commit it"
    );
}

#[test]
fn header_declares_every_surface() {
    let h = generate();
    for name in [
        "sk_quack_new",
        "sk_quack_decode",
        "sk_robin_on_quack",
        "sk_robin_poll_event",
        "sk_pacubic_on_loss",
        "sk_packrat_poll_eack",
        "sk_client_poll_transmit",
        "sk_client_on_sidekick_received",
        "SK_STATUS_NULL_POINTER",
        "SK_CONGESTION_SOURCE_QUACK",
        "typedef struct SkClient SkClient",
    ] {
        assert!(h.contains(name), "{name} missing from the generated header");
    }
}
