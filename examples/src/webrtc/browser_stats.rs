//! What the browser page reports (`POST /browser/stats`, W3C webrtc-stats names) and the
//! server's log of it, apart from the browser's process and signalling ([`super::browser`]):
//! parsing these bodies is network input, fuzzed without the WebRTC stack (examples/fuzz).

use serde::Deserialize;

/// Samples kept (250 ms apart: over an hour).
pub const MAX_SAMPLES: usize = 20_000;

/// Why the browser's input was refused.
#[derive(Debug, thiserror::Error)]
pub enum BrowserError {
    /// A body that is not the expected JSON.
    #[error("malformed browser message: {0}")]
    Malformed(#[from] serde_json::Error),
}

/// The video `inbound-rtp` statistics the page reports (W3C webrtc-stats names; every field
/// optional: browsers differ in what they fill in). Times in seconds, as `getStats()` gives them.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct InboundRtp {
    pub packets_received: Option<f64>,
    pub packets_lost: Option<f64>,
    pub nack_count: Option<f64>,
    pub pli_count: Option<f64>,
    pub fir_count: Option<f64>,
    pub frames_received: Option<f64>,
    pub frames_decoded: Option<f64>,
    pub frames_dropped: Option<f64>,
    pub key_frames_decoded: Option<f64>,
    pub freeze_count: Option<f64>,
    pub total_freezes_duration: Option<f64>,
    pub pause_count: Option<f64>,
    pub total_pauses_duration: Option<f64>,
    pub jitter_buffer_delay: Option<f64>,
    pub jitter_buffer_target_delay: Option<f64>,
    pub jitter_buffer_minimum_delay: Option<f64>,
    pub jitter_buffer_emitted_count: Option<f64>,
    pub jitter: Option<f64>,
    pub retransmitted_packets_received: Option<f64>,
    pub bytes_received: Option<f64>,
    pub frame_width: Option<f64>,
    pub frame_height: Option<f64>,
    pub total_inter_frame_delay: Option<f64>,
    pub total_squared_inter_frame_delay: Option<f64>,
    pub total_decode_time: Option<f64>,
}

/// One `POST /browser/stats` body.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct StatsPost {
    /// The page's clock (`performance.now()`), ms.
    #[serde(default)]
    pub t_ms: f64,
    /// `RTCPeerConnection.connectionState`.
    #[serde(default)]
    pub state: String,
    /// The video stream's statistics (none before the first packet).
    #[serde(default)]
    pub inbound: Option<InboundRtp>,
}

/// Parses a stats body from the page (network input: never panics).
///
/// ```
/// use sidekick_examples::webrtc::browser_stats::parse_stats_post;
/// let s = parse_stats_post(br#"{"t_ms":5,"state":"connected","inbound":{"framesDecoded":3}}"#)
///     .unwrap();
/// assert_eq!(s.inbound.unwrap().frames_decoded, Some(3.0));
/// assert!(parse_stats_post(b"{").is_err());
/// ```
pub fn parse_stats_post(body: &[u8]) -> Result<StatsPost, BrowserError> {
    Ok(serde_json::from_slice(body)?)
}

/// The samples of one call (at most [`MAX_SAMPLES`]; later ones replace the last).
#[derive(Debug, Clone, Default)]
pub struct StatsLog {
    samples: Vec<InboundRtp>,
    dropped: u64,
    last_state: String,
}

impl StatsLog {
    /// Adds a sample.
    pub fn push(&mut self, s: StatsPost) {
        self.last_state = s.state.chars().take(32).collect();
        let Some(i) = s.inbound else { return };
        if self.samples.len() >= MAX_SAMPLES {
            self.samples.pop();
            self.dropped += 1;
        }
        self.samples.push(i);
    }

