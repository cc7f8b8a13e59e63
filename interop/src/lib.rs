//! `sidekick-lab`: network namespaces, link emulation, scenarios, the experiment runner, results
//! and plots, and an interop matrix across QUIC stacks.
