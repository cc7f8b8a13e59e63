//! Shared pieces of the sidekick example applications: low-latency media with NACKs and FEC,
//! HTTP/3 upload and download. Each application is a binary usable alone and by the lab.