    /// Samples with video statistics.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// No sample with video statistics yet.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// The browser's figures (lab metric names, `browser_*`): the counters of the last sample,
    /// the jitter buffer's mean delay per emitted frame overall and the largest and 95th
    /// percentile over the 250 ms sampling windows, the inter-frame delay's standard deviation.
    pub fn report(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert("far_peer".into(), "chromium".into());
        m.insert("browser_samples".into(), self.samples.len().into());
        m.insert("browser_state".into(), self.last_state.clone().into());
        let Some(last) = self.samples.last() else {
            return m;
        };
        let mut put = |k: &str, v: Option<f64>| {
            if let Some(v) = v.filter(|v| v.is_finite()) {
                m.insert(format!("browser_{k}"), v.into());
            }
        };
        let ms = |v: Option<f64>| v.map(|s| s * 1000.0);
        put("packets_received", last.packets_received);
        put("packets_lost", last.packets_lost);
        put("nack_count", last.nack_count);
        put("pli_count", last.pli_count);
        put("fir_count", last.fir_count);
        put("frames_received", last.frames_received);
        put("frames_decoded", last.frames_decoded);
        put("frames_dropped", last.frames_dropped);
        put("key_frames_decoded", last.key_frames_decoded);
        put("freeze_count", last.freeze_count);
        put("freezes_ms", ms(last.total_freezes_duration));
        put("pause_count", last.pause_count);
        put("pauses_ms", ms(last.total_pauses_duration));
        put("jitter_ms", ms(last.jitter));
        put(
            "retransmitted_packets_received",
            last.retransmitted_packets_received,
        );
        put("bytes_received", last.bytes_received);
        put("frame_width", last.frame_width);
        put("frame_height", last.frame_height);
        let per = |total: Option<f64>, n: Option<f64>| match (total, n) {
            (Some(t), Some(n)) if n > 0.0 => Some(t / n * 1000.0),
            _ => None,
        };
        let emitted = last.jitter_buffer_emitted_count;
        put(
            "jitter_buffer_delay_ms",
            per(last.jitter_buffer_delay, emitted),
        );
        put(
            "jitter_buffer_target_delay_ms",
            per(last.jitter_buffer_target_delay, emitted),
        );
        put(
            "jitter_buffer_minimum_delay_ms",
            per(last.jitter_buffer_minimum_delay, emitted),
        );
        put(
            "decode_ms",
            per(last.total_decode_time, last.frames_decoded),
        );
        // Inter-frame delay: n - 1 intervals between n decoded frames.
        if let (Some(t), Some(sq), Some(n)) = (
            last.total_inter_frame_delay,
            last.total_squared_inter_frame_delay,
            last.frames_decoded,
        ) && n > 1.0
        {
            let k = n - 1.0;
            let var = (sq / k - (t / k).powi(2)).max(0.0);
            put("inter_frame_delay_sd_ms", Some(var.sqrt() * 1000.0));
        }
        let mut windows: Vec<f64> = self
            .samples
            .windows(2)
            .filter_map(|w| {
                let d = w[1].jitter_buffer_delay? - w[0].jitter_buffer_delay?;
                let n = w[1].jitter_buffer_emitted_count? - w[0].jitter_buffer_emitted_count?;
                (n > 0.0 && d >= 0.0).then(|| d / n * 1000.0)
            })
            .collect();
        windows.sort_by(f64::total_cmp);
        if let Some(max) = windows.last() {
            put("jitter_buffer_delay_window_max_ms", Some(*max));
            let i = ((windows.len() as f64 * 0.95).ceil() as usize).clamp(1, windows.len()) - 1;
            put("jitter_buffer_delay_window_p95_ms", Some(windows[i]));
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample(t: f64, delay: f64, emitted: f64, decoded: f64) -> StatsPost {
        StatsPost {
            t_ms: t,
            state: "connected".into(),
            inbound: Some(InboundRtp {
                jitter_buffer_delay: Some(delay),
                jitter_buffer_emitted_count: Some(emitted),
                frames_decoded: Some(decoded),
                total_inter_frame_delay: Some((decoded - 1.0) * 0.033),
                total_squared_inter_frame_delay: Some((decoded - 1.0) * 0.033 * 0.033),
                nack_count: Some(3.0),
                ..InboundRtp::default()
            }),
        }
    }

    #[test]
    fn report_means_and_windows() {
        let mut log = StatsLog::default();
        log.push(StatsPost::default()); // before the first packet: no video statistics
        log.push(sample(0.0, 0.0, 0.0, 0.0));
        log.push(sample(250.0, 0.4, 8.0, 8.0)); // 50 ms per frame
        log.push(sample(500.0, 1.2, 16.0, 16.0)); // 100 ms per frame
        let r = log.report();
        assert_eq!(r["browser_samples"], 3);
        assert_eq!(r["browser_nack_count"], 3.0);
        let f = |k: &str| r[k].as_f64().unwrap();
        assert!((f("browser_jitter_buffer_delay_ms") - 75.0).abs() < 1e-9);
        assert!((f("browser_jitter_buffer_delay_window_max_ms") - 100.0).abs() < 1e-9);
        assert!((f("browser_jitter_buffer_delay_window_p95_ms") - 100.0).abs() < 1e-9);
        // Evenly spaced frames: no spread.
        assert!(f("browser_inter_frame_delay_sd_ms") < 1e-3);
        assert!(!r.contains_key("browser_packets_lost"));
    }

    #[test]
    fn the_log_is_capped() {
        let mut log = StatsLog::default();
        for i in 0..MAX_SAMPLES + 5 {
            log.push(sample(i as f64, 0.0, 0.0, i as f64));
        }
        assert_eq!(log.len(), MAX_SAMPLES);
        assert_eq!(log.dropped, 5);
        let last = (MAX_SAMPLES + 4) as f64;
        assert_eq!(log.report()["browser_frames_decoded"], last);
    }

    proptest! {
        #[test]
        fn stats_parser_never_panics(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse_stats_post(&data);
        }

        #[test]
        fn any_numbers_give_a_finite_report(v in proptest::collection::vec(-1e9f64..1e9, 8)) {
            let mut log = StatsLog::default();
            for k in 0..3 {
                log.push(sample(f64::from(k), v[k as usize], v[3 + k as usize], v[6]));
            }
            for (_, x) in log.report() {
                if let Some(f) = x.as_f64() { prop_assert!(f.is_finite()); }
            }
        }
    }
}
