//! The namespace topology `server — [wan link] — ap — [lan link] — client(s)`.
//!
//! Namespaces of one run (run id `skl` + 5 hex digits, so runs coexist):
//! `<run>-srv`, `<run>-wan`, `<run>-ap`, `<run>-lan<i>`, `<run>-cli<i>`. The `wan` and `lan<i>`
//! namespaces hold nothing but two veth ends and a link element thread; `ap` routes between its
//! interfaces (ip_forward=1) and stays clean for the proxy.
//!
//! | namespace | interface | address |
//! |---|---|---|
//! | srv | eth0 | 10.0.1.1/24 |
//! | ap | wan0 | 10.0.1.2/24 |
//! | ap | `lan<i>` | 10.0.(2+i).1/24 |
//! | `cli<i>` | eth0 | 10.0.(2+i).2/24 |
//!
//! Neighbour entries are static (no ARP across emulated lossy links), IPv6 is disabled (no
//! router or DAD chatter in the counters), and tx checksum, GSO, TSO and GRO are off on every
//! veth (docs/architecture.md, offload caveat). Clean-up: [`Topology`] removes everything on drop;
//! a state file under [`STATE_DIR`] names the owning process so [`crate::cleanup::clean`] can
//! remove runs whose owner died (and leaves live runs alone).

use crate::element::{self, ElementHandle, ElementStats};
use crate::netem::{LinkBackend, NetemLink};
use crate::spec::LinkSpec;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Command;

/// Prefix of every namespace the lab creates.
pub const PREFIX: &str = "skl";
pub use crate::cleanup::STATE_DIR;

/// Lab errors.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// An external command failed.
    #[error("`{cmd}` failed: {stderr}")]
    Command {
        /// The command line.
        cmd: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// An I/O error, with context.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Invalid configuration.
    #[error("{0}")]
    Config(String),
}

fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> LabError {
    let context = context.into();
    move |source| LabError::Io { context, source }
}

