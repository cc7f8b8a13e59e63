//! The Linux TCP socket options the TCP baselines need and neither `std` nor `socket2` (without
//! its `all` feature) offers: the congestion controller (`TCP_CONGESTION`), the kernel's
//! connection counters (`TCP_INFO`) and transparent sockets (`IP_TRANSPARENT`, for the
//! split-TCP proxy's TPROXY sockets).
// These options exist only as raw setsockopt/getsockopt calls (libc FFI); every unsafe block
// below states why it is sound.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::AsRawFd;

/// The kernel's counters of one TCP connection (a subset of `struct tcp_info`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpCounters {
    /// Segments sent, retransmissions included (`tcpi_segs_out`).
    pub segs_out: u64,
    /// Segments retransmitted over the connection's life (`tcpi_total_retrans`).
    pub total_retrans: u64,
    /// Smoothed round-trip time, µs (`tcpi_rtt`).
    pub rtt_us: u64,
}

fn setsockopt_bytes(
    fd: &impl AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
    val: &[u8],
) -> io::Result<()> {
    let len = libc::socklen_t::try_from(val.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "option value too long"))?;
    // SAFETY: `val` is a live slice of `len` bytes for the duration of the call; the kernel only
    // reads it.
    let rc = unsafe { libc::setsockopt(fd.as_raw_fd(), level, name, val.as_ptr().cast(), len) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Selects the kernel congestion controller of a TCP socket by name (`cubic`, `reno`, `bbr`):
/// the lab's namespaces inherit the host's default, which need not be CUBIC.
pub fn set_congestion(fd: &impl AsRawFd, name: &str) -> io::Result<()> {
    setsockopt_bytes(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, name.as_bytes())
}

/// Marks an IPv4 socket transparent (`IP_TRANSPARENT`, needs CAP_NET_ADMIN): a listener then
/// accepts connections TPROXY diverted to it whatever their destination, and a client socket may
/// bind a foreign address.
pub fn set_ip_transparent(fd: &impl AsRawFd) -> io::Result<()> {
    setsockopt_bytes(fd, libc::SOL_IP, libc::IP_TRANSPARENT, &1_i32.to_ne_bytes())
}

/// Reads the connection's counters (`TCP_INFO`).
pub fn tcp_counters(fd: &impl AsRawFd) -> io::Result<TcpCounters> {
    // SAFETY: tcp_info is plain old data; all-zero bytes are a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = libc::socklen_t::try_from(std::mem::size_of::<libc::tcp_info>())
        .map_err(|_| io::Error::other("tcp_info size"))?;
    // SAFETY: `info` is a live, writable tcp_info of `len` bytes; the kernel writes at most `len`
    // bytes and stores the length it wrote in `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            std::ptr::addr_of_mut!(info).cast(),
            &raw mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(TcpCounters {
        segs_out: u64::from(info.tcpi_segs_out),
        total_retrans: u64::from(info.tcpi_total_retrans),
        rtt_us: u64::from(info.tcpi_rtt),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read as _, Write as _};
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn cubic_and_counters_on_a_loopback_connection() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        // Unprivileged, only `net.ipv4.tcp_allowed_congestion_control` may be chosen (the lab
        // runs as root).
        if let Err(e) = set_congestion(&c, "cubic") {
            assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}");
        }
        assert!(set_congestion(&c, "no-such-controller").is_err());
        let (mut s, _) = l.accept().unwrap();
        c.write_all(&vec![7u8; 100_000]).unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        assert_eq!(got.len(), 100_000);
        let k = tcp_counters(&c).unwrap();
        assert!(k.segs_out >= 2, "{k:?}");
        assert!(tcp_counters(&s).unwrap().segs_out >= 1);
    }
}
