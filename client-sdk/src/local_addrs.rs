//! The addresses of this host, which a client refuses as a proxy's sidekick address (an
//! impostor answering discovery could otherwise point the client at its own services).
//!
//! Read from the kernel's own tables on Linux (`/proc/net/fib_trie` for IPv4 local routes,
//! `/proc/net/if_inet6` for IPv6); elsewhere, or if they cannot be read, the list is empty and
//! only loopback, unspecified, multicast and broadcast addresses are refused.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The IPv4 addresses of `fib_trie` text that are local host routes (`/32 host LOCAL`).
pub fn parse_fib_trie(text: &str) -> Vec<IpAddr> {
    let mut out = Vec::new();
    let mut last: Option<Ipv4Addr> = None;
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("|-- ") {
            last = rest.trim().parse().ok();
        } else if t.starts_with("/32 host LOCAL")
            && let Some(a) = last
        {
            let a = IpAddr::V4(a);
            if !out.contains(&a) {
                out.push(a);
            }
        }
    }
    out
}

/// The IPv6 addresses of `if_inet6` text (32 hex digits first on each line).
pub fn parse_if_inet6(text: &str) -> Vec<IpAddr> {
    text.lines()
        .filter_map(|l| {
            let hex = l.split_whitespace().next()?;
            let bits = u128::from_str_radix(hex, 16).ok()?;
            (hex.len() == 32).then(|| IpAddr::V6(Ipv6Addr::from(bits)))
        })
        .collect()
}

/// This host's addresses (empty where they cannot be read).
pub fn host_addresses() -> Vec<IpAddr> {
    let mut out = std::fs::read_to_string("/proc/net/fib_trie")
        .map(|t| parse_fib_trie(&t))
        .unwrap_or_default();
    out.extend(
        std::fs::read_to_string("/proc/net/if_inet6")
            .map(|t| parse_if_inet6(&t))
            .unwrap_or_default(),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_tables_are_parsed() {
        let fib = "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 10.0.0.2\n        /32 host LOCAL\n     |-- 10.0.0.255\n        /32 link BROADCAST\nLocal:\n     |-- 10.0.0.2\n        /32 host LOCAL\n     |-- 127.0.0.1\n        /32 host LOCAL\n";
        assert_eq!(
            parse_fib_trie(fib),
            vec![
                "10.0.0.2".parse::<IpAddr>().unwrap(),
                "127.0.0.1".parse().unwrap()
            ]
        );
        let v6 = "00000000000000000000000000000001 01 80 10 80       lo\nfe800000000000000000000000000001 02 40 20 80     eth0\n";
        assert_eq!(
            parse_if_inet6(v6),
            vec!["::1".parse::<IpAddr>().unwrap(), "fe80::1".parse().unwrap()]
        );
    }

    #[test]
    fn this_host_has_its_loopback_address() {
        if std::path::Path::new("/proc/net/fib_trie").exists() {
            assert!(host_addresses().contains(&"127.0.0.1".parse().unwrap()));
        }
    }
}
