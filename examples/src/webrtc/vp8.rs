//! Real VP8 frames for a far peer that decodes what it receives (a browser): a synthetic moving
//! picture encoded by libvpx (Debian `libvpx-dev`, through the `env-libvpx-sys` bindings) at the
//! source's frame rate, bit rate and keyframe interval, and the RTP payloads of each frame
//! (RFC 7741: a one-byte payload descriptor, `S` set on the first packet of a frame).
//!
//! libvpx's real-time CBR rate control decides every frame's size, so the sizes vary as a real
//! encoder's do (keyframes capped at `keyframe_factor` × a delta frame's budget, as
//! [`super::source`] shapes its synthetic frames). The picture is new noise over a moving
//! gradient each frame, so every frame costs the encoder its whole budget.
//!
//! `unsafe` is allowed in this module only: it calls libvpx's C API (every block says why it is
//! sound).
//!
//! ```
//! use sidekick_examples::webrtc::vp8::{Vp8Config, encode_stream, rtp_payloads};
//! let cfg = Vp8Config { frames: 4, keyframe_interval: 2, ..Vp8Config::default() };
//! let frames = encode_stream(&cfg).unwrap();
//! assert_eq!(frames.len(), 4);
//! assert!(frames[0].keyframe && !frames[1].keyframe && frames[2].keyframe);
//! let p = rtp_payloads(&frames[0].data, 1100);
//! assert_eq!(p[0][0], 0x10); // S bit: start of the frame
//! assert_eq!(p.iter().map(|x| x.len() - 1).sum::<usize>(), frames[0].data.len());
//! ```
#![allow(unsafe_code)]

use std::mem::MaybeUninit;
use std::os::raw::{c_int, c_ulong};

use vpx_sys as vpx;

/// Encoder parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Vp8Config {
    /// Picture width (even).
    pub width: u32,
    /// Picture height (even).
    pub height: u32,
    /// Frames per second.
    pub fps: u32,
    /// Target bit rate, kbit/s.
    pub kbps: u32,
    /// A keyframe every this many frames (the first frame is one).
    pub keyframe_interval: u32,
    /// Largest keyframe as a multiple of a delta frame's budget.
    pub keyframe_factor: f64,
    /// Frames to encode.
    pub frames: u32,
    /// Picture seed.
    pub seed: u64,
}

impl Default for Vp8Config {
    /// 640×360 at 30 fps, 1500 kbit/s, a keyframe every 60 frames of at most 4× a delta frame.
    fn default() -> Self {
        Self {
            width: 640,
            height: 360,
            fps: 30,
            kbps: 1500,
            keyframe_interval: 60,
            keyframe_factor: 4.0,
            frames: 30,
            seed: 1,
        }
    }
}

/// One encoded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedFrame {
    /// The VP8 frame.
    pub data: Vec<u8>,
    /// Whether it is a keyframe.
    pub keyframe: bool,
}

/// libvpx refused something.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Vp8Error {
    /// A libvpx call returned an error code.
    #[error("libvpx {call} failed: error {code}")]
    Codec {
        /// The call.
        call: &'static str,
        /// libvpx's `vpx_codec_err_t`.
        code: u32,
    },
    /// Width or height odd, zero or too large.
    #[error("picture {0}x{1}: even sizes from 16 to 4096")]
    Size(u32, u32),
    /// The encoder produced no frame for a picture (it must not drop frames here).
    #[error("no frame out for picture {0}")]
    NoFrame(u32),
}

fn check(call: &'static str, e: vpx::vpx_codec_err_t) -> Result<(), Vp8Error> {
    if e == vpx::vpx_codec_err_t::VPX_CODEC_OK {
        Ok(())
    } else {
        Err(Vp8Error::Codec {
            call,
            code: e as u32,
        })
    }
}

/// An initialised libvpx VP8 encoder context; destroyed on drop.
struct Encoder {
    ctx: Box<MaybeUninit<vpx::vpx_codec_ctx_t>>,
}

