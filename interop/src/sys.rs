//! Thin wrappers over the Linux system calls the lab needs and `std` does not offer:
//! `setns` into a named network namespace, AF_PACKET raw sockets, `ppoll`, timer slack and
//! process liveness checks, and whether a port is bound in a namespace.
// The lab must enter network namespaces and open AF_PACKET sockets, which only exist as raw
// system calls (libc FFI); every unsafe block below states why it is sound.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Path of a named network namespace (as created by `ip netns add`).
pub fn netns_path(name: &str) -> String {
    format!("/run/netns/{name}")
}

/// Moves the *calling thread* into the named network namespace. Sockets the thread creates
/// afterwards live in that namespace and keep it wherever they are used.
pub fn enter_netns(name: &str) -> io::Result<()> {
    let f = File::open(netns_path(name))?;
    // SAFETY: setns with a valid, open namespace fd; it only changes this thread's namespace.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Runs `f` on a fresh thread that first enters the named network namespace, and returns its
/// result. Use it to create sockets inside a namespace from a process outside it.
pub fn in_netns<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    let name = name.to_string();
    std::thread::spawn(move || {
        enter_netns(&name)?;
        f()
    })
    .join()
    .map_err(|_| io::Error::other("namespace thread panicked"))?
}

/// Whether a socket of the calling thread's network namespace is bound to local `port`: a UDP
/// socket, or a TCP socket listening (`/proc/thread-self/net/{udp,udp6,tcp,tcp6}`, read in the
/// thread's own namespace, unlike `/proc/self/net`).
pub fn port_bound(port: u16) -> bool {
    ["udp", "udp6", "tcp", "tcp6"].iter().any(|table| {
        std::fs::read_to_string(format!("/proc/thread-self/net/{table}"))
            .is_ok_and(|text| table_has_port(&text, port, table.starts_with("tcp")))
    })
}

/// Whether a `/proc/net/{udp,tcp}[6]` table lists a socket on local `port` (TCP: listening,
/// state 0A).
fn table_has_port(text: &str, port: u16, tcp: bool) -> bool {
    let want = format!("{port:04X}");
    text.lines().skip(1).any(|line| {
        let mut cols = line.split_whitespace();
        let local = cols.nth(1).unwrap_or_default();
        let state = cols.nth(1).unwrap_or_default();
        local.rsplit(':').next() == Some(want.as_str()) && (!tcp || state == "0A")
    })
}

/// Waits until a socket of namespace `ns` is bound to `port` ([`port_bound`]), polling every
/// 10 ms; false if `timeout` passed first.
pub fn wait_port_bound(ns: &str, port: u16, timeout: Duration) -> io::Result<bool> {
    in_netns(ns, move || Ok(poll_port_bound(port, timeout)))
}

/// [`wait_port_bound`] in the calling thread's namespace.
fn poll_port_bound(port: u16, timeout: Duration) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if port_bound(port) {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Reduces the calling thread's timer slack to 1 ns so that sleeps wake on time
/// (the default slack is 50 µs).
pub fn set_min_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument and touches only this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// CLOCK_MONOTONIC in nanoseconds: one clock for every namespace of the machine, so two
/// processes in different namespaces can measure one-way delays between them.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &raw mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Whether a process with this pid exists.
pub fn process_alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks for existence and permission.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Sends a signal to a process (errors ignored: it may be gone already).
pub fn signal(pid: i32, sig: i32) {
    if pid > 0 {
        // SAFETY: plain kill(2) on a positive pid.
        unsafe { libc::kill(pid, sig) };
    }
}

/// Interface index of `name` in the calling thread's namespace.
pub fn if_index(name: &str) -> io::Result<u32> {
    let c =
        std::ffi::CString::new(name).map_err(|_| io::Error::other("interface name with NUL"))?;
    // SAFETY: if_nametoindex reads a valid NUL-terminated string.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(idx)
    }
}

const ETH_P_ALL: u16 = 0x0003;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;

/// A non-blocking AF_PACKET raw socket bound to one interface (all protocols, promiscuous).
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
}

/// One frame received from a [`PacketSocket`].
#[derive(Debug, Clone, Copy)]
pub struct RecvInfo {
    /// Frame length in bytes (Ethernet header included).
    pub len: usize,
    /// The kernel had not filled in the L4 checksum (CHECKSUM_PARTIAL, TP_STATUS_CSUMNOTREADY).
    pub csum_not_ready: bool,
}

fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    val: libc::c_int,
) -> io::Result<()> {
    // SAFETY: passes a pointer to a live c_int and its size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&raw const val).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

impl PacketSocket {
    /// Opens a socket on interface `ifname` of the calling thread's namespace.
    pub fn open(ifname: &str) -> io::Result<Self> {
        let ifindex = if_index(ifname)?;
        let proto = ETH_P_ALL.to_be();
        // SAFETY: socket(2) with constant arguments; the fd is owned right below.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                i32::from(proto),
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: raw is a fresh, valid fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: sockaddr_ll is plain old data; zeroed is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: binds with a pointer to a properly initialised sockaddr_ll and its size.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&raw const sll).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // Do not see frames we (or anyone) transmit on this interface; ignore failure on old
        // kernels, the receive path also filters PACKET_OUTGOING.
        let _ = setsockopt_int(fd.as_raw_fd(), libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1);
        setsockopt_int(fd.as_raw_fd(), libc::SOL_PACKET, libc::PACKET_AUXDATA, 1)?;
        // Deep buffers: the element must not drop frames the emulated queue would have held.
        let _ = setsockopt_int(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            8 << 20,
        );
        let _ = setsockopt_int(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUFFORCE,
            8 << 20,
        );
        // SAFETY: packet_mreq is plain old data; zeroed is valid.
        let mut mreq: libc::packet_mreq = unsafe { std::mem::zeroed() };
        mreq.mr_ifindex = ifindex as i32;
        mreq.mr_type = libc::PACKET_MR_PROMISC as u16;
        // SAFETY: pointer to a live packet_mreq and its size.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_ADD_MEMBERSHIP,
                (&raw const mreq).cast(),
                size_of::<libc::packet_mreq>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(PacketSocket { fd })
    }

    /// Receives one frame into `buf`; `Ok(None)` when nothing is pending. Frames this host
    /// transmitted (PACKET_OUTGOING) are skipped.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<RecvInfo>> {
        loop {
            // SAFETY: zeroed sockaddr_ll / msghdr are valid plain-old-data values.
            let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut cbuf = [0u64; 16];
            let mut iov = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            };
            // SAFETY: as above.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_name = (&raw mut sll).cast();
            msg.msg_namelen = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            msg.msg_iov = &raw mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = cbuf.as_mut_ptr().cast();
            msg.msg_controllen = size_of_val(&cbuf);
            // SAFETY: every pointer in msg refers to live buffers of the stated sizes.
            let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &raw mut msg, libc::MSG_TRUNC) };
            if n < 0 {
                let e = io::Error::last_os_error();
                return match e.kind() {
                    io::ErrorKind::WouldBlock => Ok(None),
                    io::ErrorKind::Interrupted => continue,
                    _ => Err(e),
                };
            }
            if sll.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            let n = n as usize;
            if n > buf.len() {
                // Truncated (a GSO/GRO super-frame larger than our buffer): cannot forward.
                return Err(io::Error::other(format!("frame of {n} bytes truncated")));
            }
            let mut csum_not_ready = false;
            // SAFETY: CMSG_* walk the control buffer the kernel filled, bounded by msg_controllen.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(&raw const msg);
                while !c.is_null() {
                    if (*c).cmsg_level == libc::SOL_PACKET && (*c).cmsg_type == libc::PACKET_AUXDATA
                    {
                        let aux: libc::tpacket_auxdata =
                            std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                        csum_not_ready = aux.tp_status & TP_STATUS_CSUMNOTREADY != 0;
                    }
                    c = libc::CMSG_NXTHDR(&raw const msg, c);
                }
            }
            return Ok(Some(RecvInfo {
                len: n,
                csum_not_ready,
            }));
        }
    }

    /// Sends one frame out of the bound interface.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: send(2) with a pointer to the live frame buffer and its length.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// The raw fd (for polling).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Waits until one of `fds` is readable or `timeout` passes (nanosecond resolution).
/// Returns whether any fd is readable.
pub fn poll_readable(fds: &[RawFd], timeout: Duration) -> io::Result<bool> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: pfds is a live array of pollfd of the given length; ts is a valid timespec.
    let n = unsafe {
        libc::ppoll(
            pfds.as_mut_ptr(),
            pfds.len() as libc::nfds_t,
            &raw const ts,
            std::ptr::null(),
        )
    };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(n > 0)
}

/// Sets a socket's receive and send buffers to `bytes` (as root, beyond the sysctl limits).
pub fn set_socket_buffers(fd: RawFd, bytes: i32) {
    let _ = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, bytes);
    let _ = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, bytes);
}

/// Gives the calling thread real-time priority (SCHED_FIFO, `prio`), so link elements and probe
/// receivers keep sub-millisecond timing on a loaded machine. Kernel RT throttling still leaves
/// 5 % of each CPU to normal tasks. Returns whether it worked (needs root / CAP_SYS_NICE).
pub fn set_realtime(prio: i32) -> bool {
    let p = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: sched_setscheduler on pid 0 (the calling thread) with a valid sched_param.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &raw const p) == 0 }
}

/// Returns the calling thread to the normal scheduler (undoes [`set_realtime`]).
pub fn set_normal() {
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler on the calling thread with a valid sched_param.
    unsafe {
        libc::sched_setscheduler(0, libc::SCHED_OTHER, &raw const p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UDP: &str = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  712: 00000000:1151 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 123 2 0000000000000000 0
";
    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1151 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 20 4 30 10 -1
   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 100 0 0 10 0
";

    #[test]
    fn a_udp_socket_on_the_port_counts_and_a_tcp_socket_only_when_listening() {
        assert!(table_has_port(UDP, 4433, false));
        assert!(!table_has_port(UDP, 4434, false));
        // 4433 is only a connected socket's local port here; 22 listens.
        assert!(!table_has_port(TCP, 4433, true));
        assert!(table_has_port(TCP, 22, true));
        assert!(!table_has_port("", 4433, false));
    }

    #[test]
    fn the_wait_ends_when_the_port_is_bound_or_at_the_timeout() {
        // A free port, bound 100 ms after the wait starts.
        let port = std::net::UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let binder = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            let sock = std::net::UdpSocket::bind(("127.0.0.1", port)).unwrap();
            std::thread::sleep(Duration::from_millis(500));
            drop(sock);
        });
        let start = std::time::Instant::now();
        assert!(poll_port_bound(port, Duration::from_secs(5)));
        assert!(start.elapsed() >= Duration::from_millis(100));
        binder.join().unwrap();
        let start = std::time::Instant::now();
        assert!(!poll_port_bound(port, Duration::from_millis(50)));
        assert!(start.elapsed() >= Duration::from_millis(50));
    }

    #[test]
    fn a_bound_socket_of_this_namespace_is_seen() {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = sock.local_addr().unwrap().port();
        assert!(port_bound(port));
        drop(sock);
        assert!(!port_bound(port));
    }
}