/// Runs a command, failing with its stderr.
pub fn cmd(prog: &str, args: &[&str]) -> Result<String, LabError> {
    let line = format!("{prog} {}", args.join(" "));
    let out = Command::new(prog)
        .args(args)
        .output()
        .map_err(io_err(format!("running `{line}`")))?;
    if !out.status.success() {
        return Err(LabError::Command {
            cmd: line,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

pub(crate) fn ip(args: &[&str]) -> Result<String, LabError> {
    cmd("ip", args)
}

fn in_ns(ns: &str, prog: &str, args: &[&str]) -> Result<String, LabError> {
    let mut v = vec!["netns", "exec", ns, prog];
    v.extend_from_slice(args);
    ip(&v)
}

/// Interface packet and byte counters (as in `/sys/class/net/*/statistics`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IfCounters {
    /// Packets received.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Packets transmitted.
    pub tx_packets: u64,
    /// Bytes transmitted.
    pub tx_bytes: u64,
}

impl IfCounters {
    /// `self - earlier`, saturating.
    pub fn since(&self, earlier: &IfCounters) -> IfCounters {
        IfCounters {
            rx_packets: self.rx_packets.saturating_sub(earlier.rx_packets),
            rx_bytes: self.rx_bytes.saturating_sub(earlier.rx_bytes),
            tx_packets: self.tx_packets.saturating_sub(earlier.tx_packets),
            tx_bytes: self.tx_bytes.saturating_sub(earlier.tx_bytes),
        }
    }
}

/// Parses `ip -s -j link show` output into counters per interface name.
pub fn parse_ip_stats(json: &str) -> Result<BTreeMap<String, IfCounters>, LabError> {
    let v: serde_json::Value = serde_json::from_str(json)
        .map_err(|e| LabError::Config(format!("unexpected `ip -j` output: {e}")))?;
    let mut out = BTreeMap::new();
    for l in v.as_array().into_iter().flatten() {
        let Some(name) = l.get("ifname").and_then(|n| n.as_str()) else {
            continue;
        };
        let g = |dir: &str, k: &str| {
            l.pointer(&format!("/stats64/{dir}/{k}"))
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0)
        };
        out.insert(
            name.to_string(),
            IfCounters {
                rx_packets: g("rx", "packets"),
                rx_bytes: g("rx", "bytes"),
                tx_packets: g("tx", "packets"),
                tx_bytes: g("tx", "bytes"),
            },
        );
    }
    Ok(out)
}

/// Settings of a topology.
#[derive(Debug, Clone)]
pub struct TopoConfig {
    /// Number of clients (each with its own lan link).
    pub clients: usize,
    /// Specs of the server—ap link.
    pub wan: LinkSpec,
    /// Specs of each ap—client link.
    pub lan: LinkSpec,
    /// Seed of the links' loss draws.
    pub seed: u64,
    /// How the ap joins its interfaces.
    pub ap: ApMode,
}

/// How the ap namespace joins the server side and the client side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApMode {
    /// The ap routes between addressed interfaces (`wan0` 10.0.1.2, `lan<i>` 10.0.(2+i).1); a
    /// sniffing proxy watches `lan<i>`.
    #[default]
    Router,
    /// The ap's interfaces carry no addresses and are joined at layer 2: by a kernel bridge
    /// `br0`, or — for a trial whose proxy bridges in user space (`--mode bridge`, PEMI's reply
    /// delaying, PEMI §4.5.2) — by that proxy ([`Topology::hand_ports_to_proxy`]). Server
    /// and client keep their addresses and reach each other on-link with static neighbours.
    /// One client.
    Bridge,
}

/// One running emulated link (both directions).
#[derive(Debug)]
enum LinkHandle {
    Element(ElementHandle),
    Netem(NetemLink),
}

impl LinkHandle {
    fn stop(self) -> ElementStats {
        match self {
            LinkHandle::Element(h) => h.stop(),
            LinkHandle::Netem(n) => {
                let (a_to_b, b_to_a) = n.stop();
                ElementStats {
                    a_to_b,
                    b_to_a,
                    ..ElementStats::default()
                }
            }
        }
    }
}

fn mac(role: u8, idx: u8, side: u8) -> String {
    format!("02:5b:00:{role:02x}:{idx:02x}:{side:02x}")
}

/// A live topology. Dropping it stops the link elements and deletes the namespaces.
#[derive(Debug)]
pub struct Topology {
    run: String,
    clients: usize,
    namespaces: Vec<String>,
    elements: Vec<(String, LinkHandle)>,
    backend: LinkBackend,
    ap: ApMode,
    state: PathBuf,
    torn_down: bool,
}

impl Topology {
    /// Builds the namespaces, veths, addresses and routes, and starts the userspace link
    /// elements.
    pub fn up(cfg: &TopoConfig) -> Result<Self, LabError> {
        Self::up_with(cfg, LinkBackend::Userspace)
    }

    /// Like [`Topology::up`], emulating the links with `backend` (see [`crate::netem`]).
    pub fn up_with(cfg: &TopoConfig, backend: LinkBackend) -> Result<Self, LabError> {
        if cfg.clients == 0 || cfg.clients > 200 {
            return Err(LabError::Config("clients must be 1..=200".into()));
        }
        let existing = lab_namespaces()?;
        // The owner is recorded before any namespace exists, so `clean` never sees a namespace
        // of a live run without its owner.
        let (run, state) = loop {
            let id = format!("{PREFIX}{:05x}", rand::random::<u32>() & 0xfffff);
            if existing.iter().any(|n| n.starts_with(&format!("{id}-"))) {
                continue;
            }
            if let Some(dir) = crate::cleanup::register(std::path::Path::new(STATE_DIR), &id)? {
                break (id, dir);
            }
        };
        let mut t = Topology {
            run,
            clients: cfg.clients,
            namespaces: Vec::new(),
            elements: Vec::new(),
            backend,
            ap: cfg.ap,
            state,
            torn_down: false,
        };
        t.build()?;
        t.set_links(&cfg.wan, &cfg.lan, cfg.seed)?;
        Ok(t)
    }

    fn add_ns(&mut self, suffix: &str) -> Result<String, LabError> {
        let name = format!("{}-{suffix}", self.run);
        ip(&["netns", "add", &name])?;
        self.namespaces.push(name.clone());
        for k in [
            "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.default.disable_ipv6=1",
        ] {
            in_ns(&name, "sysctl", &["-qw", k])?;
        }
        ip(&["-n", &name, "link", "set", "lo", "up"])?;
        Ok(name)
    }

    fn veth(
        ns1: &str,
        if1: &str,
        mac1: &str,
        ns2: &str,
        if2: &str,
        mac2: &str,
    ) -> Result<(), LabError> {
        ip(&[
            "-n", ns1, "link", "add", if1, "address", mac1, "type", "veth", "peer", "name", if2,
            "netns", ns2, "address", mac2,
        ])?;
        for (ns, ifn) in [(ns1, if1), (ns2, if2)] {
            in_ns(
                ns,
                "ethtool",
                &[
                    "-K", ifn, "tx", "off", "tso", "off", "gso", "off", "gro", "off",
                ],
            )
            .map_err(|e| {
                LabError::Config(format!(
                    "{e} (the lab needs ethtool: apt-get install ethtool)"
                ))
            })?;
            ip(&["-n", ns, "link", "set", ifn, "up"])?;
        }
        Ok(())
    }

    fn build(&mut self) -> Result<(), LabError> {
        let srv = self.add_ns("srv")?;
        let wan = self.add_ns("wan")?;
        let ap = self.add_ns("ap")?;
        if self.ap == ApMode::Bridge {
            return self.build_bridged(&srv, &wan, &ap);
        }
        in_ns(&ap, "sysctl", &["-qw", "net.ipv4.ip_forward=1"])?;
        let (srv_mac, ap_wan_mac) = (mac(1, 0, 1), mac(2, 0, 1));
        Self::veth(&srv, "eth0", &srv_mac, &wan, "w-srv", &mac(3, 0, 1))?;
        Self::veth(&wan, "w-ap", &mac(3, 0, 2), &ap, "wan0", &ap_wan_mac)?;
        ip(&["-n", &srv, "addr", "add", "10.0.1.1/24", "dev", "eth0"])?;
        ip(&["-n", &ap, "addr", "add", "10.0.1.2/24", "dev", "wan0"])?;
        ip(&[
            "-n",
            &srv,
            "neigh",
            "replace",
            "10.0.1.2",
            "lladdr",
            &ap_wan_mac,
            "dev",
            "eth0",
            "nud",
            "permanent",
        ])?;
        ip(&[
            "-n",
            &ap,
            "neigh",
            "replace",
            "10.0.1.1",
            "lladdr",
            &srv_mac,
            "dev",
            "wan0",
            "nud",
            "permanent",
        ])?;
        ip(&["-n", &srv, "route", "add", "default", "via", "10.0.1.2"])?;
        for i in 0..self.clients {
            let idx = i as u8;
            let lan = self.add_ns(&format!("lan{i}"))?;
            let cli = self.add_ns(&format!("cli{i}"))?;
            let (ap_lan_mac, cli_mac) = (mac(2, idx, 2), mac(5, idx, 1));
            let ap_if = format!("lan{i}");
            Self::veth(&ap, &ap_if, &ap_lan_mac, &lan, "l-ap", &mac(4, idx, 1))?;
            Self::veth(&lan, "l-cli", &mac(4, idx, 2), &cli, "eth0", &cli_mac)?;
            let (ap_addr, cli_addr) = (
                Self::ap_lan_addr(i).to_string(),
                Self::client_addr(i).to_string(),
            );
            ip(&[
                "-n",
                &ap,
                "addr",
                "add",
                &format!("{ap_addr}/24"),
                "dev",
                &ap_if,
            ])?;
            ip(&[
                "-n",
                &cli,
                "addr",
                "add",
                &format!("{cli_addr}/24"),
                "dev",
                "eth0",
            ])?;
            ip(&[
                "-n",
                &ap,
                "neigh",
                "replace",
                &cli_addr,
                "lladdr",
                &cli_mac,
                "dev",
                &ap_if,
                "nud",
                "permanent",
            ])?;
            ip(&[
                "-n",
                &cli,
                "neigh",
                "replace",
                &ap_addr,
                "lladdr",
                &ap_lan_mac,
                "dev",
                "eth0",
                "nud",
                "permanent",
            ])?;
            ip(&["-n", &cli, "route", "add", "default", "via", &ap_addr])?;
        }
        Ok(())
    }

    /// [`ApMode::Bridge`]: the same namespaces and links as the routed topology, no ap
    /// addresses, a kernel bridge `br0` over `wan0` and `lan0`, on-link routes and static
    /// neighbours between server and client.
    fn build_bridged(&mut self, srv: &str, wan: &str, ap: &str) -> Result<(), LabError> {
        if self.clients != 1 {
            return Err(LabError::Config(
                "a bridged ap joins one client link".into(),
            ));
        }
        let (srv_mac, cli_mac) = (mac(1, 0, 1), mac(5, 0, 1));
        Self::veth(srv, "eth0", &srv_mac, wan, "w-srv", &mac(3, 0, 1))?;
        Self::veth(wan, "w-ap", &mac(3, 0, 2), ap, "wan0", &mac(2, 0, 1))?;
        let lan = self.add_ns("lan0")?;
        let cli = self.add_ns("cli0")?;
        Self::veth(ap, "lan0", &mac(2, 0, 2), &lan, "l-ap", &mac(4, 0, 1))?;
        Self::veth(&lan, "l-cli", &mac(4, 0, 2), &cli, "eth0", &cli_mac)?;
        let (srv_ip, cli_ip) = (
            Self::server_addr().to_string(),
            Self::client_addr(0).to_string(),
        );
        for (ns, own, peer, peer_mac, peer_net) in [
            (
                srv,
                format!("{srv_ip}/24"),
                &cli_ip,
                &cli_mac,
                "10.0.2.0/24",
            ),
            (
                &cli,
                format!("{cli_ip}/24"),
                &srv_ip,
                &srv_mac,
                "10.0.1.0/24",
            ),
        ] {
            ip(&["-n", ns, "addr", "add", &own, "dev", "eth0"])?;
            ip(&["-n", ns, "route", "add", peer_net, "dev", "eth0"])?;
            ip(&[
                "-n",
                ns,
                "neigh",
                "replace",
                peer,
                "lladdr",
                peer_mac,
                "dev",
                "eth0",
                "nud",
                "permanent",
            ])?;
        }
        for port in ["wan0", "lan0"] {
            ip(&["-n", ap, "link", "set", port, "promisc", "on"])?;
        }
        ip(&[
            "-n",
            ap,
            "link",
            "add",
            "br0",
            "type",
            "bridge",
            "stp_state",
            "0",
        ])?;
        ip(&["-n", ap, "link", "set", "br0", "up"])?;
        self.attach_ports()
    }

    fn attach_ports(&self) -> Result<(), LabError> {
        let ap = self.ns_ap();
        for port in ["wan0", "lan0"] {
            ip(&["-n", &ap, "link", "set", port, "master", "br0"])?;
        }
        Ok(())
    }

    /// How the ap joins its interfaces.
    pub fn ap_mode(&self) -> ApMode {
        self.ap
    }

    /// [`ApMode::Bridge`]: takes `wan0` and `lan0` out of the kernel bridge so that a proxy in
    /// bridge mode forwards between them, and gives `lan0` the ap's client-side address
    /// ([`Topology::ap_lan_addr`]) for the proxy's sidekick socket; the address goes and the
    /// ports go back when the guard drops.
    pub fn hand_ports_to_proxy(&self) -> Result<PortsHandedOver, LabError> {
        if self.ap != ApMode::Bridge {
            return Err(LabError::Config(
                "a bridging proxy needs `[topology] ap = \"bridge\"` (the routed ap's interfaces are addressed)".into(),
            ));
        }
        // The guard first: whatever fails below, its drop returns the ports to the bridge.
        let guard = PortsHandedOver {
            ap: self.ns_ap(),
            // The bridging ap's own address on its client side (an access point's management
            // address), where the proxy's sidekick socket listens for clients that opt in.
            own: format!("{}/24", Self::ap_lan_addr(0)),
        };
        for port in ["wan0", "lan0"] {
            ip(&["-n", &guard.ap, "link", "set", port, "nomaster"])?;
        }
        ip(&["-n", &guard.ap, "addr", "add", &guard.own, "dev", "lan0"])?;
        Ok(guard)
    }

    /// Carries the server's multicast stream (destination in 224.0.0.0/4) across the routed ap
    /// onto every client link: a tc filter on `wan0`'s ingress mirrors each such frame to the
    /// egress of every `lan<i>` (the ap runs no multicast routing daemon). The frames keep their IP header, so a sniffing proxy on `lan0` sees the group's
    /// stream as the server sent it (Packrat (CoNEXT '26) §6.1; docs/proxy.md "Packrat
    /// multicast"), and each client link's element applies its own loss. Idempotent.
    ///
    /// # Errors
    /// `tc` failures.
    pub fn forward_multicast(&self) -> Result<(), LabError> {
        let ap = self.ns_ap();
        // Start from a clean ingress qdisc (a previous call's filter goes with it).
        let _ = in_ns(&ap, "tc", &["qdisc", "del", "dev", "wan0", "ingress"]);
        in_ns(&ap, "tc", &["qdisc", "add", "dev", "wan0", "ingress"])?;
        let lans: Vec<String> = (0..self.clients).map(|i| format!("lan{i}")).collect();
        let mut args: Vec<&str> = vec![
            "filter",
            "add",
            "dev",
            "wan0",
            "parent",
            "ffff:",
            "protocol",
            "ip",
            "u32",
            "match",
            "ip",
            "dst",
            "224.0.0.0/4",
        ];
        // Mirror to every link but the last, redirect (steal) to the last: the original never
        // reaches the ap's IP layer (no `drop` action needed, whose module this kernel lacks).
        for (i, lan) in lans.iter().enumerate() {
            let how = if i + 1 == lans.len() {
                "redirect"
            } else {
                "mirror"
            };
            args.extend_from_slice(&["action", "mirred", "egress", how, "dev", lan]);
        }
        in_ns(&ap, "tc", &args)?;
        Ok(())
    }

    /// Stops the running link elements and returns their statistics, keyed `wan`, `lan0`, ...
    pub fn stop_links(&mut self) -> Vec<(String, ElementStats)> {
        self.elements
            .drain(..)
            .map(|(k, h)| (k, h.stop()))
            .collect()
    }

    /// (Re)starts the link elements with new specs; returns the stopped elements' statistics.
    pub fn set_links(
        &mut self,
        wan: &LinkSpec,
        lan: &LinkSpec,
        seed: u64,
    ) -> Result<Vec<(String, ElementStats)>, LabError> {
        let old = self.stop_links();
        let h = self.start_link(&self.ns_wan(), "w-srv", "w-ap", wan, seed)?;
        self.elements.push(("wan".into(), h));
        for i in 0..self.clients {
            let s = seed.wrapping_add(1000 * (i as u64 + 1));
            let h = self.start_link(&self.ns_lan(i), "l-ap", "l-cli", lan, s)?;
            self.elements.push((format!("lan{i}"), h));
        }
        Ok(old)
    }

    fn start_link(
        &self,
        ns: &str,
        a: &str,
        b: &str,
        spec: &LinkSpec,
        seed: u64,
    ) -> Result<LinkHandle, LabError> {
        match self.backend {
            LinkBackend::Userspace => element::spawn(ns, a, b, *spec, seed)
                .map(LinkHandle::Element)
                .map_err(io_err(format!("starting the link element in {ns}"))),
            // netem draws its own random numbers: the seed does not apply.
            LinkBackend::Netem => NetemLink::start(ns, a, b, spec, spec).map(LinkHandle::Netem),
        }
    }

    /// How this topology emulates its links.
    pub fn backend(&self) -> LinkBackend {
        self.backend
    }

    /// The run id (namespace prefix).
    pub fn run_id(&self) -> &str {
        &self.run
    }
    /// Number of clients.
    pub fn clients(&self) -> usize {
        self.clients
    }
    /// The run's state directory (scratch files such as certificates go here).
    pub fn state_dir(&self) -> &std::path::Path {
        &self.state
    }
    /// All namespaces of the run.
    pub fn namespaces(&self) -> &[String] {
        &self.namespaces
    }
    /// Server namespace.
    pub fn ns_server(&self) -> String {
        format!("{}-srv", self.run)
    }
    /// Access-point (proxy) namespace.
    pub fn ns_ap(&self) -> String {
        format!("{}-ap", self.run)
    }
    /// Namespace of the wan link element.
    pub fn ns_wan(&self) -> String {
        format!("{}-wan", self.run)
    }
    /// Namespace of client `i`'s lan link element.
    pub fn ns_lan(&self, i: usize) -> String {
        format!("{}-lan{i}", self.run)
    }
    /// Namespace of client `i`.
    pub fn ns_client(&self, i: usize) -> String {
        format!("{}-cli{i}", self.run)
    }
    /// Server address.
    pub fn server_addr() -> Ipv4Addr {
        Ipv4Addr::new(10, 0, 1, 1)
    }
    /// The ap's address on the wan side.
    pub fn ap_wan_addr() -> Ipv4Addr {
        Ipv4Addr::new(10, 0, 1, 2)
    }
    /// The ap's address on client `i`'s lan.
    pub fn ap_lan_addr(i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 0, 2 + i as u8, 1)
    }
    /// Client `i`'s address.
    pub fn client_addr(i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 0, 2 + i as u8, 2)
    }

    /// Interface counters of every endpoint namespace, keyed `srv/eth0`, `ap/wan0`, `cli0/eth0`...
    /// (loopback only of the clients: `cli0/lo`).
    pub fn counters(&self) -> Result<BTreeMap<String, IfCounters>, LabError> {
        let mut out = BTreeMap::new();
        let mut nss = vec![
            ("srv".to_string(), self.ns_server()),
            ("ap".to_string(), self.ns_ap()),
        ];
        nss.extend((0..self.clients).map(|i| (format!("cli{i}"), self.ns_client(i))));
        for (tag, ns) in nss {
            for (ifn, c) in parse_ip_stats(&ip(&["-n", &ns, "-s", "-j", "link", "show"])?)? {
                // A client's loopback too: nothing of a sidekick client may go there (an
                // impostor may name a loopback sidekick address), so the lab counts it.
                if ifn != "lo" || tag.starts_with("cli") {
                    out.insert(format!("{tag}/{ifn}"), c);
                }
            }
        }
        Ok(out)
    }

    /// Stops everything and deletes the namespaces; reports the first failure.
    pub fn down(mut self) -> Result<(), LabError> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<(), LabError> {
        if self.torn_down {
            return Ok(());
        }
        self.torn_down = true;
        self.stop_links();
        let mut first = None;
        for ns in self.namespaces.drain(..).rev() {
            kill_ns_processes(&ns);
            if let Err(e) = ip(&["netns", "del", &ns]) {
                first.get_or_insert(e);
            }
        }
        let _ = std::fs::remove_dir_all(&self.state);
        first.map_or(Ok(()), Err)
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            tracing::warn!("topology teardown: {e}");
        }
    }
}