impl Encoder {
    fn new(c: &Vp8Config) -> Result<Self, Vp8Error> {
        let mut cfg = MaybeUninit::<vpx::vpx_codec_enc_cfg_t>::zeroed();
        // SAFETY: `vpx_codec_vp8_cx` returns a static interface; `cfg` is valid, writable
        // storage for the configuration that `vpx_codec_enc_config_default` fills in.
        check("enc_config_default", unsafe {
            vpx::vpx_codec_enc_config_default(vpx::vpx_codec_vp8_cx(), cfg.as_mut_ptr(), 0)
        })?;
        // SAFETY: initialised by the successful call above.
        let mut cfg = unsafe { cfg.assume_init() };
        cfg.g_w = c.width;
        cfg.g_h = c.height;
        cfg.g_timebase.num = 1;
        cfg.g_timebase.den = c.fps.max(1) as c_int;
        cfg.rc_target_bitrate = c.kbps.max(8);
        cfg.rc_end_usage = vpx::vpx_rc_mode::VPX_CBR;
        cfg.g_error_resilient = vpx::VPX_ERROR_RESILIENT_DEFAULT;
        cfg.g_lag_in_frames = 0;
        cfg.g_threads = 1;
        // Every picture becomes a frame (no frame dropping by the rate control), keyframes
        // only where the source asks for one.
        cfg.rc_dropframe_thresh = 0;
        cfg.kf_mode = vpx::vpx_kf_mode::VPX_KF_DISABLED;
        let mut ctx = Box::new(MaybeUninit::<vpx::vpx_codec_ctx_t>::zeroed());
        // SAFETY: `ctx` is zeroed, heap-pinned storage for the context, `cfg` a valid
        // configuration; the ABI version is the one the bindings were generated for.
        check("enc_init", unsafe {
            vpx::vpx_codec_enc_init_ver(
                ctx.as_mut_ptr(),
                vpx::vpx_codec_vp8_cx(),
                &raw const cfg,
                0,
                vpx::VPX_ENCODER_ABI_VERSION as c_int,
            )
        })?;
        let enc = Self { ctx };
        let intra_pct = (c.keyframe_factor.clamp(1.0, 50.0) * 100.0) as c_int;
        // Fast real-time speed; keyframes capped relative to the per-frame budget.
        for (id, value) in [
            (
                vpx::vp8e_enc_control_id::VP8E_SET_CPUUSED as c_int,
                8 as c_int,
            ),
            (
                vpx::vp8e_enc_control_id::VP8E_SET_MAX_INTRA_BITRATE_PCT as c_int,
                intra_pct,
            ),
        ] {
            // SAFETY: the context is initialised; both controls take one `int` argument.
            check("codec_control", unsafe {
                vpx::vpx_codec_control_(enc.ctx_ptr(), id, value)
            })?;
        }
        Ok(enc)
    }

    fn ctx_ptr(&self) -> *mut vpx::vpx_codec_ctx_t {
        // libvpx takes a mutable pointer for every call; the box is never moved out.
        self.ctx.as_ptr().cast_mut()
    }

    /// Encodes one I420 picture (`planes` holds Y, U and V back to back); returns the frames
    /// libvpx emits for it.
    fn encode(
        &mut self,
        c: &Vp8Config,
        planes: &mut [u8],
        pts: i64,
        keyframe: bool,
    ) -> Result<Vec<EncodedFrame>, Vp8Error> {
        let mut img = MaybeUninit::<vpx::vpx_image_t>::zeroed();
        // SAFETY: `planes` is a w×h I420 buffer (checked by the caller's allocation) that
        // outlives the image descriptor, which only points into it.
        let wrapped = unsafe {
            vpx::vpx_img_wrap(
                img.as_mut_ptr(),
                vpx::vpx_img_fmt::VPX_IMG_FMT_I420,
                c.width,
                c.height,
                1,
                planes.as_mut_ptr(),
            )
        };
        if wrapped.is_null() {
            return Err(Vp8Error::Codec {
                call: "img_wrap",
                code: 0,
            });
        }
        let flags = if keyframe {
            vpx::VPX_EFLAG_FORCE_KF as vpx::vpx_enc_frame_flags_t
        } else {
            0
        };
        // SAFETY: the context is initialised and the image descriptor valid (above).
        check("encode", unsafe {
            vpx::vpx_codec_encode(
                self.ctx_ptr(),
                img.as_ptr(),
                pts,
                1,
                flags,
                c_ulong::from(vpx::VPX_DL_REALTIME),
            )
        })?;
        let mut out = Vec::new();
        let mut iter: vpx::vpx_codec_iter_t = std::ptr::null();
        loop {
            // SAFETY: the context is initialised; `iter` is the iterator libvpx expects.
            let pkt = unsafe { vpx::vpx_codec_get_cx_data(self.ctx_ptr(), &raw mut iter) };
            if pkt.is_null() {
                break;
            }
            // SAFETY: a non-null packet from libvpx is valid until the next encoder call.
            let pkt = unsafe { &*pkt };
            if pkt.kind != vpx::vpx_codec_cx_pkt_kind::VPX_CODEC_CX_FRAME_PKT {
                continue;
            }
            // SAFETY: `frame` is the union's member for a frame packet; `buf`/`sz` describe
            // bytes libvpx owns until the next call, copied at once.
            let (data, flags) = unsafe {
                let f = pkt.data.frame;
                (
                    std::slice::from_raw_parts(f.buf.cast::<u8>(), f.sz as usize).to_vec(),
                    f.flags,
                )
            };
            out.push(EncodedFrame {
                data,
                keyframe: flags & vpx::VPX_FRAME_IS_KEY != 0,
            });
        }
        Ok(out)
    }
}

impl Drop for Encoder {
    fn drop(&mut self) {
        // SAFETY: the context was initialised in `new` and is destroyed once.
        let _ = unsafe { vpx::vpx_codec_destroy(self.ctx_ptr()) };
    }
}

