//! `sidekick-sim`: the papers' experiments in virtual time.
//!
//! The real pieces, with no sockets, threads or wall clock: quinn-proto endpoints with the SDK's
//! engines and PACUBIC ([`sdk`], [`quic`]), the proxy core the `sidekick-proxy` binary runs
//! ([`proxy_node`]), the lab's link model ([`net`], `sidekick_lab::link`), driven by one event
//! queue in virtual time ([`sched`], [`trial`]); the media applications of the examples run on
//! the same links and proxy ([`media`]), as do the multicast stream ([`multicast`]) and the WebRTC
//! call on str0m ([`webrtc`]; its
//! random draws are str0m's own and not seeded). The lab's scenario files run unchanged
//! ([`scenario`], [`run`]) and produce the lab's JSON keys. One seed makes a run reproducible:
//! the same seed gives the same JSON, byte for byte (what cannot be seeded is listed in [`quic`]).
//!
//! ```no_run
//! use sidekick_lab::scenario::Scenario;
//! use sidekick_sim::run::{SimOptions, run};
//! let scn = Scenario::load("interop/scenarios/robin-2-upload.toml".as_ref(), &["lan.loss=2%".into()])?;
//! let r = run(&scn, &SimOptions { trials: Some(3), ..SimOptions::default() })?;
//! println!("{:?}", r.median("sidekick", "goodput_mbps"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod media;
pub mod multi;
pub mod multicast;
pub mod net;
pub mod network;
pub mod proxy_node;
pub mod quic;
pub mod reply_hold;
pub mod rtc;
pub mod run;
pub mod scenario;
pub mod sched;
pub mod sdk;
pub mod seeded_tls;
pub mod studies;
pub mod transfer;
pub mod trial;
pub mod webrtc;
