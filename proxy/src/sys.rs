//! AF_PACKET sockets with a TPACKET_V3 mmap receive ring, or without one (one `recvmsg` per
//! frame, for the lowest latency in bridge mode) (Linux only).
#![allow(unsafe_code)]
// Unsafe is confined to this module: it calls libc (socket, setsockopt, mmap, poll, send) and
// reads the kernel-shared ring memory. Every block carries a SAFETY comment.
//
// Ring layout (include/uapi/linux/if_packet.h): the ring is `block_nr` blocks of `block_size`
// bytes; each block starts with a `tpacket_block_desc` (status, number of packets, offset of the
// first packet); each packet starts with a `tpacket3_hdr` followed by a `sockaddr_ll`, then the
// frame at `tp_mac`. With PACKET_VNET_HDR the 10-byte `virtio_net_hdr` sits right before the frame
// and gives the GSO segment size and the checksum state of super-frames.

pub mod caps;

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::{Ordering, fence};

const TPACKET_V3: libc::c_int = 2;
const PACKET_VERSION: libc::c_int = 10;
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_STATISTICS: libc::c_int = 6;
const PACKET_VNET_HDR: libc::c_int = 15;
const PACKET_FANOUT: libc::c_int = 18;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const PACKET_FANOUT_HASH: u32 = 0;
const PACKET_HOST: u8 = 0;
const PACKET_OUTGOING: u8 = 4;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;
const VIRTIO_NET_HDR_LEN: usize = 10;
const VIRTIO_NET_HDR_GSO_UDP: u8 = 3;
const VIRTIO_NET_HDR_GSO_UDP_L4: u8 = 5;
const ETH_P_ALL: u16 = 0x0003;

/// Ring and socket options.
#[derive(Debug, Clone, Copy)]
pub struct RingOptions {
    /// Block size in bytes (a multiple of the page size).
    pub block_size: u32,
    /// Number of blocks.
    pub block_nr: u32,
    /// Nominal frame size (TPACKET_V3 packs variable-size frames; this bounds the frame count).
    pub frame_size: u32,
    /// Block retire timeout in ms (latency bound when traffic is light).
    pub retire_ms: u32,
    /// Ask for virtio-net headers (GSO size and checksum state of super-frames).
    pub vnet_hdr: bool,
    /// Join a PACKET_FANOUT group (hash mode: the kernel's flow hash is symmetric).
    pub fanout_group: Option<u16>,
    /// Do not capture outgoing frames (bridge mode).
    pub ignore_outgoing: bool,
    /// Capture through the mmap ring (batches of frames, cheapest per frame). Without it every
    /// frame is read by its own `recvmsg` the moment it arrives: a ring block reaches user space
    /// only when full or after its retire timeout (≥ 1 ms), which a bridge would add to the
    /// latency of every forwarded frame and which blurs the timing PEMI infers from.
    pub mmap_ring: bool,
    /// Receive only IPv4 ICMP echo replies (a classic BPF filter, [`ECHO_REPLY_FILTER`]): the
    /// worker's socket for PEMI's calibration replies, beside the fanout.
    pub echo_replies_only: bool,
}

/// A classic BPF program (the `SO_ATTACH_FILTER` form) accepting Ethernet frames that carry an
/// IPv4 ICMP echo reply and nothing else: EtherType 0x0800, protocol 1, ICMP type 0 after the
/// IP header's own length.
pub const ECHO_REPLY_FILTER: [libc::sock_filter; 9] = [
    bpf(0x28, 0, 0, 12),     // ldh [12]: EtherType
    bpf(0x15, 0, 5, 0x0800), // IPv4, else reject
    bpf(0x30, 0, 0, 23),     // ldb [23]: IP protocol
    bpf(0x15, 0, 3, 1),      // ICMP, else reject
    bpf(0xb1, 0, 0, 14),     // ldxb 4*([14]&0xf): IP header length
    bpf(0x50, 0, 0, 14),     // ldb [x+14]: ICMP type
    bpf(0x15, 1, 0, 0),      // echo reply: accept
    bpf(0x06, 0, 0, 0),      // reject
    bpf(0x06, 0, 0, 0xffff), // accept (whole frame)
];

