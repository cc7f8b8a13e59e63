//! A transparent split-TCP proxy for the lab's ap: the connection-splitting PEP the papers
//! compare against (PEPsal in Sidekick (NSDI '24) §5.1 and Fig. 6; split TCP in Packrat
//! (CoNEXT '26) Fig. 5a and PEMI's comparison). PEPsal itself is maintained (by CNES) only as
//! source on GitHub; no PEPsal-like package exists in Debian or on crates.io, and the project
//! takes third-party software from registries only, so this one is ours.
//!
//! TCP segments arriving from the client side are diverted to a local listener with nftables'
//! TPROXY; the proxy accepts the client's connection *as the server* (the accepted socket's local
//! address is the original destination), opens a second connection to that destination *as the
//! client* (a transparent socket bound to the client's address), and copies the bytes both ways,
//! half-closes included. Each half runs its own kernel congestion control (CUBIC by default) and
//! recovers its own losses over its own round-trip time, which is what a split PEP is for.
//!
//! - Routed ap: `tproxy` on the client interface's ingress; the server's segments for the
//!   second connection are delivered locally by a `socket transparent` rule; both marked packets
//!   are routed to `lo` by a policy rule (`fwmark → local 0.0.0.0/0`).
//! - Bridged ap (`--bridge br0`, PEMI's file scenario): TCP frames entering the bridge are given
//!   the bridge's MAC (the bridge then passes them up to IP instead of forwarding them, as
//!   ebtables' `redirect` did), those from the client side marked so that the IP chain can tell
//!   the direction; the peers' addresses get host routes and permanent neighbours on the bridge
//!   (the ap has no addresses and the lab no ARP). Other traffic stays bridged. The namespace's
//!   `bridge-nf-call-iptables` is turned off meanwhile (and restored): otherwise br_netfilter runs
//!   the IP hooks on the bridged frame, and the socket TPROXY assigns there is dropped when the
//!   bridge passes the frame up.
//!
//! The rules live in tables of their own (`sidekick_tcp_split`), replaced on start and removed on
//! exit (drop guard), so a trial without the proxy sees the ap unchanged.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context as _, bail};
use tokio::net::{TcpListener, TcpStream};

use crate::tcp_sys::{set_congestion, set_ip_transparent, tcp_counters};

/// Name of the nftables tables (ip and bridge families) the proxy owns.
pub const TABLE: &str = "sidekick_tcp_split";
/// Packet mark of the segments delivered to the proxy's sockets.
pub const MARK: u32 = 0x5e11;
/// Packet mark the bridge chain gives TCP frames from the client side.
pub const CLIENT_SIDE_MARK: u32 = 0x5e12;
/// Routing table holding the `local 0.0.0.0/0 dev lo` route for marked packets.
pub const ROUTE_TABLE: u32 = 94;
/// Bytes buffered per direction of a spliced connection.
const SPLICE_BUFFER: usize = 64 * 1024;

/// A host beyond the bridge: host route and permanent neighbour (bridge mode only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Its IPv4 address.
    pub ip: Ipv4Addr,
    /// Its MAC address (`aa:bb:cc:dd:ee:ff`).
    pub mac: String,
}

impl std::str::FromStr for Peer {
    type Err = String;

    /// `IP,MAC`.
    fn from_str(s: &str) -> Result<Self, String> {
        let (ip, mac) = s
            .split_once(',')
            .ok_or_else(|| format!("{s:?}: expected IP,MAC"))?;
        let ip = ip.parse().map_err(|e| format!("{ip:?}: {e}"))?;
        let ok = mac.split(':').count() == 6
            && mac
                .split(':')
                .all(|b| b.len() == 2 && b.chars().all(|c| c.is_ascii_hexdigit()));
        if !ok {
            return Err(format!("{mac:?}: not a MAC address"));
        }
        Ok(Peer {
            ip,
            mac: mac.to_ascii_lowercase(),
        })
    }
}

/// What the proxy diverts and how.
#[derive(Debug, Clone)]
pub struct SplitConfig {
    /// The ap's interface towards the clients (`lan0`): connections opened from there are split.
    pub client_interface: String,
    /// Local port the diverted connections are accepted on.
    pub port: u16,
    /// Kernel congestion controller of both halves.
    pub cc: String,
    /// At most this many connections at once; more are refused (closed) and counted.
    pub max_connections: usize,
    /// Bridged ap: the bridge device (`br0`).
    pub bridge: Option<String>,
    /// Bridged ap: the hosts to reach through the bridge.
    pub peers: Vec<Peer>,
    /// How long the connection to the server may take.
    pub connect_timeout: Duration,
}

