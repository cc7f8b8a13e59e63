//! The WebRTC client's command line: the flags of `sidekick-webrtc client` with the binary's
//! defaults (examples/src/bin/sidekick-webrtc.rs).

use std::time::Duration;

use sidekick_examples::webrtc::call::source_config;
use sidekick_examples::webrtc::peer::Role;
use sidekick_examples::webrtc::sidekick::{packrat_config, robin_config};

use super::WebrtcSetup;
use crate::media::MediaArgError;
use crate::media::args::arg_value;

/// The client command line of `sidekick-webrtc` after the lab's own arguments (`upload`: the
/// client sends), for a call of `duration` with a key change after `rekey_after`. A flag the
/// binary does not have is an error, as it would be for the binary. `--far-peer chromium` is
/// accepted and recorded: a real browser cannot run here, and such scenarios are reported as
/// skipped (`scenario::skip_reason`).
pub fn parse_client_args(
    upload: bool,
    duration: Duration,
    rekey_after: Option<Duration>,
    args: &[String],
) -> Result<WebrtcSetup, MediaArgError> {
    let (mut fps, mut kbps, mut keyframe_interval, mut keyframe_factor) =
        (30u32, 1500u32, 60u32, 4.0f64);
    let (mut playout_ms, mut linger_ms, mut seed) = (100u64, 1500u64, 1u64);
    let mut rekey_ms = rekey_after.map_or(0, |d| d.as_millis() as u64);
    let mut sidekick = false;
    let mut browser = false;
    let (mut every, mut threshold, mut on_gap) = (128u32, 8u32, 150u32);
    let (mut eack_ms, mut eack_packets, mut symbols, mut inflight) = (10u32, 4u32, 160u32, 24usize);
    let (mut cache, mut reorder_ms) = (64_000u32, 80u32);
    let (mut retry_ms, mut attempts) = (250u32, 4u32);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let a = a.as_str();
        match a {
            "--json" => {}
            "--sidekick" => sidekick = true,
            "--fps" => fps = arg_value(&mut it, a, "frames per second")?,
            "--kbps" => kbps = arg_value(&mut it, a, "kbit/s")?,
            "--keyframe-interval" => keyframe_interval = arg_value(&mut it, a, "a frame count")?,
            "--keyframe-factor" => keyframe_factor = arg_value(&mut it, a, "a factor")?,
            "--playout-delay-ms" => playout_ms = arg_value(&mut it, a, "milliseconds")?,
            "--linger-ms" => linger_ms = arg_value(&mut it, a, "milliseconds")?,
            "--seed" => seed = arg_value(&mut it, a, "a seed")?,
            "--rekey-after-ms" => rekey_ms = arg_value(&mut it, a, "milliseconds")?,
            "--sidekick-quack-every-packets" => every = arg_value(&mut it, a, "a count")?,
            "--sidekick-quack-threshold" => threshold = arg_value(&mut it, a, "a count")?,
            "--sidekick-quack-on-gap" => on_gap = arg_value(&mut it, a, "a percentage")?,
            "--sidekick-eack-interval-ms" => eack_ms = arg_value(&mut it, a, "milliseconds")?,
            "--sidekick-eack-packets" => eack_packets = arg_value(&mut it, a, "a count")?,
            "--sidekick-eack-symbols" => symbols = arg_value(&mut it, a, "a count")?,
            "--sidekick-eack-inflight" => inflight = arg_value(&mut it, a, "a count")?,
            "--sidekick-cache-bytes" => cache = arg_value(&mut it, a, "bytes")?,
            "--sidekick-reorder-ms" => reorder_ms = arg_value(&mut it, a, "milliseconds")?,
            "--sidekick-discovery-retry-ms" => retry_ms = arg_value(&mut it, a, "milliseconds")?,
            "--sidekick-discovery-attempts" => attempts = arg_value(&mut it, a, "a count")?,
            "--far-peer" => {
                let v: String = arg_value(&mut it, a, "str0m or chromium")?;
                browser = match v.as_str() {
                    "str0m" => false,
                    "chromium" => true,
                    _ => {
                        return Err(MediaArgError {
                            arg: a.into(),
                            why: format!("`{v}`: str0m or chromium"),
                        });
                    }
                };
            }
            _ => {
                return Err(MediaArgError {
                    arg: a.into(),
                    why: "not a flag of sidekick-webrtc client, or not modelled by the simulator"
                        .into(),
                });
            }
        }
    }
    let role = if upload { Role::Sender } else { Role::Receiver };
    let mut sk = sidekick.then(|| match role {
        Role::Sender => robin_config(every, threshold, on_gap),
        Role::Receiver => {
            packrat_config(eack_ms, eack_packets, symbols, inflight, cache, reorder_ms)
        }
    });
    if let Some(c) = sk.as_mut() {
        c.protocol.discovery_retry = Duration::from_millis(u64::from(retry_ms));
        c.protocol.discovery_attempts = attempts.max(1);
    }
    let source = source_config(fps, kbps, keyframe_interval, keyframe_factor);
    Ok(WebrtcSetup {
        role,
        frames: (duration.as_secs_f64() * f64::from(source.fps)).round() as u32,
        source,
        playout_delay: Duration::from_millis(playout_ms),
        linger: Duration::from_millis(linger_ms),
        seed,
        rekey_after: (rekey_ms > 0).then(|| Duration::from_millis(rekey_ms)),
        sidekick: sk,
        browser,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_flags_follow_the_binary() {
        let d = Duration::from_secs(30);
        let args: Vec<String> = ["--sidekick", "--sidekick-quack-every-packets", "64"]
            .map(String::from)
            .to_vec();
        let w = parse_client_args(true, d, None, &args).unwrap();
        let r = w.sidekick.unwrap().protocol.session.robin.unwrap();
        assert_eq!(
            (r.interval_packets, r.threshold, r.quack_on_gap_percent),
            (64, 8, 150)
        );
        assert_eq!(w.frames, 900);
        assert_eq!(w.role, Role::Sender);
        let w = parse_client_args(
            false,
            d,
            Some(Duration::from_secs(15)),
            &["--sidekick".into()],
        )
        .unwrap();
        let p = w.sidekick.unwrap().protocol.session.packrat.unwrap();
        assert_eq!((p.eack_interval_ms, p.reorder_delay_ms), (10, 80));
        assert_eq!(w.rekey_after, Some(Duration::from_secs(15)));
        assert!(
            parse_client_args(false, d, None, &[])
                .unwrap()
                .sidekick
                .is_none()
        );
        let w = parse_client_args(true, d, None, &["--far-peer".into(), "chromium".into()]);
        assert!(w.unwrap().browser);
        let e = parse_client_args(true, d, None, &["--far-peer".into(), "firefox".into()]);
        assert_eq!(e.unwrap_err().arg, "--far-peer");
        let e = parse_client_args(true, d, None, &["--bogus".into()]);
        assert_eq!(e.unwrap_err().arg, "--bogus");
    }
}