const fn bpf(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

impl Default for RingOptions {
    fn default() -> Self {
        Self {
            block_size: 1 << 20,
            block_nr: 64,
            frame_size: 2048,
            retire_ms: 1,
            vnet_hdr: true,
            fanout_group: None,
            ignore_outgoing: false,
            mmap_ring: true,
            echo_replies_only: false,
        }
    }
}

impl RingOptions {
    /// The ring's frame count and length in bytes, or `InvalidInput` when the sizes are zero or
    /// their products overflow (a configuration must not wrap into a small ring, or panic).
    pub fn layout(&self) -> io::Result<(u32, usize)> {
        let invalid = || io::Error::from(io::ErrorKind::InvalidInput);
        if self.block_size == 0 || self.block_nr == 0 || self.frame_size == 0 {
            return Err(invalid());
        }
        let frame_nr = (self.block_size / self.frame_size)
            .checked_mul(self.block_nr)
            .ok_or_else(invalid)?;
        let len = (self.block_size as usize)
            .checked_mul(self.block_nr as usize)
            .ok_or_else(invalid)?;
        Ok((frame_nr, len))
    }
}

/// Metadata of one captured frame.
#[derive(Debug, Clone, Copy, Default)]
pub struct FrameInfo {
    /// The frame was sent by this host (PACKET_OUTGOING): forwarded towards the link.
    pub outgoing: bool,
    /// The frame is addressed to this interface's own MAC address (PACKET_HOST): traffic for
    /// the host itself, such as datagrams to the proxy's sidekick socket, which a bridge
    /// delivers locally and does not forward.
    pub to_host: bool,
    /// The kernel left the checksum partial.
    pub csum_not_ready: bool,
    /// GSO segment size of a UDP super-frame, from the virtio-net header.
    pub gso_size: Option<u16>,
    /// Original length on the wire (may exceed the captured length).
    pub wire_len: u32,
    /// The raw virtio-net header, when enabled (forwarded as is in bridge mode).
    pub vnet: Option<[u8; VIRTIO_NET_HDR_LEN]>,
    /// When the kernel captured the frame (`tp_sec`/`tp_nsec`, CLOCK_REALTIME, ns since the
    /// epoch); 0 when the ring gave none. Frames of a ring block reach user space together, up
    /// to the block's retire timeout after the first of them arrived: this is their real time.
    pub kernel_ts_ns: u64,
}

/// An AF_PACKET socket bound to one interface with a TPACKET_V3 receive ring.
pub struct PacketSocket {
    fd: RawFd,
    /// The mmap ring; `None` when frames are read with `recvmsg` into `rx_buf`.
    ring: Option<NonNull<u8>>,
    rx_buf: Vec<u8>,
    ring_len: usize,
    block_size: usize,
    block_nr: usize,
    next_block: usize,
    vnet: bool,
    ifindex: i32,
}

// SAFETY-free marker: the ring pointer is owned exclusively by this value; moving it to another
// thread is fine (no thread-local state), it is just not shared.
unsafe impl Send for PacketSocket {}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, val: &T) -> io::Result<()> {
    // SAFETY: `val` is a valid, initialised `T` for the duration of the call and the length passed
    // is its exact size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            std::ptr::from_ref(val).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    cvt(r).map(|_| ())
}

/// Interface index of `name`.
pub fn ifindex(name: &str) -> io::Result<i32> {
    let c = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a valid NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(i as i32)
    }
}

