//! The curl adapter (`bindings/curl/`) over real loopback sockets: compiles
//! `curl/curl_adapter_test.c` with the adapter against the HTTP/3 libcurl of
//! `scripts/build-curl.sh` and the `libsidekick_capi.a` this test run built, starts the project's
//! HTTP/3 server (`sidekick-transfer server --stack quinn --http3`) on 127.0.0.1 and runs it:
//! downloads and uploads through the relay (bodies checked byte for byte), then the bad inputs
//! (no key log, unreachable server, a handle without HTTP/3).
//!
//! Needs the libcurl build (cached under `<target>/curl-h3`) and `sidekick-transfer` in the
//! profile directory (`cargo test --workspace` builds it). Without them the test is skipped,
//! unless `SIDEKICK_REQUIRE_CURL=1` (scripts/test.sh, which builds libcurl before the tests):
//! then it fails. It does not build libcurl itself: the script takes quiche and BoringSSL from the
//! workspace's test build, and cargo holds the target directory while tests run.

// Test code: a failed expectation is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `<target>/<profile>` of this test executable (`<target>/<profile>/deps/…`).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    exe.parent()
        .and_then(Path::parent)
        .expect("profile directory")
        .to_path_buf()
}

/// The target directory (`CARGO_TARGET_TMPDIR` is `<target>/tmp`).
fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target directory")
        .to_path_buf()
}

fn static_library() -> PathBuf {
    let profile = profile_dir();
    [profile.join("deps"), profile]
        .iter()
        .map(|d| d.join("libsidekick_capi.a"))
        .find(|p| p.is_file())
        .expect("libsidekick_capi.a built by this test run")
}

/// The libcurl prefix of `scripts/build-curl.sh`; when it is missing, `None`, or a failure when
/// `require`.
fn curl_prefix(require: bool) -> Option<PathBuf> {
    let prefix = target_dir().join("curl-h3/prefix");
    let built = prefix.join("bin/curl").is_file()
        && std::fs::read_dir(&prefix).is_ok_and(|mut d| {
            d.any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().starts_with(".built-")))
        });
    assert!(
        built || !require,
        "no libcurl at {}: run scripts/build-curl.sh before the tests",
        prefix.display()
    );
    built.then_some(prefix)
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .map(|a| a.port())
        .expect("a free UDP port")
}

#[test]
fn curl_adapter_over_loopback() {
    let require = std::env::var("SIDEKICK_REQUIRE_CURL").as_deref() == Ok("1");
    let server_bin = profile_dir().join("sidekick-transfer");
    let Some(prefix) = curl_prefix(require) else {
        eprintln!(
            "curl_adapter_over_loopback: skipped (run scripts/build-curl.sh, or set SIDEKICK_REQUIRE_CURL=1)"
        );
        return;
    };
    if !server_bin.is_file() {
        assert!(
            !require,
            "{} not built (cargo build -p sidekick-examples)",
            server_bin.display()
        );
        eprintln!(
            "curl_adapter_over_loopback: skipped ({} not built)",
            server_bin.display()
        );
        return;
    }
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("curl_adapter_test");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let lib = prefix.join("lib");
    let compiled = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror"])
        .arg("-I")
        .arg(crate_dir.join("include"))
        .arg("-I")
        .arg(crate_dir.join("curl"))
        .arg("-I")
        .arg(prefix.join("include"))
        .arg(crate_dir.join("curl/curl_adapter_test.c"))
        .arg(crate_dir.join("curl/sidekick_curl.c"))
        .arg(static_library())
        .arg("-L")
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lcurl", "-lpthread", "-ldl", "-lm", "-lstdc++", "-o"])
        .arg(&out)
        .output()
        .expect("running the C compiler");
    assert!(
        compiled.status.success(),
        "compiling the curl adapter test failed:\n{}",
        String::from_utf8_lossy(&compiled.stderr)
    );

    let port = free_udp_port();
    let _server = Server(
        Command::new(&server_bin)
            .args(["server", "--stack", "quinn", "--http3", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting sidekick-transfer server"),
    );
    // The server is up once curl can fetch from it.
    let url = format!("https://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let probe = Command::new(prefix.join("bin/curl"))
            .args(["--http3-only", "-k", "-s", "-o", "/dev/null", "-m", "2"])
            .arg(format!("{url}/download/1"))
            .status()
            .expect("running curl");
        if probe.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the HTTP/3 server did not come up"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    let run = Command::new(&out)
        .arg(&url)
        .arg("1")
        .output()
        .expect("running the curl adapter test");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    println!("{stdout}{stderr}");
    let summary = stdout
        .lines()
        .find(|l| l.ends_with(" failed"))
        .unwrap_or_else(|| panic!("no summary line:\n{stdout}{stderr}"));
    assert!(run.status.success(), "{summary}\n{stderr}");
    assert!(summary.ends_with(", 0 failed"), "{summary}\n{stderr}");
    let passed: u32 = summary
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("N passed");
    assert!(passed >= 30, "{summary}");
}