/// The nftables script for `cfg` (`bridge_mac`: the bridge's MAC in bridge mode).
///
/// ```
/// use sidekick_examples::tcp_split::{SplitConfig, ruleset};
/// let cfg = SplitConfig {
///     client_interface: "lan0".into(), port: 7070, cc: "cubic".into(), max_connections: 8,
///     bridge: None, peers: vec![], connect_timeout: std::time::Duration::from_secs(5),
/// };
/// let r = ruleset(&cfg, None);
/// assert!(r.contains("iifname \"lan0\" meta l4proto tcp tproxy to :7070"));
/// assert!(!r.contains("table bridge"));
/// ```
pub fn ruleset(cfg: &SplitConfig, bridge_mac: Option<&str>) -> String {
    let (port, ifc) = (cfg.port, &cfg.client_interface);
    let (bridge, divert) = match bridge_mac {
        Some(mac) => (
            format!(
                "table bridge {TABLE} {{\n  chain prerouting {{\n    \
                 type filter hook prerouting priority -300; policy accept;\n    \
                 iifname \"{ifc}\" ether type ip ip protocol tcp meta mark set {CLIENT_SIDE_MARK:#x}\n    \
                 ether type ip ip protocol tcp meta pkttype set host ether daddr set {mac}\n  }}\n}}\n"
            ),
            format!("meta mark {CLIENT_SIDE_MARK:#x}"),
        ),
        None => (String::new(), format!("iifname \"{ifc}\"")),
    };
    format!(
        "{bridge}table ip {TABLE} {{\n  chain prerouting {{\n    \
         type filter hook prerouting priority mangle; policy accept;\n    \
         meta l4proto tcp socket transparent 1 meta mark set {MARK:#x} accept\n    \
         {divert} meta l4proto tcp tproxy to :{port} meta mark set {MARK:#x} accept\n  }}\n}}\n"
    )
}

