//! The kernel link backend: `tc netem` on the two veth ends of a link namespace, joined by a
//! kernel bridge, instead of the userspace element ([`crate::element`]).
//!
//! The papers emulated their links with netem (Sidekick (NSDI '24) §6, Packrat (CoNEXT '26) §7.1, PEMI §6.1.3), so
//! a machine whose kernel has it can run the scenarios the same way. Kernels without
//! `sch_netem` (like the one this lab was developed on) keep the userspace element: `auto`
//! probes once and picks netem only when a netem qdisc can actually be created.
//!
//! One direction of a link is one netem qdisc at the egress of the veth end the frames leave
//! through: `delay`, `loss random` or `loss gemodel` (the same Gilbert–Elliott chain as
//! [`crate::spec::LossModel`]: transition first, then the state's loss draw), `rate` (netem's own
//! serialisation, Ethernet frame bytes) and `limit`. netem's `limit` counts every packet it
//! holds, including those in the delay line, whereas a scenario's `queue` counts packets waiting
//! for the bottleneck; the backend therefore adds the link's bandwidth-delay product (in
//! 1500-byte packets) to the limit. Byte-limited queues (`queue_bytes`) have no netem equivalent
//! and are refused.

use crate::link::DirCounters;
use crate::spec::{LinkSpec, LossModel};
use crate::topo::{LabError, PREFIX, cmd};
use serde::{Deserialize, Serialize};

/// Which mechanism emulates the links of a topology.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LinkBackend {
    /// The lab's userspace element (AF_PACKET forwarding thread per link namespace).
    #[default]
    Userspace,
    /// `tc netem` qdiscs on a kernel bridge.
    Netem,
}

impl std::fmt::Display for LinkBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LinkBackend::Userspace => "userspace",
            LinkBackend::Netem => "netem",
        })
    }
}

/// What the user asked for (`--link-backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum BackendChoice {
    /// netem when the kernel has it, else the userspace element.
    #[default]
    Auto,
    /// Always the userspace element.
    Userspace,
    /// Always netem (fails when the kernel lacks it).
    Netem,
}

/// Whether this kernel can create a netem qdisc: tries one on the loopback interface of a
/// scratch namespace (removed afterwards). `Err` carries tc's message.
pub fn probe() -> Result<(), String> {
    let ns = format!("{PREFIX}{:05x}-probe", std::process::id() & 0xfffff);
    cmd("ip", &["netns", "add", &ns]).map_err(|e| e.to_string())?;
    let r = cmd(
        "ip",
        &[
            "netns", "exec", &ns, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay",
            "1ms",
        ],
    );
    let _ = cmd("ip", &["netns", "del", &ns]);
    r.map(|_| ()).map_err(|e| match e {
        LabError::Command { stderr, .. } => stderr,
        other => other.to_string(),
    })
}

/// Resolves a choice to a backend, probing the kernel for `auto` and `netem`.
pub fn resolve(choice: BackendChoice) -> Result<LinkBackend, LabError> {
    resolve_with(choice, probe)
}

/// [`resolve`] with a given probe (tests).
pub fn resolve_with(
    choice: BackendChoice,
    probe: impl FnOnce() -> Result<(), String>,
) -> Result<LinkBackend, LabError> {
    match choice {
        BackendChoice::Userspace => Ok(LinkBackend::Userspace),
        BackendChoice::Auto => Ok(match probe() {
            Ok(()) => LinkBackend::Netem,
            Err(e) => {
                tracing::info!(reason = %e, "netem unavailable: using the userspace link element");
                LinkBackend::Userspace
            }
        }),
        BackendChoice::Netem => probe().map(|()| LinkBackend::Netem).map_err(|e| {
            LabError::Config(format!(
                "--link-backend netem: this kernel cannot create a netem qdisc (sch_netem missing?): {e}"
            ))
        }),
    }
}

/// Packets of `bytes` bytes in flight on a link of `rate_bps` over `delay` (rounded up).
fn bdp_packets(spec: &LinkSpec, bytes: u64) -> u64 {
    if spec.rate_bps == 0 {
        // No bottleneck: only the delay line holds packets; leave netem room for any burst.
        return 100_000;
    }
    let bits = u128::from(spec.rate_bps) * spec.delay.as_micros();
    let per = u128::from(bytes * 8) * 1_000_000;
    u64::try_from(bits.div_ceil(per)).unwrap_or(u64::MAX)
}

