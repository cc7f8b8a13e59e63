//! Addresses and frame builders shared by the proxy's in-memory pipeline tests, and the
//! helpers of its namespace tests.
#![allow(dead_code, clippy::unwrap_used)]

// The core's fixtures (addresses, frame builders, a Robin session), shared with its own tests.
#[path = "../../../proxy-core/tests/common/mod.rs"]
mod fixtures;
#[allow(unused_imports)] // the namespace tests use none of them
pub use fixtures::*;

/// Runs a command quietly; whether it succeeded.
pub fn sh(args: &[&str]) -> bool {
    std::process::Command::new(args[0])
        .args(&args[1..])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Namespace tests run only when `SIDEKICK_LAB=1` (the lab stage of `scripts/test.sh`); they
/// then need root and fail, rather than skip, when the namespaces cannot be built.
pub fn lab() -> bool {
    if std::env::var("SIDEKICK_LAB").as_deref() != Ok("1") {
        eprintln!("skipped: namespace test (run with SIDEKICK_LAB=1 as root)");
        return false;
    }
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    assert!(root, "SIDEKICK_LAB=1 needs root");
    true
}