/// Fills `planes` (I420) with picture `n`: a gradient moving two pixels a frame under fresh
/// noise, grey chroma with a slower drift.
fn draw(c: &Vp8Config, n: u32, rng: &mut u64, planes: &mut [u8]) {
    let (w, h) = (c.width as usize, c.height as usize);
    let (luma, chroma) = planes.split_at_mut(w * h);
    for (y, row) in luma.chunks_exact_mut(w).enumerate() {
        for (x, p) in row.iter_mut().enumerate() {
            *rng ^= *rng << 13;
            *rng ^= *rng >> 7;
            *rng ^= *rng << 17;
            let base = ((x + 2 * n as usize + y / 2) % 256) as u8;
            *p = base.wrapping_add((*rng & 0x1f) as u8);
        }
    }
    for (i, p) in chroma.iter_mut().enumerate() {
        *p = 128u8.wrapping_add(((i / 64 + n as usize / 4) % 32) as u8);
    }
}

/// Encodes `c.frames` pictures; a keyframe every `c.keyframe_interval` frames, the first
/// included. One frame per picture.
pub fn encode_stream(c: &Vp8Config) -> Result<Vec<EncodedFrame>, Vp8Error> {
    let ok = |v: u32| (16..=4096).contains(&v) && v.is_multiple_of(2);
    if !ok(c.width) || !ok(c.height) {
        return Err(Vp8Error::Size(c.width, c.height));
    }
    let mut enc = Encoder::new(c)?;
    let (w, h) = (c.width as usize, c.height as usize);
    let mut planes = vec![0u8; w * h * 3 / 2];
    let mut rng = c.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut frames = Vec::with_capacity(c.frames as usize);
    for n in 0..c.frames {
        draw(c, n, &mut rng, &mut planes);
        let key = n % c.keyframe_interval.max(1) == 0;
        let mut out = enc.encode(c, &mut planes, i64::from(n), key)?;
        if out.is_empty() {
            return Err(Vp8Error::NoFrame(n));
        }
        // One picture, one frame (no lag, no spatial layers): keep the first if ever more.
        frames.push(out.swap_remove(0));
    }
    Ok(frames)
}

/// The RTP payloads of one VP8 frame, each at most `max_payload` bytes: the RFC 7741 payload
/// descriptor (one byte: `S` = start of partition 0 on the first packet, partition id 0) and the
/// next chunk of the frame.
pub fn rtp_payloads(frame: &[u8], max_payload: usize) -> Vec<Vec<u8>> {
    let room = max_payload.saturating_sub(1).max(1);
    let n = frame.len().div_ceil(room).max(1);
    // Even chunks (as libwebrtc's packetizer): no tiny last packet.
    let chunk = frame.len().div_ceil(n).max(1);
    let mut out: Vec<Vec<u8>> = frame
        .chunks(chunk)
        .enumerate()
        .map(|(i, c)| {
            let mut p = Vec::with_capacity(c.len() + 1);
            p.push(if i == 0 { 0x10 } else { 0x00 });
            p.extend_from_slice(c);
            p
        })
        .collect();
    if out.is_empty() {
        out.push(vec![0x10]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rate_control_hits_the_target_and_keyframes_are_larger() {
        let c = Vp8Config {
            frames: 120,
            ..Vp8Config::default()
        };
        let f = encode_stream(&c).unwrap();
        assert_eq!(f.len(), 120);
        let keys: Vec<usize> = (0..f.len()).filter(|&i| f[i].keyframe).collect();
        assert_eq!(keys, vec![0, 60]);
        // VP8 keyframes start with a 3-byte tag whose bit 0 is 0, then the start code.
        assert_eq!(&f[60].data[3..6], &[0x9d, 0x01, 0x2a]);
        assert_eq!(f[60].data[0] & 1, 0);
        assert_eq!(f[61].data[0] & 1, 1);
        // The second second (after the start-up) near the 1500 kbit/s target.
        let bytes: usize = f[60..120].iter().map(|x| x.data.len()).sum();
        let kbps = bytes as f64 * 8.0 / 2.0 / 1000.0;
        assert!((900.0..2200.0).contains(&kbps), "{kbps} kbit/s");
        let delta: f64 = f[61..120].iter().map(|x| x.data.len() as f64).sum::<f64>() / 59.0;
        assert!(
            f[60].data.len() as f64 > 1.5 * delta,
            "{} vs {delta}",
            f[60].data.len()
        );
    }

    #[test]
    fn odd_sizes_are_refused() {
        let c = Vp8Config {
            width: 641,
            ..Vp8Config::default()
        };
        assert_eq!(encode_stream(&c), Err(Vp8Error::Size(641, 360)));
    }

    proptest! {
        #[test]
        fn payloads_cover_the_frame_in_order(len in 0usize..20_000, max in 2usize..1500) {
            let frame: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let p = rtp_payloads(&frame, max);
            prop_assert!(p.iter().all(|x| x.len() <= max.max(2)));
            prop_assert_eq!(p[0][0], 0x10);
            prop_assert!(p[1..].iter().all(|x| x[0] == 0));
            let joined: Vec<u8> = p.iter().flat_map(|x| x[1..].to_vec()).collect();
            prop_assert_eq!(joined, frame);
        }
    }
}