fn percent(p: f64) -> String {
    // netem takes percentages with up to 32-bit precision; six decimals are plenty.
    let s = format!("{:.6}", p * 100.0);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}%")
}

/// The netem qdisc parameters (after `tc qdisc replace dev X root`) for one link direction.
pub fn qdisc_args(spec: &LinkSpec) -> Result<Vec<String>, LabError> {
    if spec.queue_bytes > 0 {
        return Err(LabError::Config(
            "queue_bytes has no netem equivalent: use --link-backend userspace".into(),
        ));
    }
    if !spec.drop.is_empty() {
        return Err(LabError::Config(
            "drop rules (lan.drop/wan.drop) have no netem equivalent: use --link-backend userspace"
                .into(),
        ));
    }
    let mut a: Vec<String> = vec![
        "netem".into(),
        "delay".into(),
        format!("{}us", spec.delay.as_micros()),
    ];
    match spec.loss {
        LossModel::None => {}
        LossModel::Random { p } => a.extend(["loss".into(), "random".into(), percent(p)]),
        LossModel::GilbertElliott {
            p,
            r,
            loss_good,
            loss_bad,
        } => {
            // netem: `gemodel p r 1-h 1-k`, with 1-h the loss probability in the bad state and
            // 1-k the one in the good state.
            a.extend([
                "loss".into(),
                "gemodel".into(),
                percent(p),
                percent(r),
                percent(loss_bad),
                percent(loss_good),
            ]);
        }
    }
    if spec.rate_bps > 0 {
        a.extend(["rate".into(), format!("{}bit", spec.rate_bps)]);
    }
    let limit = (spec.queue_packets as u64).saturating_add(bdp_packets(spec, 1500));
    a.extend(["limit".into(), limit.to_string()]);
    Ok(a)
}

/// Counters of one netem qdisc from `tc -s -j qdisc show dev X` (the root qdisc's `packets`,
/// `bytes` and `drops`; netem counts its random losses as drops, so loss and queue overflow are
/// not told apart).
pub fn parse_qdisc_stats(json: &str) -> Result<DirCounters, LabError> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| LabError::Config(format!("tc -j output: {e}")))?;
    let q = v
        .as_array()
        .and_then(|a| a.iter().find(|q| q["kind"] == "netem"))
        .ok_or_else(|| LabError::Config("no netem qdisc in tc output".into()))?;
    let n = |k: &str| q[k].as_u64().unwrap_or(0);
    Ok(DirCounters {
        offered: n("packets") + n("drops"),
        delivered: n("packets"),
        delivered_bytes: n("bytes"),
        dropped_loss: n("drops"),
        dropped_queue: 0,
        dropped_rule: 0,
    })
}

/// netem applied to the link in namespace `ns` between veth ends `a` and `b`.
#[derive(Debug)]
pub struct NetemLink {
    ns: String,
    a: String,
    b: String,
    stopped: bool,
}

impl NetemLink {
    /// Joins `a` and `b` with a kernel bridge (once per namespace) and installs the qdiscs:
    /// frames from `a` to `b` leave through `b` (`a_to_b`), the others through `a`.
    pub fn start(
        ns: &str,
        a: &str,
        b: &str,
        a_to_b: &LinkSpec,
        b_to_a: &LinkSpec,
    ) -> Result<Self, LabError> {
        let (args_ab, args_ba) = (qdisc_args(a_to_b)?, qdisc_args(b_to_a)?);
        let ip_ns = |args: &[&str]| {
            let mut v = vec!["-n", ns];
            v.extend_from_slice(args);
            cmd("ip", &v)
        };
        if ip_ns(&["link", "show", "br0"]).is_err() {
            ip_ns(&["link", "add", "br0", "type", "bridge", "stp_state", "0"])?;
            for port in [a, b] {
                ip_ns(&["link", "set", port, "master", "br0"])?;
            }
            ip_ns(&["link", "set", "br0", "up"])?;
        }
        for (dev, args) in [(b, &args_ab), (a, &args_ba)] {
            let mut v = vec![
                "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev, "root",
            ];
            v.extend(args.iter().map(String::as_str));
            cmd("ip", &v)?;
        }
        Ok(NetemLink {
            ns: ns.into(),
            a: a.into(),
            b: b.into(),
            stopped: false,
        })
    }

