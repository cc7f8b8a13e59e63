//! `sidekick-lab`: network namespaces, link emulation, scenarios, the experiment runner, results
//! and plots.
//!
//! - [`spec`]: link properties and the unit syntax of scenario files.
//! - [`link`]: the sans-IO core of one emulated link direction (loss, queue, rate, delay).
//! - [`element`]: the userspace link element thread (AF_PACKET forwarding between two veths).
//! - [`netem`]: the kernel link backend (`tc netem` on a bridge) for kernels that have netem.
//! - [`topo`]: the namespace topology and its clean-up.
//! - [`cleanup`]: run owners and what `sidekick-lab clean` may remove (never a live run).
//! - [`probe`]: UDP probes and blasts that measure links (`check-links`).
//! - [`proxyproc`]: the proxy process of a trial (start, readiness, metrics scrape, stop).
//! - [`scenario`]: scenario TOML files and `--set` overrides.
//! - [`runner`]: trials, variants in alternation, metrics, JSON.
//! - [`plot`]: PNG and SVG figures.
//! - [`stats`]: median and IQR.
//! - [`csum`], [`sys`]: checksums and the namespace/socket system calls the element needs.
//!
//! The applications a trial runs (`sidekick-transfer`, the proxy) are separate binaries.

mod appproc;
pub mod apps;
pub mod cleanup;
pub mod csum;
pub mod droplog;
pub mod droprule;
pub mod element;
pub mod link;
pub mod netem;
pub mod plot;
pub mod probe;
pub mod proxyproc;
pub mod runner;
pub mod scenario;
pub mod spec;
pub mod stats;
pub mod sweep;
pub mod sys;
pub mod topo;
pub mod trial_metrics;