/// While alive, the bridged ap's ports belong to a user-space bridging proxy; on drop they go
/// back into the kernel bridge.
#[derive(Debug)]
pub struct PortsHandedOver {
    ap: String,
    own: String,
}

impl Drop for PortsHandedOver {
    fn drop(&mut self) {
        if let Err(e) = ip(&["-n", &self.ap, "addr", "del", &self.own, "dev", "lan0"]) {
            tracing::warn!(error = %e, "removing the ap's address from lan0");
        }
        for port in ["wan0", "lan0"] {
            if let Err(e) = ip(&["-n", &self.ap, "link", "set", port, "master", "br0"]) {
                tracing::warn!(error = %e, "returning {port} to the kernel bridge");
            }
        }
    }
}

/// SIGKILLs every process inside a namespace.
pub fn kill_ns_processes(ns: &str) {
    if let Ok(out) = ip(&["netns", "pids", ns]) {
        for pid in out.split_whitespace().filter_map(|p| p.parse::<i32>().ok()) {
            crate::sys::signal(pid, libc::SIGKILL);
        }
    }
}

/// Whether a namespace name belongs to the lab (`skl` + 5 hex digits + `-`).
pub fn is_lab_namespace(name: &str) -> bool {
    name.strip_prefix(PREFIX)
        .and_then(|r| r.get(..6))
        .is_some_and(|r| r.ends_with('-') && r[..5].chars().all(|c| c.is_ascii_hexdigit()))
}