    fn stats(&self, dev: &str) -> DirCounters {
        cmd(
            "ip",
            &[
                "netns", "exec", &self.ns, "tc", "-s", "-j", "qdisc", "show", "dev", dev,
            ],
        )
        .and_then(|j| parse_qdisc_stats(&j))
        .unwrap_or_default()
    }

    /// Reads the counters and removes the qdiscs (the bridge stays until the namespace goes).
    pub fn stop(mut self) -> (DirCounters, DirCounters) {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> (DirCounters, DirCounters) {
        self.stopped = true;
        let (ab, ba) = (self.stats(&self.b), self.stats(&self.a));
        for dev in [&self.a, &self.b] {
            let _ = cmd(
                "ip",
                &[
                    "netns", "exec", &self.ns, "tc", "qdisc", "del", "dev", dev, "root",
                ],
            );
        }
        (ab, ba)
    }
}

impl Drop for NetemLink {
    fn drop(&mut self) {
        if !self.stopped {
            let _ = self.stop_inner();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn spec(delay_ms: u64, rate_bps: u64, loss: LossModel, queue: usize) -> LinkSpec {
        LinkSpec {
            delay: Duration::from_millis(delay_ms),
            rate_bps,
            loss,
            queue_packets: queue,
            queue_bytes: 0,
            drop: crate::droprule::DropRules::default(),
        }
    }

    #[test]
    fn random_loss_link_becomes_one_netem_qdisc() {
        // Robin #2 near link: 1 ms, 100 Mbit/s, 1 % loss, 1000 packets; BDP ≈ 8.3 → 9 packets.
        let a = qdisc_args(&spec(1, 100_000_000, LossModel::Random { p: 0.01 }, 1000)).unwrap();
        assert_eq!(
            a.join(" "),
            "netem delay 1000us loss random 1% rate 100000000bit limit 1009"
        );
    }

    #[test]
    fn gilbert_elliott_maps_to_gemodel_with_bad_then_good_loss() {
        let ge = LossModel::GilbertElliott {
            p: 0.00069,
            r: 0.0693,
            loss_good: 0.0,
            loss_bad: 1.0,
        };
        let a = qdisc_args(&spec(1, 0, ge, 1000)).unwrap();
        assert_eq!(
            a.join(" "),
            "netem delay 1000us loss gemodel 0.069% 6.93% 100% 0% limit 101000"
        );
    }

    #[test]
    fn lossless_link_has_no_loss_clause_and_byte_queues_are_refused() {
        let a = qdisc_args(&spec(25, 10_000_000, LossModel::None, 50)).unwrap();
        // 10 Mbit/s × 25 ms = 31 250 bytes ≈ 20.8 → 21 packets in the delay line.
        assert_eq!(a.join(" "), "netem delay 25000us rate 10000000bit limit 71");
        let mut s = spec(1, 0, LossModel::None, 10);
        s.queue_bytes = 64_000;
        assert!(matches!(qdisc_args(&s), Err(LabError::Config(_))));
    }

    #[test]
    fn auto_falls_back_and_forced_netem_names_the_missing_qdisc() {
        let missing = || Err("Error: Specified qdisc kind is unknown.".to_string());
        assert_eq!(
            resolve_with(BackendChoice::Auto, missing).unwrap(),
            LinkBackend::Userspace
        );
        assert_eq!(
            resolve_with(BackendChoice::Auto, || Ok(())).unwrap(),
            LinkBackend::Netem
        );
        let e = resolve_with(BackendChoice::Netem, missing)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("netem") && e.contains("qdisc kind is unknown"),
            "{e}"
        );
        assert_eq!(
            resolve_with(BackendChoice::Userspace, || panic!("no probe needed")).unwrap(),
            LinkBackend::Userspace
        );
    }

    #[test]
    fn qdisc_counters_from_tc_json() {
        let j = r#"[{"kind":"netem","handle":"8001:","root":true,"bytes":150000,"packets":100,"drops":3,"overlimits":0},
                   {"kind":"pfifo_fast","bytes":1,"packets":1,"drops":0}]"#;
        let c = parse_qdisc_stats(j).unwrap();
        assert_eq!(
            (c.offered, c.delivered, c.delivered_bytes, c.dropped_loss),
            (103, 100, 150_000, 3)
        );
        assert!(parse_qdisc_stats(r#"[{"kind":"noqueue"}]"#).is_err());
        assert!(parse_qdisc_stats("x").is_err());
    }
}
