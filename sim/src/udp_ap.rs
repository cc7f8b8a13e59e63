//! The network of the UDP applications' trials (media, media-FEC, WebRTC, multicast): one client and one
//! server on the lab's links, and the ap between them, which routes and whose proxy (if the
//! variant runs one) sniffs `lan0` — as in the transfer trials ([`crate::trial`]).
//!
//! A trial's world owns one [`UdpAp`]; it hands the hosts' datagrams in
//! ([`UdpAp::client_send`], [`UdpAp::server_send`]), moves each hop's due frames with
//! [`UdpAp::due_frames`] (the ap's own hops are handled inside; frames that reach a host come
//! back), runs the proxy's timers ([`UdpAp::proxy_timeout`]) and re-announces the deadlines
//! ([`UdpAp::schedule`]) after every step.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use crate::net::{self, Hop, IfCounters, Links, MAX_FRAME, mac, server_addr, udp_frame, udp_of};
use crate::proxy_node::{ProxyNode, ProxyOut};
use crate::sched::{Clock, Scheduler};
use crate::trial::TrialSetup;

const CLI0: usize = 0;
const AP_LAN0: usize = 1;
const AP_WAN0: usize = 2;
const SRV: usize = 3;

/// Links, interface counters and the proxy of a UDP trial.
pub struct UdpAp {
    clock: Clock,
    t: Duration,
    links: Links,
    ifs: [IfCounters; 4],
    proxy: Option<ProxyNode>,
    proxy_out: Vec<ProxyOut>,
    oversize_drops: u64,
}

impl UdpAp {
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
        let f = udp_frame(mac::CLIENT, mac::AP_LAN, src, dst, payload);
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

    /// Moves the frames due on `hop`: those reaching the ap are routed (and captured); those
    /// reaching a host come back, counted as received — the client's for [`Hop::LanDown`], the
    /// server's for [`Hop::WanUp`].
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

    /// Announces the hops' next frames to `sched` (components `0..4`, in [`Hop::ALL`]'s order)
    /// and the proxy's next deadline (component `proxy`).
    pub fn schedule(&self, sched: &mut Scheduler, proxy: usize) {
        for (i, hop) in Hop::ALL.iter().enumerate() {
            sched.set(i, self.links.next_due(*hop));
        }
        let (c, t) = (self.clock, self.t);
        let pt = self
            .proxy
            .as_ref()
            .and_then(ProxyNode::poll_timeout)
            .map(|i| c.offset(i).max(t));
        sched.set(proxy, pt);
    }

    fn ap_from_lan(&mut self, mut frame: Vec<u8>) {
        let now = self.now();
        self.ifs[AP_LAN0].rx(frame.len());
        if let Some(p) = self.proxy.as_mut() {
            p.on_frame(now, true, &frame, &mut self.proxy_out);
        }
        self.handle_proxy_out();
        let Some((src, dst, payload)) = udp_of(&frame) else {
            return;
        };
        if let Some(p) = self.proxy.as_mut()
            && dst == p.listen()
        {
            p.on_sidekick(now, src, payload, &mut self.proxy_out);
            self.handle_proxy_out();
        } else if dst.ip() == net::SERVER_IP {
            net::rewrite_macs(&mut frame, mac::AP_WAN, mac::SERVER);
            self.ifs[AP_WAN0].tx(frame.len());
            self.links.hop(Hop::WanUp).offer(self.t, frame);
        }
    }

    fn ap_from_wan(&mut self, mut frame: Vec<u8>) {
        self.ifs[AP_WAN0].rx(frame.len());
        // A group's stream is carried onto the client link as the server sent it (the lab's tc
        // mirror, `Topology::forward_multicast`: no multicast routing on the ap).
        if udp_of(&frame).is_some_and(|(_, d, _)| d.ip().is_multicast()) {
            self.ap_lan_egress(frame, true);
        } else if udp_of(&frame).is_some_and(|(_, d, _)| d.ip() == net::CLIENT_IP) {
            net::rewrite_macs(&mut frame, mac::AP_LAN, mac::CLIENT);
            self.ap_lan_egress(frame, true);
        }
    }

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
                        self.ap_lan_egress(f, true);
                    }
                    ProxyOut::Inject { frame, .. } => self.ap_lan_egress(frame, false),
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
