//! Socket addresses across the boundary: `struct sockaddr_in` / `sockaddr_in6` from C, and
//! `struct sockaddr_storage` to C.

// FFI boundary: reads and writes C socket-address structures; every unsafe block states why the
// access is in bounds.
#![allow(unsafe_code)]

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use crate::ffi::SkStatus;

/// Reads a `sockaddr_in` / `sockaddr_in6` from C.
///
/// # Safety
/// `addr` is null or valid for `len` byte reads.
pub(crate) unsafe fn sockaddr_to_rust(
    addr: *const libc::sockaddr,
    len: usize,
) -> Result<SocketAddr, SkStatus> {
    if addr.is_null() {
        return Err(SkStatus::NullPointer);
    }
    let family_end =
        std::mem::offset_of!(libc::sockaddr, sa_family) + size_of::<libc::sa_family_t>();
    if len < family_end {
        return Err(SkStatus::InvalidArgument);
    }
    // SAFETY: `addr` is valid for `len >= family_end` bytes; read_unaligned tolerates any
    // alignment of the caller's buffer.
    let family = unsafe {
        std::ptr::read_unaligned(
            addr.cast::<u8>()
                .add(std::mem::offset_of!(libc::sockaddr, sa_family))
                .cast::<libc::sa_family_t>(),
        )
    };
    match i32::from(family) {
        libc::AF_INET if len >= size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says sockaddr_in and `len` covers it.
            let sin = unsafe { std::ptr::read_unaligned(addr.cast::<libc::sockaddr_in>()) };
            let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            Ok(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 if len >= size_of::<libc::sockaddr_in6>() => {
            // SAFETY: the family says sockaddr_in6 and `len` covers it.
            let sin6 = unsafe { std::ptr::read_unaligned(addr.cast::<libc::sockaddr_in6>()) };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Ok(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => Err(SkStatus::InvalidArgument),
    }
}

/// Writes a socket address as a `sockaddr_storage` and its length.
pub(crate) fn sockaddr_from_rust(addr: SocketAddr) -> (libc::sockaddr_storage, usize) {
    // SAFETY: sockaddr_storage is plain old data for which all-zero bytes are a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            // SAFETY: all-zero bytes are a valid sockaddr_in.
            let mut sin: libc::sockaddr_in = unsafe { std::mem::zeroed() };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr.s_addr = u32::from(*a.ip()).to_be();
            // SAFETY: sockaddr_storage is larger than and aligned at least as sockaddr_in.
            unsafe {
                std::ptr::write((&raw mut storage).cast::<libc::sockaddr_in>(), sin);
            }
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            // SAFETY: all-zero bytes are a valid sockaddr_in6.
            let mut sin6: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_addr.s6_addr = a.ip().octets();
            sin6.sin6_flowinfo = a.flowinfo();
            sin6.sin6_scope_id = a.scope_id();
            // SAFETY: sockaddr_storage is larger than and aligned at least as sockaddr_in6.
            unsafe {
                std::ptr::write((&raw mut storage).cast::<libc::sockaddr_in6>(), sin6);
            }
            size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_addresses_round_trip_through_sockaddr() {
        for a in ["192.0.2.1:7000", "[2001:db8::5]:443"] {
            let a: SocketAddr = a.parse().unwrap();
            let (s, len) = sockaddr_from_rust(a);
            // SAFETY: `s` is a live sockaddr_storage of at least `len` bytes.
            let back = unsafe { sockaddr_to_rust((&raw const s).cast(), len) };
            assert_eq!(back, Ok(a));
            // SAFETY: as above, with a length that is too short.
            let short = unsafe { sockaddr_to_rust((&raw const s).cast(), len - 1) };
            assert_eq!(short, Err(SkStatus::InvalidArgument));
        }
    }
}
