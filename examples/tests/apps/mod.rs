//! The one JSON report line an application prints with `--json`.
#![allow(dead_code, clippy::unwrap_used)]

/// Asserts that the process succeeded and printed exactly one line, and parses it.
pub fn one_json_line(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one JSON line: {stdout}");
    serde_json::from_str(lines[0]).unwrap()
}
