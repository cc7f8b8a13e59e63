//! The sender's side of a peer: every frame's RTP packets written on schedule, paced evenly
//! over the frame interval.

use std::time::{Duration, Instant};

use str0m::Input;
use str0m::media::Pt;
use str0m::rtp::{RtpWrite, SeqNo, Ssrc};

use super::PeerCore;
use crate::webrtc::source::{FrameSource, SourceConfig};
use crate::webrtc::vp8::rtp_payloads;

/// The sender's state, from the first frame on.
pub(super) struct Sending {
    pub(super) source: FrameSource,
    pub(super) cfg: SourceConfig,
    pub(super) start: Instant,
    pub(super) next_frame: u32,
    /// Packets of the current frame: (due, payload, last of frame, rtp time, capture instant).
    pub(super) queue: std::collections::VecDeque<(Instant, Vec<u8>, bool, u32, Instant)>,
    /// Pacing floor: a packet that left late does not let the next one follow it closely (a
    /// catch-up burst would hide the silence of a later loss from the proxy); only a sender
    /// more than a frame behind catches up faster.
    pub(super) not_before: Instant,
    /// Spacing of the current frame's packets.
    pub(super) spacing: Duration,
    pub(super) seq: u64,
    pub(super) ssrc: Ssrc,
    pub(super) pt: Pt,
}

impl PeerCore {
    pub(super) fn next_send(&self) -> Option<Instant> {
        let s = self.sending.as_ref()?;
        let frame = (s.next_frame < self.cfg.frames)
            .then(|| s.start + self.cfg.source.frame_interval() * s.next_frame);
        [frame, s.queue.front().map(|q| q.0.max(s.not_before))]
            .into_iter()
            .flatten()
            .min()
    }

    pub(super) fn start_sending(&mut self, now: Instant) -> Option<()> {
        let mid = self.mid?;
        let (pt, _) = self.media_pt?;
        let ssrc = self.rtc.direct_api().stream_tx_by_mid(mid, None)?.ssrc();
        self.sending = Some(Sending {
            source: FrameSource::new(&self.cfg.source, self.cfg.seed),
            cfg: self.cfg.source,
            start: now,
            next_frame: 0,
            queue: std::collections::VecDeque::new(),
            not_before: now,
            spacing: Duration::ZERO,
            seq: 1000 + (self.cfg.seed % 20_000),
            ssrc,
            pt,
        });
        Some(())
    }

    pub(super) fn send_due(&mut self, now: Instant) -> anyhow::Result<()> {
        if self.sending.is_none()
            && (self.connected_at.is_none() || self.start_sending(now).is_none())
        {
            return Ok(());
        }
        // A key change whose new stream was not there when it connected.
        self.switch_sender();
        let interval = self.cfg.source.frame_interval();
        let frames = self.cfg.frames;
        let wall = self.wall;
        loop {
            let Some(s) = self.sending.as_mut() else {
                return Ok(());
            };
            // Queue every frame whose capture time has come.
            while s.next_frame < frames && s.start + interval * s.next_frame <= now {
                let capture = s.start + interval * s.next_frame;
                let frame = s.source.next_frame();
                let payloads = match &self.cfg.vp8 {
                    Some(v) => v
                        .get(s.next_frame as usize)
                        .map(|f| rtp_payloads(&f.data, s.cfg.max_payload))
                        .unwrap_or_default(),
                    None => frame.payloads(&s.cfg, wall.unix_ns(capture)),
                };
                let n = payloads.len() as u32;
                s.spacing = interval / n.max(1);
                let rtp_time =
                    (u64::from(s.next_frame) * 90_000 / u64::from(s.cfg.fps.max(1))) as u32;
                for (k, p) in payloads.into_iter().enumerate() {
                    let due = capture + interval * k as u32 / n.max(1);
                    s.queue
                        .push_back((due, p, k as u32 + 1 == n, rtp_time, capture));
                }
                s.next_frame += 1;
            }
            if s.queue.front().is_none_or(|q| q.0.max(s.not_before) > now) {
                return Ok(());
            }
            let Some((due, payload, marker, time, capture)) = s.queue.pop_front() else {
                return Ok(());
            };
            // Behind by more than a frame (a loaded machine): catch up at four times the pace
            // rather than fall further behind.
            let floor = if now.saturating_duration_since(due) > interval {
                s.spacing / 4
            } else {
                s.spacing * 3 / 4
            };
            s.not_before = now + floor;
            let (ssrc, pt, seq) = (s.ssrc, s.pt, s.seq);
            s.seq += 1;
            let rtc = self.sending_rtc();
            if let Some(tx) = rtc.direct_api().stream_tx(&ssrc) {
                tx.write_rtp(
                    RtpWrite::new(pt, SeqNo::from(seq), time, capture, payload)
                        .marker(marker)
                        .nackable(true),
                );
            }
            self.packets_sent += 1;
            if self.retiring.as_ref().is_some_and(|r| r.sender_switched)
                || self.report.media_after_rekey.is_some()
            {
                *self.report.media_after_rekey.get_or_insert(0) += 1;
            }
            self.last_sent_at = Some(now);
            // str0m stamps written packets when time next moves forward.
            self.drain()?;
            self.sending_rtc().handle_input(Input::Timeout(now))?;
            self.drain()?;
        }
    }
}
