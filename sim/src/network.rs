//! The network of every trial: one client host and one server on the lab's links, and the ap
//! between them — routing, with the proxy (if the variant runs one) sniffing `lan0`, or
//! (`topology.ap = "bridge"`) bridging its ports, through the proxy when it bridges.
//!
//! A trial's world owns one [`Network`]; it hands the hosts' datagrams in
//! ([`Network::client_send`], [`Network::server_send`]), moves each hop's due frames with
//! [`Network::due_frames`] (the ap's own hops are handled inside; frames that reach a host come
//! back), runs the proxy's timers ([`Network::proxy_timeout`]) and the bridging proxy's delayed
//! frames ([`Network::release_delayed`]), and re-announces the deadlines
//! ([`Network::schedule`]) after every step.

use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use crate::net::{self, Hop, IfCounters, Links, MAX_FRAME, mac, server_addr, udp_frame, udp_of};
use crate::proxy_node::{ProxyNode, ProxyOut, Verdict};
use crate::sched::{Clock, Scheduler};
use crate::trial::TrialSetup;

const CLI0: usize = 0;
const AP_LAN0: usize = 1;
const AP_WAN0: usize = 2;
const SRV: usize = 3;

/// Frames the bridging proxy holds for PEMI's reply delay at most (daemon.rs `DELAY_CAP`); beyond
/// it frames are forwarded at once.
const DELAY_CAP: usize = 4096;

/// The scheduler components a world gives the network's timers.
#[derive(Debug, Clone, Copy)]
pub struct NetTimers {
    /// The proxy's timer.
    pub proxy: usize,
    /// The bridging proxy's delayed frames (worlds that never bridge: `None`).
    pub delayed: Option<usize>,
}

/// Links, interface counters, the ap and its proxy.
pub struct Network {
    clock: Clock,
    t: Duration,
    links: Links,
    ifs: [IfCounters; 4],
    proxy: Option<ProxyNode>,
    proxy_out: Vec<ProxyOut>,
    oversize_drops: u64,
    /// The ap bridges: frames go client ↔ server at layer 2, through the proxy when it bridges.
    bridge: bool,
    /// Frames the bridging proxy delays: (release time, towards the client, frame), FIFO.
    delayed: VecDeque<(Duration, bool, Vec<u8>)>,
}

impl Network {
    /// The network of trial `s` on `clock`, the proxy's hash key from `proxy_seeds`.
    pub fn new(s: &TrialSetup, clock: Clock, proxy_seeds: (u64, u64)) -> Self {
        Self {
            clock,
            t: Duration::ZERO,
            links: Links::new(s.wan, s.lan, s.link_seed),
            ifs: [IfCounters::default(); 4],
            proxy: s
                .proxy
                .as_ref()
                .map(|c| ProxyNode::new(c, proxy_seeds, clock)),
            proxy_out: Vec::new(),
            oversize_drops: 0,
            bridge: s.ap_bridge,
            delayed: VecDeque::new(),
        }
    }

    /// Virtual time moves to `t`.
    pub fn set_time(&mut self, t: Duration) {
        self.t = t;
    }

    fn now(&self) -> Instant {
        self.clock.at(self.t)
    }

    /// The client sends `payload` from `src` to `dst` (onto `lan`, towards the ap).
    pub fn client_send(&mut self, src: SocketAddr, dst: SocketAddr, payload: &[u8]) {
        // Across a bridge the server is on-link; the ap's own address (a bridging proxy's
        // sidekick socket) is the ap's.
        let next = if self.bridge && dst.ip() != net::AP_LAN_IP {
            mac::SERVER
        } else {
            mac::AP_LAN
        };
        let f = udp_frame(mac::CLIENT, next, src, dst, payload);
        self.client_send_frame(f);
    }

    /// The client sends a whole frame (its kernel's ICMP answers).
    pub fn client_send_frame(&mut self, f: Vec<u8>) {
        if f.len() > MAX_FRAME {
            self.oversize_drops += 1;
            return;
        }
        self.ifs[CLI0].tx(f.len());
        self.links.hop(Hop::LanUp).offer(self.t, f);
    }

