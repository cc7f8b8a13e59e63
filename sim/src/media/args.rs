//! The media clients' command lines: the flags of `sidekick-media client` and
//! `sidekick-media-fec client` with the binaries' defaults.

use std::time::Duration;

use sidekick_examples::fec::FecConfig;
use sidekick_examples::media::MediaConfig;
use sidekick_examples::media_session::ReceiverTiming;

use super::{MediaApp, MediaSetup};

/// Errors of the media clients' command lines.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("client argument `{arg}`: {why}")]
pub struct MediaArgError {
    /// The argument.
    pub arg: String,
    /// What is wrong.
    pub why: String,
}

/// The value after flag `arg`, parsed; `what` names it in the error.
pub(crate) fn arg_value<T: std::str::FromStr>(
    it: &mut std::slice::Iter<'_, String>,
    arg: &str,
    what: &str,
) -> Result<T, MediaArgError> {
    it.next()
        .and_then(|v| v.parse::<T>().ok())
        .ok_or_else(|| MediaArgError {
            arg: arg.into(),
            why: format!("expected {what}"),
        })
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// The client command line of `sidekick-media` (`robin = true`) or `sidekick-media-fec`, after
/// the lab's own arguments: the binaries' flags with their defaults (examples/src/bin/
/// sidekick-media.rs, sidekick-media-fec.rs). A flag the binary does not have is an error, as
/// it would be for the binary.
pub fn parse_client_args(
    robin: bool,
    duration: Duration,
    args: &[String],
) -> Result<MediaSetup, MediaArgError> {
    // sidekick-media client.
    let mut interval_ms = 20u64;
    let mut payload = 240usize;
    let mut initial_rtt_ms = if robin { 100 } else { 200 };
    let mut summary_wait = 10.0f64;
    let mut sidekick = false;
    let (mut every, mut threshold, mut quack_ms, mut on_gap, mut reorder) = (2u32, 8, 0, 0, 1);
    // sidekick-media-fec client.
    let mut buffer_ms = 40u64;
    let mut linger_ms = 2000u64;
    let (mut eack_packets, mut eack_ms, mut eack_symbols) = (2u32, 40, 40);
    let mut eack_expected = sidekick_examples::media_sidekick::MEDIA_EACK_EXPECTED;
    let mut eack_probability = sidekick_examples::media_sidekick::MEDIA_EACK_PROBABILITY;
    let mut nack_driven = false;
    let mut reorder_ms = 65u32;
    // Both.
    let (mut retry_ms, mut attempts) = (250u32, 4u32);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let a = a.as_str();
        match (robin, a) {
            (_, "--json") => {}
            (_, "--sidekick") => sidekick = true,
            (_, "--initial-rtt-ms") => initial_rtt_ms = arg_value(&mut it, a, "milliseconds")?,
            (_, "--sidekick-discovery-retry-ms") => {
                retry_ms = arg_value(&mut it, a, "milliseconds")?;
            }
            (_, "--sidekick-discovery-attempts") => attempts = arg_value(&mut it, a, "a count")?,
            (true, "--interval-ms") => interval_ms = arg_value(&mut it, a, "milliseconds")?,
            (true, "--payload") => payload = arg_value(&mut it, a, "bytes")?,
            (true, "--summary-wait") => summary_wait = arg_value(&mut it, a, "seconds")?,
            (true, "--sidekick-quack-every-packets") => every = arg_value(&mut it, a, "a count")?,
            (true, "--sidekick-quack-threshold") => threshold = arg_value(&mut it, a, "a count")?,
            (true, "--sidekick-quack-interval-ms") => {
                quack_ms = arg_value(&mut it, a, "milliseconds")?;
            }
            (true, "--sidekick-quack-on-gap") => on_gap = arg_value(&mut it, a, "a percentage")?,
            (true, "--sidekick-reorder-threshold") => reorder = arg_value(&mut it, a, "a count")?,
            (false, "--buffer-ms") => buffer_ms = arg_value(&mut it, a, "milliseconds")?,
            (false, "--linger-ms") => linger_ms = arg_value(&mut it, a, "milliseconds")?,
            (false, "--sidekick-eack-packets") => eack_packets = arg_value(&mut it, a, "a count")?,
            (false, "--sidekick-eack-interval-ms") => {
                eack_ms = arg_value(&mut it, a, "milliseconds")?;
            }
            (false, "--sidekick-eack-symbols") => eack_symbols = arg_value(&mut it, a, "a count")?,
            (false, "--sidekick-eack-expected") => {
                eack_expected = arg_value(&mut it, a, "a count")?;
            }
            (false, "--sidekick-eack-probability") => {
                eack_probability = arg_value(&mut it, a, "a probability")?;
            }
            (false, "--sidekick-eack") => {
                nack_driven = match it.next().map(String::as_str) {
                    Some("nack") => true,
                    Some("periodic") => false,
                    _ => {
                        return Err(MediaArgError {
                            arg: a.into(),
                            why: "expected `periodic` or `nack`".into(),
                        });
                    }
                };
            }
            (false, "--sidekick-reorder-ms") => {
                reorder_ms = arg_value(&mut it, a, "milliseconds")?;
            }
            _ => {
                return Err(MediaArgError {
                    arg: a.into(),
                    why: format!(
                        "not a flag of {} client, or not modelled by the simulator",
                        if robin {
                            "sidekick-media"
                        } else {
                            "sidekick-media-fec"
                        }
                    ),
                });
            }
        }
    }
    let mut sk = if !sidekick {
        None
    } else if robin {
        Some(sidekick_examples::media_sidekick::media_config(
            every, threshold, quack_ms, reorder, on_gap,
        ))
    } else {
        let mut c = if nack_driven {
            sidekick_examples::media_sidekick::fec_nack_config(eack_ms, eack_symbols, reorder_ms)
        } else {
            sidekick_examples::media_sidekick::fec_config(eack_packets, eack_ms, eack_symbols)
        };
        c.packrat.inflight_allowance = eack_expected;
        c.packrat.success_probability = eack_probability;
        Some(c)
    };
    if let Some(c) = sk.as_mut() {
        c.protocol.discovery_retry = ms(u64::from(retry_ms));
        c.protocol.discovery_attempts = attempts.max(1);
    }
    let app = if robin {
        MediaApp::Robin {
            cfg: MediaConfig {
                interval: ms(interval_ms.max(1)),
                payload_len: payload,
                initial_rtt: ms(initial_rtt_ms.max(1)),
                ..MediaConfig::default()
            },
            summary_wait: Duration::try_from_secs_f64(summary_wait).map_err(|e| MediaArgError {
                arg: "--summary-wait".into(),
                why: e.to_string(),
            })?,
        }
    } else {
        let base = FecConfig::default();
        MediaApp::Fec {
            cfg: FecConfig {
                target_frames: usize::try_from(buffer_ms / base.frame.as_millis() as u64)
                    .unwrap_or(2)
                    .max(1),
                initial_rtt: ms(initial_rtt_ms.max(1)),
                ..base
            },
            timing: ReceiverTiming {
                linger: ms(linger_ms),
                ..ReceiverTiming::default()
            },
        }
    };
    Ok(MediaSetup {
        app,
        duration,
        sidekick: sk,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_flags_follow_the_binaries() {
        let d = Duration::from_secs(30);
        let args: Vec<String> = ["--sidekick", "--sidekick-quack-every-packets", "64"]
            .map(String::from)
            .to_vec();
        let m = parse_client_args(true, d, &args).unwrap();
        let r = m.sidekick.unwrap().protocol.session.robin.unwrap();
        assert_eq!((r.interval_packets, r.threshold), (64, 8));
        let m = parse_client_args(false, d, &["--sidekick".into()]).unwrap();
        let p = m.sidekick.unwrap().protocol.session.packrat.unwrap();
        assert_eq!((p.eack_interval_packets, p.local_symbols), (2, 40));
        assert!(parse_client_args(false, d, &[]).unwrap().sidekick.is_none());
        let e = parse_client_args(false, d, &["--sidekick-quack-every-packets".into()]);
        assert_eq!(e.unwrap_err().arg, "--sidekick-quack-every-packets");
        let e = parse_client_args(true, d, &["--payload".into(), "x".into()]);
        assert_eq!(e.unwrap_err().arg, "--payload");
    }
}