/// Request a TPACKET_V3 receive ring on `fd` and map it.
fn map_ring(fd: RawFd, opts: &RingOptions) -> io::Result<(NonNull<u8>, usize)> {
    let (frame_nr, ring_len) = opts.layout()?;
    setsockopt(fd, libc::SOL_PACKET, PACKET_VERSION, &TPACKET_V3)?;
    #[repr(C)]
    struct TpacketReq3 {
        block_size: u32,
        block_nr: u32,
        frame_size: u32,
        frame_nr: u32,
        retire_blk_tov: u32,
        sizeof_priv: u32,
        feature_req_word: u32,
    }
    let req = TpacketReq3 {
        block_size: opts.block_size,
        block_nr: opts.block_nr,
        frame_size: opts.frame_size,
        frame_nr,
        retire_blk_tov: opts.retire_ms,
        sizeof_priv: 0,
        feature_req_word: 0,
    };
    setsockopt(fd, libc::SOL_PACKET, PACKET_RX_RING, &req)?;
    // SAFETY: mapping the ring the kernel just allocated for this fd; length as configured.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            ring_len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let ptr =
        NonNull::new(ptr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
    Ok((ptr, ring_len))
}

impl PacketSocket {
    /// Open a socket on interface `ifname` with a receive ring (or without, see
    /// [`RingOptions::mmap_ring`]). Needs CAP_NET_RAW.
    pub fn open(ifname: &str, opts: RingOptions) -> io::Result<Self> {
        let idx = ifindex(ifname)?;
        // SAFETY: plain socket(2) call.
        let fd = cvt(unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::c_int::from(ETH_P_ALL.to_be()),
            )
        })?;
        let close_on_err = |e: io::Error| {
            // SAFETY: fd is ours and not used after this.
            unsafe { libc::close(fd) };
            e
        };
        let vnet =
            opts.vnet_hdr && setsockopt(fd, libc::SOL_PACKET, PACKET_VNET_HDR, &1i32).is_ok();
        if opts.ignore_outgoing {
            let _ = setsockopt(fd, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, &1i32);
        }
        if opts.echo_replies_only {
            // Before bind: no frame reaches the socket unfiltered.
            let mut filter = ECHO_REPLY_FILTER;
            let prog = libc::sock_fprog {
                len: filter.len() as u16,
                filter: filter.as_mut_ptr(),
            };
            setsockopt(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &prog)
                .map_err(close_on_err)?;
        }
        let (ring, ring_len) = if opts.mmap_ring {
            let (ptr, len) = map_ring(fd, &opts).map_err(close_on_err)?;
            (Some(ptr), len)
        } else {
            // The checksum state of each frame comes with it as PACKET_AUXDATA, its arrival time
            // as SCM_TIMESTAMPNS (exact even when the proxy is scheduled late).
            setsockopt(fd, libc::SOL_PACKET, libc::PACKET_AUXDATA, &1i32).map_err(close_on_err)?;
            let _ = setsockopt(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &1i32);
            (None, 0)
        };
        let mut sock = Self {
            fd,
            ring,
            rx_buf: if ring.is_some() {
                Vec::new()
            } else {
                vec![0u8; VIRTIO_NET_HDR_LEN + 65_536]
            },
            ring_len,
            block_size: opts.block_size as usize,
            block_nr: opts.block_nr as usize,
            next_block: 0,
            vnet,
            ifindex: idx,
        };
        // SAFETY: sockaddr_ll is plain old data; zeroed is a valid initial value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL.to_be();
        sll.sll_ifindex = idx;
        // SAFETY: `sll` is a valid sockaddr_ll and its exact size is passed.
        cvt(unsafe {
            libc::bind(
                fd,
                std::ptr::from_ref(&sll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })?;
        if let Some(g) = opts.fanout_group {
            let arg: u32 = u32::from(g) | (PACKET_FANOUT_HASH << 16);
            setsockopt(fd, libc::SOL_PACKET, PACKET_FANOUT, &arg)?;
        }
        sock.next_block = 0;
        Ok(sock)
    }

    /// Whether virtio-net headers are on (the kernel accepted PACKET_VNET_HDR).
    pub fn has_vnet_hdr(&self) -> bool {
        self.vnet
    }

    /// The raw file descriptor (for poll).
    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// Interface index.
    pub fn ifindex(&self) -> i32 {
        self.ifindex
    }

    fn block_ptr(&self, ring: NonNull<u8>, i: usize) -> *mut u8 {
        // SAFETY: i < block_nr, so the offset stays inside the mapping.
        unsafe { ring.as_ptr().add(i * self.block_size) }
    }

    // Blocks are page-aligned and the status word sits at offset 8: the u32 access is aligned.
    #[allow(clippy::cast_ptr_alignment)]
    fn block_status(&self, ring: NonNull<u8>, i: usize) -> u32 {
        // SAFETY: the block descriptor's status word is at offset 8 of the block, inside the
        // mapping and 4-byte aligned; the kernel writes it concurrently, hence a volatile read.
        let s = unsafe { std::ptr::read_volatile(self.block_ptr(ring, i).add(8).cast::<u32>()) };
        fence(Ordering::Acquire);
        s
    }

    /// Process every frame of every ready block (a batch), calling `f` for each; returns the
    /// number of frames. Each block is handed back to the kernel after its frames were processed.
    /// Without a ring, up to 64 × `max_blocks` pending frames are read one by one.
    #[allow(clippy::cast_ptr_alignment)] // see block_status
    pub fn for_each_frame(
        &mut self,
        max_blocks: usize,
        mut f: impl FnMut(FrameInfo, &[u8]),
    ) -> usize {
        let Some(ring) = self.ring else {
            return self.recv_frames(64 * max_blocks, f);
        };
        let mut n = 0;
        for _ in 0..max_blocks.min(self.block_nr) {
            let b = self.next_block;
            if self.block_status(ring, b) & TP_STATUS_USER == 0 {
                break;
            }
            let base = self.block_ptr(ring, b);
            // SAFETY: the block belongs to user space until we write TP_STATUS_KERNEL. All offsets
            // read below are checked against the block size before the memory is touched.
            let block = unsafe { std::slice::from_raw_parts(base.cast_const(), self.block_size) };
            let rd32 = |o: usize| -> Option<u32> {
                block
                    .get(o..o + 4)
                    .map(|s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
            };
            let rd16 = |o: usize| -> Option<u16> {
                block
                    .get(o..o + 2)
                    .map(|s| u16::from_ne_bytes([s[0], s[1]]))
            };
            let num = rd32(12).unwrap_or(0);
            let mut off = rd32(16).unwrap_or(0) as usize;
            for _ in 0..num {
                let (
                    Some(next),
                    Some(sec),
                    Some(nsec),
                    Some(snaplen),
                    Some(len),
                    Some(status),
                    Some(mac),
                ) = (
                    rd32(off),
                    rd32(off + 4),
                    rd32(off + 8),
                    rd32(off + 12),
                    rd32(off + 16),
                    rd32(off + 20),
                    rd16(off + 24),
                )
                else {
                    break;
                };
                let pkttype = block.get(off + 48 + 10).copied().unwrap_or(0);
                let start = off + usize::from(mac);
                let Some(frame) = block.get(start..start + snaplen as usize) else {
                    break;
                };
                let mut info = FrameInfo {
                    outgoing: pkttype == PACKET_OUTGOING,
                    to_host: pkttype == PACKET_HOST,
                    csum_not_ready: status & TP_STATUS_CSUMNOTREADY != 0,
                    gso_size: None,
                    wire_len: len,
                    vnet: None,
                    kernel_ts_ns: u64::from(sec) * 1_000_000_000 + u64::from(nsec),
                };
                if self.vnet
                    && let Some(h) = start
                        .checked_sub(VIRTIO_NET_HDR_LEN)
                        .and_then(|s| block.get(s..start))
                {
                    let mut v = [0u8; VIRTIO_NET_HDR_LEN];
                    v.copy_from_slice(h);
                    if v[1] == VIRTIO_NET_HDR_GSO_UDP_L4 || v[1] == VIRTIO_NET_HDR_GSO_UDP {
                        info.gso_size = Some(u16::from_ne_bytes([v[4], v[5]]));
                    }
                    if v[0] & 1 != 0 {
                        info.csum_not_ready = true;
                    }
                    info.vnet = Some(v);
                }
                f(info, frame);
                n += 1;
                if next == 0 {
                    break;
                }
                off += next as usize;
            }
            fence(Ordering::Release);
            // SAFETY: status word of our block (see block_status); handing the block back.
            unsafe { std::ptr::write_volatile(base.add(8).cast::<u32>(), TP_STATUS_KERNEL) };
            self.next_block = (b + 1) % self.block_nr;
        }
        n
    }

    /// Read up to `max` pending frames with `recvmsg` (the ring-less mode).
    fn recv_frames(&mut self, max: usize, mut f: impl FnMut(FrameInfo, &[u8])) -> usize {
        let mut n = 0;
        while n < max {
            // SAFETY: zeroed sockaddr_ll / msghdr are valid plain-old-data values.
            let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut cbuf = [0u64; 16];
            let mut iov = libc::iovec {
                iov_base: self.rx_buf.as_mut_ptr().cast(),
                iov_len: self.rx_buf.len(),
            };
            // SAFETY: as above.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_name = (&raw mut sll).cast();
            msg.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            msg.msg_iov = &raw mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = cbuf.as_mut_ptr().cast();
            msg.msg_controllen = std::mem::size_of_val(&cbuf);
            // SAFETY: every pointer in msg refers to live buffers of the stated sizes.
            let r = unsafe {
                libc::recvmsg(self.fd, &raw mut msg, libc::MSG_DONTWAIT | libc::MSG_TRUNC)
            };
            let Ok(len) = usize::try_from(r) else {
                break; // EAGAIN (nothing pending) or an error: the caller polls again.
            };
            if len > self.rx_buf.len() {
                continue; // truncated: larger than any frame we can forward
            }
            let mut info = FrameInfo {
                outgoing: sll.sll_pkttype == PACKET_OUTGOING,
                to_host: sll.sll_pkttype == PACKET_HOST,
                wire_len: u32::try_from(len).unwrap_or(u32::MAX),
                ..FrameInfo::default()
            };
            // SAFETY: CMSG_* walk the control buffer the kernel filled, bounded by msg_controllen.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(&raw const msg);
                while !c.is_null() {
                    if (*c).cmsg_level == libc::SOL_PACKET && (*c).cmsg_type == libc::PACKET_AUXDATA
                    {
                        let aux: libc::tpacket_auxdata =
                            std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                        info.csum_not_ready = aux.tp_status & TP_STATUS_CSUMNOTREADY != 0;
                    } else if (*c).cmsg_level == libc::SOL_SOCKET
                        && (*c).cmsg_type == libc::SCM_TIMESTAMPNS
                    {
                        let ts: libc::timespec =
                            std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                        info.kernel_ts_ns = u64::try_from(ts.tv_sec)
                            .unwrap_or(0)
                            .saturating_mul(1_000_000_000)
                            .saturating_add(u64::try_from(ts.tv_nsec).unwrap_or(0));
                    }
                    c = libc::CMSG_NXTHDR(&raw const msg, c);
                }
            }
            let data = &self.rx_buf[..len];
            let frame = if self.vnet {
                let Some((h, frame)) = data.split_first_chunk::<VIRTIO_NET_HDR_LEN>() else {
                    continue;
                };
                if h[1] == VIRTIO_NET_HDR_GSO_UDP_L4 || h[1] == VIRTIO_NET_HDR_GSO_UDP {
                    info.gso_size = Some(u16::from_ne_bytes([h[4], h[5]]));
                }
                if h[0] & 1 != 0 {
                    info.csum_not_ready = true;
                }
                info.vnet = Some(*h);
                info.wire_len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
                frame
            } else {
                data
            };
            f(info, frame);
            n += 1;
        }
        n
    }

    /// Send a complete frame on the interface. With virtio-net headers on, `vnet` is prepended
    /// (all zeros — a plain frame — when `None`).
    pub fn send(&self, frame: &[u8], vnet: Option<&[u8; VIRTIO_NET_HDR_LEN]>) -> io::Result<()> {
        let zero = [0u8; VIRTIO_NET_HDR_LEN];
        let hdr: &[u8] = if self.vnet {
            vnet.unwrap_or(&zero)
        } else {
            &[]
        };
        let iov = [
            libc::iovec {
                iov_base: hdr.as_ptr().cast_mut().cast(),
                iov_len: hdr.len(),
            },
            libc::iovec {
                iov_base: frame.as_ptr().cast_mut().cast(),
                iov_len: frame.len(),
            },
        ];
        // SAFETY: msghdr is plain old data; zeroed then filled with valid pointers to `iov`, which
        // outlives the call. The kernel only reads the buffers.
        let r = unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = iov.as_ptr().cast_mut();
            msg.msg_iovlen = 2;
            libc::sendmsg(self.fd, &raw const msg, 0)
        };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Kernel statistics since the last call: (frames received, frames dropped).
    pub fn stats(&self) -> io::Result<(u32, u32)> {
        let mut st = [0u32; 3];
        let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
        // SAFETY: `st` is a writable buffer of `len` bytes (tpacket_stats_v3 is 3 × u32).
        cvt(unsafe {
            libc::getsockopt(
                self.fd,
                libc::SOL_PACKET,
                PACKET_STATISTICS,
                st.as_mut_ptr().cast(),
                &raw mut len,
            )
        })?;
        Ok((st[0], st[1]))
    }
}

impl Drop for PacketSocket {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping (if any) and closing our own fd exactly once.
        unsafe {
            if let Some(ring) = self.ring {
                libc::munmap(ring.as_ptr().cast(), self.ring_len);
            }
            libc::close(self.fd);
        }
    }
}