/// Names of all lab namespaces on the machine.
pub fn lab_namespaces() -> Result<Vec<String>, LabError> {
    let out = ip(&["netns", "list"])?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| is_lab_namespace(n))
        .map(String::from)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lab_names() {
        assert!(is_lab_namespace("skl1a2b3-srv"));
        assert!(!is_lab_namespace("skl1a2b3"));
        assert!(!is_lab_namespace("sklzzzzz-srv"));
        assert!(!is_lab_namespace("other-srv"));
        assert!(!is_lab_namespace("skl"));
    }

    #[test]
    fn ip_json_counters() {
        let j = r#"[{"ifname":"lo","stats64":{"rx":{"bytes":1,"packets":1},"tx":{"bytes":1,"packets":1}}},
                   {"ifname":"eth0","stats64":{"rx":{"bytes":1000,"packets":10},"tx":{"bytes":500,"packets":5}}}]"#;
        let m = parse_ip_stats(j).unwrap();
        let c = m["eth0"];
        assert_eq!(
            (c.rx_packets, c.rx_bytes, c.tx_packets, c.tx_bytes),
            (10, 1000, 5, 500)
        );
        let d = c.since(&IfCounters {
            rx_packets: 4,
            rx_bytes: 400,
            tx_packets: 9,
            tx_bytes: 0,
        });
        assert_eq!((d.rx_packets, d.tx_packets), (6, 0));
        assert!(parse_ip_stats("not json").is_err());
    }

    #[test]
    fn addresses() {
        assert_eq!(Topology::client_addr(0), Ipv4Addr::new(10, 0, 2, 2));
        assert_eq!(Topology::ap_lan_addr(3), Ipv4Addr::new(10, 0, 5, 1));
        assert_eq!(mac(2, 1, 2), "02:5b:00:02:01:02");
    }
}
