//! Where a client agrees to send sidekick frames.
//!
//! The discovery reply names the proxy's sidekick address, and whoever answered on the path
//! chose it. A client sends its sidekick frames only to that address, and refuses it when it
//! points back into the client's own host or at a group of hosts: loopback, unspecified,
//! multicast, broadcast, port 0, or one of the host's own addresses (which would make the
//! client attack its own services). Any other address costs at most the bounded Init
//! retransmissions before the client falls back (`docs/protocol.md` §11.3).

use std::net::{IpAddr, SocketAddr};

/// Why a sidekick address was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum AddrRefusal {
    /// 127.0.0.0/8, ::1.
    #[error("loopback address")]
    Loopback,
    /// 0.0.0.0, ::.
    #[error("unspecified address")]
    Unspecified,
    /// 224.0.0.0/4, ff00::/8.
    #[error("multicast address")]
    Multicast,
    /// 255.255.255.255.
    #[error("broadcast address")]
    Broadcast,
    /// Port 0.
    #[error("port 0")]
    PortZero,
    /// One of the client host's own addresses.
    #[error("an address of this host")]
    Local,
}

/// Checks the sidekick address of a discovery reply; `local` are the client host's own
/// addresses (IPv4-mapped IPv6 forms are compared as IPv4).
///
/// ```
/// use sidekick_protocol::sidekick_addr::{check_sidekick_addr, AddrRefusal};
/// let local = ["10.0.0.2".parse().unwrap()];
/// assert_eq!(check_sidekick_addr("10.0.0.1:7788".parse().unwrap(), &local), Ok(()));
/// assert_eq!(check_sidekick_addr("127.0.0.1:22".parse().unwrap(), &local), Err(AddrRefusal::Loopback));
/// assert_eq!(check_sidekick_addr("10.0.0.2:53".parse().unwrap(), &local), Err(AddrRefusal::Local));
/// ```
pub fn check_sidekick_addr(addr: SocketAddr, local: &[IpAddr]) -> Result<(), AddrRefusal> {
    let ip = addr.ip().to_canonical();
    if addr.port() == 0 {
        return Err(AddrRefusal::PortZero);
    }
    if ip.is_loopback() {
        return Err(AddrRefusal::Loopback);
    }
    if ip.is_unspecified() {
        return Err(AddrRefusal::Unspecified);
    }
    if ip.is_multicast() {
        return Err(AddrRefusal::Multicast);
    }
    if let IpAddr::V4(v4) = ip
        && v4.is_broadcast()
    {
        return Err(AddrRefusal::Broadcast);
    }
    if local.iter().any(|l| l.to_canonical() == ip) {
        return Err(AddrRefusal::Local);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn each_refusal() {
        let local: Vec<IpAddr> = vec!["192.168.1.20".parse().unwrap(), "fe80::1".parse().unwrap()];
        let cases = [
            ("127.0.0.1:7788", Err(AddrRefusal::Loopback)),
            ("127.9.9.9:7788", Err(AddrRefusal::Loopback)),
            ("[::1]:7788", Err(AddrRefusal::Loopback)),
            ("[::ffff:127.0.0.1]:7788", Err(AddrRefusal::Loopback)),
            ("0.0.0.0:7788", Err(AddrRefusal::Unspecified)),
            ("[::]:7788", Err(AddrRefusal::Unspecified)),
            ("239.1.2.3:7788", Err(AddrRefusal::Multicast)),
            ("[ff02::1]:7788", Err(AddrRefusal::Multicast)),
            ("255.255.255.255:7788", Err(AddrRefusal::Broadcast)),
            ("192.168.1.1:0", Err(AddrRefusal::PortZero)),
            ("192.168.1.20:7788", Err(AddrRefusal::Local)),
            ("[::ffff:192.168.1.20]:7788", Err(AddrRefusal::Local)),
            ("[fe80::1]:7788", Err(AddrRefusal::Local)),
            ("192.168.1.1:7788", Ok(())),
            ("[fe80::2]:7788", Ok(())),
            ("203.0.113.9:443", Ok(())),
        ];
        for (a, want) in cases {
            assert_eq!(check_sidekick_addr(a.parse().unwrap(), &local), want, "{a}");
        }
    }

    proptest! {
        #[test]
        fn accepted_addresses_are_never_loopback_multicast_or_local(
            v4 in any::<[u8; 4]>(), v6 in any::<[u8; 16]>(), port in any::<u16>(), mapped in any::<bool>(),
        ) {
            let local = [IpAddr::from(v4)];
            for ip in [IpAddr::from(v4), IpAddr::from(v6)] {
                let ip = match (ip, mapped) {
                    (IpAddr::V4(a), true) => IpAddr::V6(a.to_ipv6_mapped()),
                    (ip, _) => ip,
                };
                let addr = SocketAddr::new(ip, port);
                if check_sidekick_addr(addr, &local).is_ok() {
                    let c = ip.to_canonical();
                    prop_assert!(!c.is_loopback() && !c.is_multicast() && !c.is_unspecified());
                    prop_assert!(port != 0);
                    prop_assert!(c != IpAddr::from(v4));
                }
            }
        }
    }
}