    /// The server sends `payload` to `dst` (onto `wan`, towards the ap); to a multicast group,
    /// with the group's Ethernet address (RFC 1112 §6.4), as the kernel sends it.
    pub fn server_send(&mut self, dst: SocketAddr, payload: &[u8]) {
        let dst_mac = match dst.ip() {
            IpAddr::V4(g) if g.is_multicast() => {
                let o = g.octets();
                [0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]]
            }
            _ if self.bridge => mac::CLIENT,
            _ => mac::AP_WAN,
        };
        let f = udp_frame(mac::SERVER, dst_mac, server_addr(), dst, payload);
        if f.len() > MAX_FRAME {
            self.oversize_drops += 1;
            return;
        }
        self.ifs[SRV].tx(f.len());
        self.links.hop(Hop::WanDown).offer(self.t, f);
    }

    /// Moves the frames due on `hop`: those reaching the ap are routed or bridged (and
    /// captured); those reaching a host come back, counted as received — the client's for
    /// [`Hop::LanDown`], the server's for [`Hop::WanUp`].
    pub fn due_frames(&mut self, hop: Hop) -> Vec<Vec<u8>> {
        let mut delivered = Vec::new();
        while let Some(frame) = self.links.hop(hop).pop_due(self.t) {
            match hop {
                Hop::LanUp => self.ap_from_lan(frame),
                Hop::WanDown => self.ap_from_wan(frame),
                Hop::LanDown => {
                    self.ifs[CLI0].rx(frame.len());
                    delivered.push(frame);
                }
                Hop::WanUp => {
                    self.ifs[SRV].rx(frame.len());
                    delivered.push(frame);
                }
            }
        }
        delivered
    }

    /// The proxy's timers.
    pub fn proxy_timeout(&mut self) {
        let now = self.now();
        if let Some(p) = self.proxy.as_mut() {
            p.handle_timeout(now, &mut self.proxy_out);
        }
        self.handle_proxy_out();
    }

    /// Sends on the frames the bridging proxy delayed until now.
    pub fn release_delayed(&mut self) {
        while self.delayed.front().is_some_and(|d| d.0 <= self.t) {
            if let Some((_, to_client, f)) = self.delayed.pop_front() {
                self.bridge_out(to_client, f);
            }
        }
    }

    /// Announces the hops' next frames to `sched` (components `0..4`, in [`Hop::ALL`]'s order)
    /// and the network's timers (`timers`). `just_ran`: the component that ran last at this
    /// instant — a proxy timer still due right after it ran (one that acts only once the clock
    /// has passed its deadline, as PEMI's flowlet timers do) runs again a microsecond later, as
    /// a real-time loop would soon after; otherwise virtual time would stand still.
    pub fn schedule(&self, sched: &mut Scheduler, timers: NetTimers, just_ran: Option<usize>) {
        for (i, hop) in Hop::ALL.iter().enumerate() {
            sched.set(i, self.links.next_due(*hop));
        }
        let (c, t) = (self.clock, self.t);
        let pt = self
            .proxy
            .as_ref()
            .and_then(ProxyNode::poll_timeout)
            .map(|i| {
                let d = c.offset(i).max(t);
                if just_ran == Some(timers.proxy) && d <= t {
                    t + Duration::from_micros(1)
                } else {
                    d
                }
            });
        sched.set(timers.proxy, pt);
        if let Some(k) = timers.delayed {
            sched.set(k, self.delayed.front().map(|d| d.0.max(t)));
        }
    }

    /// Bridged ap: the frame passes the bridging proxy (which may delay it) or the kernel bridge.
    fn bridge_in(&mut self, from_client: bool, frame: Vec<u8>) {
        let now = self.now();
        let mut verdict = Verdict::Forward;
        if let Some(p) = self.proxy.as_mut()
            && p.bridges()
        {
            verdict = p.on_frame(now, from_client, &frame, &mut self.proxy_out);
        }
        self.handle_proxy_out();
        match verdict {
            Verdict::Delay(until) if self.delayed.len() < DELAY_CAP => {
                let at = self.clock.offset(until).max(self.t);
                self.delayed.push_back((at, !from_client, frame));
            }
            _ => self.bridge_out(!from_client, frame),
        }
    }

    fn bridge_out(&mut self, to_client: bool, frame: Vec<u8>) {
        if to_client {
            self.ifs[AP_LAN0].tx(frame.len());
            self.links.hop(Hop::LanDown).offer(self.t, frame);
        } else {
            self.ifs[AP_WAN0].tx(frame.len());
            self.links.hop(Hop::WanUp).offer(self.t, frame);
        }
    }

    fn ap_from_lan(&mut self, mut frame: Vec<u8>) {
        let now = self.now();
        self.ifs[AP_LAN0].rx(frame.len());
        if self.bridge {
            if frame.get(..6) != Some(&mac::AP_LAN[..]) {
                self.bridge_in(true, frame);
                return;
            }
            // A frame to the ap's own address is the host's (`PACKET_HOST`): the kernel
            // delivers it, and the bridge does not forward it (docs/proxy.md, "Bridge mode").
            if let Some(p) = self.proxy.as_mut()
                && p.sidekick_frame(now, &frame, &mut self.proxy_out)
            {
                self.handle_proxy_out();
            }
            return;
        }
        if let Some(p) = self.proxy.as_mut() {
            p.on_frame(now, true, &frame, &mut self.proxy_out);
        }
        self.handle_proxy_out();
        if let Some(p) = self.proxy.as_mut()
            && p.sidekick_frame(now, &frame, &mut self.proxy_out)
        {
            self.handle_proxy_out();
        } else if udp_of(&frame).is_some_and(|(_, dst, _)| dst.ip() == net::SERVER_IP) {
            net::rewrite_macs(&mut frame, mac::AP_WAN, mac::SERVER);
            self.ifs[AP_WAN0].tx(frame.len());
            self.links.hop(Hop::WanUp).offer(self.t, frame);
        }
        // Anything else (the ap's own address without a proxy) is dropped, as the kernel would
        // (with an ICMP error nobody here reads).
    }

    fn ap_from_wan(&mut self, mut frame: Vec<u8>) {
        self.ifs[AP_WAN0].rx(frame.len());
        if self.bridge {
            self.bridge_in(false, frame);
            return;
        }
        // A group's stream is carried onto the client link as the server sent it (the lab's tc
        // mirror, `Topology::forward_multicast`: no multicast routing on the ap).
        if udp_of(&frame).is_some_and(|(_, d, _)| d.ip().is_multicast()) {
            self.ap_lan_egress(frame, true);
        } else if udp_of(&frame).is_some_and(|(_, d, _)| d.ip() == net::CLIENT_IP) {
            net::rewrite_macs(&mut frame, mac::AP_LAN, mac::CLIENT);
            self.ap_lan_egress(frame, true);
        }
    }

    /// A frame leaves the ap on lan0; the proxy captures it unless it injected it itself.
    fn ap_lan_egress(&mut self, frame: Vec<u8>, capture: bool) {
        if capture && let Some(p) = self.proxy.as_mut() {
            let now = self.clock.at(self.t);
            let _ = p.on_frame(now, false, &frame, &mut self.proxy_out);
        }
        self.ifs[AP_LAN0].tx(frame.len());
        self.links.hop(Hop::LanDown).offer(self.t, frame);
        self.handle_proxy_out();
    }

    fn handle_proxy_out(&mut self) {
        while !self.proxy_out.is_empty() {
            for o in std::mem::take(&mut self.proxy_out) {
                match o {
                    ProxyOut::Sidekick { to, bytes } => {
                        let from = self.proxy.as_ref().map_or(to, ProxyNode::listen);
                        let f = udp_frame(mac::AP_LAN, mac::CLIENT, from, to, &bytes);
                        if self.bridge {
                            // The host's own datagram: the bridge reads only what arrives.
                            self.bridge_out(true, f);
                        } else {
                            self.ap_lan_egress(f, true);
                        }
                    }
                    ProxyOut::Inject { to_client, frame } => {
                        if self.bridge {
                            self.bridge_out(to_client, frame);
                        } else {
                            self.ap_lan_egress(frame, false);
                        }
                    }
                }
            }
        }
    }

    /// The lab's interface, link and proxy metrics of the trial.
    pub fn metrics(&self, m: &mut BTreeMap<String, f64>) {
        for (name, c) in ["cli0", "ap_lan0", "ap_wan0", "srv"].iter().zip(self.ifs) {
            m.insert(format!("{name}_tx_packets"), c.tx_packets as f64);
            m.insert(format!("{name}_tx_bytes"), c.tx_bytes as f64);
            m.insert(format!("{name}_rx_packets"), c.rx_packets as f64);
            m.insert(format!("{name}_rx_bytes"), c.rx_bytes as f64);
        }
        self.links.metrics(m);
        if let Some(p) = &self.proxy {
            p.metrics(m);
        }
        if self.oversize_drops > 0 {
            m.insert("sim_oversize_drops".into(), self.oversize_drops as f64);
        }
    }
}
