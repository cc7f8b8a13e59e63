//! Compiles the C tests in `tests/c/` against the committed header and the static library
//! `libsidekick_capi.a` that `cargo test` built for this package, runs them and checks their
//! report ("N passed, 0 failed").
//!
//! Needs a C compiler (`cc`, or `$CC`). The library is looked up next to this test executable
//! (`target/<profile>/deps`, where `cargo test` leaves the freshly built staticlib), then in
//! `target/<profile>`; this works with and without `CARGO_TARGET_DIR`.

// Test code: a failed expectation is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

const TESTS: &[&str] = &[
    "quack_test",
    "robin_test",
    "pacubic_test",
    "packrat_test",
    "client_test",
    "errors_test",
];

/// The static library built for this test run.
fn static_library() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("deps directory");
    let mut candidates = vec![deps.join("libsidekick_capi.a")];
    if let Some(profile) = deps.parent() {
        candidates.push(profile.join("libsidekick_capi.a"));
    }
    // CARGO_TARGET_TMPDIR is `<target>/tmp`; the profile directory is a sibling.
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    if let (Some(target), Some(profile)) = (tmp.parent(), deps.parent())
        && let Some(name) = profile.file_name()
    {
        candidates.push(target.join(name).join("libsidekick_capi.a"));
    }
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| panic!("libsidekick_capi.a not found; looked at {candidates:?}"))
}

fn compile(src: &Path, lib: &Path, out: &Path) {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let output = Command::new(&cc)
        .args([
            "-std=c99",
            "-D_POSIX_C_SOURCE=200809L",
            "-Wall",
            "-Wextra",
            "-Werror",
        ])
        .arg("-pedantic")
        .arg("-I")
        .arg(crate_dir.join("include"))
        .arg("-I")
        .arg(crate_dir.join("tests/c"))
        .arg(src)
        .arg(lib)
        // A library from a workspace build carries quiche's BoringSSL (the SDK's `quiche`
        // feature, unified by cargo), which is C++ (bindings/README.md).
        .args(["-lpthread", "-ldl", "-lm", "-lstdc++"])
        .arg("-o")
        .arg(out)
        .output()
        .unwrap_or_else(|e| panic!("running {cc}: {e}"));
    assert!(
        output.status.success(),
        "compiling {} failed:\n{}",
        src.display(),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn c_tests_pass() {
    let lib = static_library();
    println!("linking {}", lib.display());
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sidekick-capi-c-tests");
    std::fs::create_dir_all(&out_dir).expect("create the C test output directory");
    let mut total = 0;
    for name in TESTS {
        let src = crate_dir.join("tests/c").join(format!("{name}.c"));
        let bin = out_dir.join(name);
        compile(&src, &lib, &bin);
        let run = Command::new(&bin)
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", bin.display()));
        let stdout = String::from_utf8_lossy(&run.stdout);
        let stderr = String::from_utf8_lossy(&run.stderr);
        println!("--- {name}\n{stdout}{stderr}");
        assert!(
            run.status.success(),
            "{name} failed ({}):\n{stdout}{stderr}",
            run.status
        );
        let summary = stdout.lines().last().unwrap_or_default();
        let passed: usize = summary
            .strip_suffix(" passed, 0 failed")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{name}: unexpected summary {summary:?}"));
        assert!(passed > 0, "{name} ran no tests");
        total += passed;
    }
    println!("C tests: {total} passed, 0 failed");
    assert!(total >= 25, "only {total} C tests ran");
}