/// Wait until one of `fds` is readable or `timeout_ms` passes (-1: forever). Returns the
/// readiness of each fd. EINTR counts as a timeout.
pub fn poll_readable(fds: &[RawFd], timeout_ms: i32) -> io::Result<Vec<bool>> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `p` is a valid array of pollfd of the length passed.
    let r = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(vec![false; fds.len()]);
        }
        return Err(e);
    }
    Ok(p.iter().map(|x| x.revents & libc::POLLIN != 0).collect())
}

/// SIGINT/SIGTERM (stop) and SIGHUP (reload the configuration) delivered through a file
/// descriptor (signalfd): the signals are blocked for the calling thread and every thread it
/// spawns afterwards, so no handler or global flag exists.
pub struct StopSignals {
    fd: RawFd,
}

impl StopSignals {
    /// Block SIGINT, SIGTERM and SIGHUP and open a signalfd for them. Call before spawning
    /// threads.
    pub fn new() -> io::Result<Self> {
        // SAFETY: sigset_t is plain data; sigemptyset/sigaddset initialise it; pthread_sigmask
        // and signalfd get valid pointers to it.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&raw mut set);
            libc::sigaddset(&raw mut set, libc::SIGINT);
            libc::sigaddset(&raw mut set, libc::SIGTERM);
            libc::sigaddset(&raw mut set, libc::SIGHUP);
            let r = libc::pthread_sigmask(libc::SIG_BLOCK, &raw const set, std::ptr::null_mut());
            if r != 0 {
                return Err(io::Error::from_raw_os_error(r));
            }
            let fd = cvt(libc::signalfd(
                -1,
                &raw const set,
                libc::SFD_NONBLOCK | libc::SFD_CLOEXEC,
            ))?;
            Ok(Self { fd })
        }
    }

    /// The fd to poll.
    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// The pending signal (SIGINT, SIGTERM or SIGHUP), if any.
    pub fn pending(&self) -> Option<i32> {
        let mut buf = [0u8; 128];
        // SAFETY: reading into a buffer of the size passed; signalfd_siginfo is 128 bytes.
        let r = unsafe { libc::read(self.fd, buf.as_mut_ptr().cast(), buf.len()) };
        (r == 128).then(|| i32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]))
    }
}