fn run(prog: &str, args: &[&str], stdin: Option<&str>) -> anyhow::Result<()> {
    let mut c = Command::new(prog)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {prog}"))?;
    if let (Some(text), Some(mut i)) = (stdin, c.stdin.take()) {
        use std::io::Write as _;
        i.write_all(text.as_bytes())?;
    }
    let out = c.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "{prog} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Where the kernel's `br_netfilter` says whether bridged IPv4 frames traverse the IP hooks.
const BRIDGE_NF_CALL_IPTABLES: &str = "/proc/sys/net/bridge/bridge-nf-call-iptables";

/// The installed rules and routes; removed when dropped.
#[derive(Debug)]
pub struct Diversion {
    cfg: SplitConfig,
    /// Bridge mode: the namespace's `bridge-nf-call-iptables` before the proxy turned it off.
    bridge_nf: Option<String>,
}

impl Diversion {
    /// Installs the rules, policy routing and (bridge mode) peer routes, replacing any left by an
    /// earlier run.
    pub fn install(cfg: &SplitConfig) -> anyhow::Result<Self> {
        let mut d = Diversion {
            cfg: cfg.clone(),
            bridge_nf: None,
        };
        d.remove();
        if cfg.bridge.is_some() {
            // With br_netfilter, bridged frames run the IP hooks in the bridge's path: TPROXY
            // would assign the socket there and the IP layer would drop it again when the
            // bridge passes the frame up. Off, the frames meet the IP hooks once, on delivery.
            if let Ok(old) = std::fs::read_to_string(BRIDGE_NF_CALL_IPTABLES) {
                std::fs::write(BRIDGE_NF_CALL_IPTABLES, "0")
                    .context("turning off bridge-nf-call-iptables")?;
                d.bridge_nf = Some(old.trim().to_string());
            }
        }
        let mac = match &cfg.bridge {
            Some(br) => Some(
                std::fs::read_to_string(format!("/sys/class/net/{br}/address"))
                    .with_context(|| format!("the MAC address of bridge {br}"))?
                    .trim()
                    .to_string(),
            ),
            None => None,
        };
        run("nft", &["-f", "-"], Some(&ruleset(cfg, mac.as_deref())))?;
        let (mark, table) = (format!("{MARK:#x}"), ROUTE_TABLE.to_string());
        run(
            "ip",
            &["rule", "add", "fwmark", &mark, "lookup", &table],
            None,
        )?;
        run(
            "ip",
            &[
                "route",
                "add",
                "local",
                "0.0.0.0/0",
                "dev",
                "lo",
                "table",
                &table,
            ],
            None,
        )?;
        if let Some(br) = &cfg.bridge {
            for p in &cfg.peers {
                let ip = p.ip.to_string();
                run("ip", &["route", "replace", &ip, "dev", br], None)?;
                run(
                    "ip",
                    &[
                        "neigh",
                        "replace",
                        &ip,
                        "lladdr",
                        &p.mac,
                        "dev",
                        br,
                        "nud",
                        "permanent",
                    ],
                    None,
                )?;
            }
        }
        Ok(d)
    }

    /// Removes everything [`Diversion::install`] adds (errors ignored: parts may be absent).
    fn remove(&self) {
        let (mark, table) = (format!("{MARK:#x}"), ROUTE_TABLE.to_string());
        let _ = run("nft", &["delete", "table", "ip", TABLE], None);
        let _ = run("nft", &["delete", "table", "bridge", TABLE], None);
        while run(
            "ip",
            &["rule", "del", "fwmark", &mark, "lookup", &table],
            None,
        )
        .is_ok()
        {}
        let _ = run("ip", &["route", "flush", "table", &table], None);
        if let Some(br) = &self.cfg.bridge {
            for p in &self.cfg.peers {
                let ip = p.ip.to_string();
                let _ = run("ip", &["route", "del", &ip, "dev", br], None);
                let _ = run("ip", &["neigh", "del", &ip, "dev", br], None);
            }
        }
        if let Some(old) = &self.bridge_nf {
            let _ = std::fs::write(BRIDGE_NF_CALL_IPTABLES, old);
        }
    }
}

impl Drop for Diversion {
    fn drop(&mut self) {
        self.remove();
    }
}

/// What the proxy did (its final log line prints these).
#[derive(Debug, Default)]
pub struct SplitCounters {
    /// Client connections accepted.
    pub accepted: AtomicU64,
    /// Of those, connected onwards to their server.
    pub connected: AtomicU64,
    /// Refused because [`SplitConfig::max_connections`] were open.
    pub refused: AtomicU64,
    /// Whose server connection failed.
    pub failed: AtomicU64,
    /// Bytes copied client → server, over finished connections.
    pub bytes_to_server: AtomicU64,
    /// Bytes copied server → client, over finished connections.
    pub bytes_to_client: AtomicU64,
    /// Segments the proxy retransmitted on its client-side halves (`TCP_INFO`), over finished
    /// connections: the last-hop losses it repaired for a download.
    pub client_side_retrans: AtomicU64,
    /// Segments the proxy retransmitted on its server-side halves, over finished connections.
    pub server_side_retrans: AtomicU64,
}

impl SplitCounters {
    /// `key=value` fields for the final log line.
    pub fn fields(&self) -> String {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        format!(
            "accepted={} connected={} refused={} failed={} bytes_to_server={} bytes_to_client={} \
             client_side_retrans={} server_side_retrans={}",
            g(&self.accepted),
            g(&self.connected),
            g(&self.refused),
            g(&self.failed),
            g(&self.bytes_to_server),
            g(&self.bytes_to_client),
            g(&self.client_side_retrans),
            g(&self.server_side_retrans)
        )
    }
}

/// The transparent listener on all addresses, port `cfg.port`.
pub fn listener(cfg: &SplitConfig) -> anyhow::Result<TcpListener> {
    let s = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    set_ip_transparent(&s).context("IP_TRANSPARENT (needs CAP_NET_ADMIN)")?;
    set_congestion(&s, &cfg.cc).with_context(|| format!("TCP_CONGESTION {}", cfg.cc))?;
    s.set_reuse_address(true)?;
    s.set_nonblocking(true)?;
    s.bind(&SocketAddr::from((Ipv4Addr::UNSPECIFIED, cfg.port)).into())?;
    s.listen(128)?;
    Ok(TcpListener::from_std(s.into())?)
}

/// Accepts diverted connections until the future is dropped, splicing each in its own task.
pub async fn serve(
    l: TcpListener,
    cfg: Arc<SplitConfig>,
    counters: Arc<SplitCounters>,
) -> anyhow::Result<()> {
    let open = Arc::new(AtomicUsize::new(0));
    loop {
        let (client, peer) = l.accept().await.context("accept")?;
        counters.accepted.fetch_add(1, Ordering::Relaxed);
        if open.load(Ordering::Relaxed) >= cfg.max_connections {
            counters.refused.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%peer, "refused: {} connections open", cfg.max_connections);
            continue;
        }
        open.fetch_add(1, Ordering::Relaxed);
        let (cfg, counters, open) = (Arc::clone(&cfg), Arc::clone(&counters), Arc::clone(&open));
        tokio::spawn(async move {
            if let Err(e) = splice(client, peer, &cfg, &counters).await {
                tracing::warn!(%peer, "{e:#}");
            }
            open.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

async fn splice(
    mut client: TcpStream,
    peer: SocketAddr,
    cfg: &SplitConfig,
    counters: &SplitCounters,
) -> anyhow::Result<()> {
    // TPROXY keeps the original destination as the accepted socket's local address.
    let SocketAddr::V4(dst) = client.local_addr()? else {
        bail!("IPv6 is not split");
    };
    let SocketAddr::V4(src) = peer else {
        bail!("IPv6 is not split");
    };
    set_congestion(&client, &cfg.cc)?;
    let server =
        match tokio::time::timeout(cfg.connect_timeout, connect_as(src, dst, &cfg.cc)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                counters.failed.fetch_add(1, Ordering::Relaxed);
                return Err(e.context(format!("connecting to {dst}")));
            }
            Err(_) => {
                counters.failed.fetch_add(1, Ordering::Relaxed);
                bail!("connecting to {dst}: timed out");
            }
        };
    counters.connected.fetch_add(1, Ordering::Relaxed);
    tracing::info!(%peer, %dst, "split");
    let mut server = server;
    let r = tokio::io::copy_bidirectional_with_sizes(
        &mut client,
        &mut server,
        SPLICE_BUFFER,
        SPLICE_BUFFER,
    )
    .await;
    let (up, down) = r.context("splicing")?;
    counters.bytes_to_server.fetch_add(up, Ordering::Relaxed);
    counters.bytes_to_client.fetch_add(down, Ordering::Relaxed);
    if let (Ok(c), Ok(s)) = (tcp_counters(&client), tcp_counters(&server)) {
        counters
            .client_side_retrans
            .fetch_add(c.total_retrans, Ordering::Relaxed);
        counters
            .server_side_retrans
            .fetch_add(s.total_retrans, Ordering::Relaxed);
    }
    Ok(())
}

/// Connects to `dst` from the client's address (a transparent socket, so the server sees the
/// client as with PEPsal), on an ephemeral port.
async fn connect_as(src: SocketAddrV4, dst: SocketAddrV4, cc: &str) -> anyhow::Result<TcpStream> {
    let s = tokio::net::TcpSocket::new_v4()?;
    set_ip_transparent(&s)?;
    set_congestion(&s, cc)?;
    s.bind(SocketAddr::V4(SocketAddrV4::new(*src.ip(), 0)))?;
    Ok(s.connect(SocketAddr::V4(dst)).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_parse() {
        let p: Peer = "10.0.1.1,02:5B:00:01:00:01".parse().unwrap();
        assert_eq!(p.ip, Ipv4Addr::new(10, 0, 1, 1));
        assert_eq!(p.mac, "02:5b:00:01:00:01");
        assert!("10.0.1.1".parse::<Peer>().is_err());
        assert!("10.0.1.1,02:5b:00:01:00".parse::<Peer>().is_err());
        assert!("x,02:5b:00:01:00:01".parse::<Peer>().is_err());
    }

    #[test]
    fn bridge_rules_redirect_to_the_bridge_and_mark_the_client_side() {
        let cfg = SplitConfig {
            client_interface: "lan0".into(),
            port: 7070,
            cc: "cubic".into(),
            max_connections: 4,
            bridge: Some("br0".into()),
            peers: Vec::new(),
            connect_timeout: Duration::from_secs(1),
        };
        let r = ruleset(&cfg, Some("02:5b:00:02:00:01"));
        assert!(r.contains("table bridge sidekick_tcp_split"));
        assert!(r.contains("iifname \"lan0\" ether type ip ip protocol tcp meta mark set 0x5e12"));
        assert!(r.contains("ether daddr set 02:5b:00:02:00:01"));
        assert!(r.contains("meta mark 0x5e12 meta l4proto tcp tproxy to :7070"));
        assert!(r.contains("socket transparent 1 meta mark set 0x5e11"));
    }
}
