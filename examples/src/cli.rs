//! What every example binary's `main` does first: logs to stderr (`RUST_LOG` overrides the
//! default level) and, for the single-threaded async applications, a current-thread runtime.

use anyhow::Context as _;

/// Logs to stderr at `default_level` (`warn`, `info`, …) unless `RUST_LOG` says otherwise.
/// Call once, first thing in `main`.
pub fn init_tracing(default_level: &str) {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level)),
        )
        .init();
}

/// A current-thread tokio runtime with I/O and timers (the media and WebRTC applications run
/// one event loop each: their timing measurements want no work-stealing).
///
/// ```
/// let rt = sidekick_examples::cli::current_thread_runtime().unwrap();
/// assert_eq!(rt.block_on(async { 1 + 1 }), 2);
/// ```
pub fn current_thread_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("tokio runtime")
}