impl Drop for StopSignals {
    fn drop(&mut self) {
        // SAFETY: closing our own fd once.
        unsafe { libc::close(self.fd) };
    }
}

/// Send signal `sig` to process `pid` (the supervisor stops, freezes-checks and kills its worker).
pub fn send_signal(pid: u32, sig: libc::c_int) -> io::Result<()> {
    let pid =
        libc::pid_t::try_from(pid).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: kill(2) with plain integers.
    cvt(unsafe { libc::kill(pid, sig) }).map(|_| ())
}

/// CPU time consumed by the calling thread (CLOCK_THREAD_CPUTIME_ID). Benchmarks use it so that
/// time the thread spends descheduled on a shared machine is not counted.
pub fn thread_cpu_time() -> std::time::Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut ts) };
    if r != 0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_layout_refuses_overflow_instead_of_wrapping() {
        let ok = RingOptions::default().layout().unwrap();
        assert_eq!(ok, (64 * 512, 64 << 20));
        // 512 frames per 1 MiB block × 2^32−1 blocks overflows u32 (it used to wrap, or panic in
        // a debug build).
        let huge = RingOptions {
            block_nr: u32::MAX,
            ..RingOptions::default()
        };
        assert!(huge.layout().is_err());
        let zero = RingOptions {
            frame_size: 0,
            ..RingOptions::default()
        };
        assert!(zero.layout().is_err());
    }
}
