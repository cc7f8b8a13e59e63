//! The metrics of a trial that the runner derives: the client's JSON report flattened into named
//! numbers, the ratios and differences computed from them, and the link element's counters.

use crate::element::ElementStats;
use std::collections::BTreeMap;

/// Stores every numeric field of the client's JSON line, and the fields of nested objects
/// (the `sidekick` counters of `sidekick-transfer --sidekick`) as `<object>_<field>`, booleans as
/// 0/1, a nested field's short lower-case word value as `<object>_<field>_<word>` = 1.
pub fn add_client_json(metrics: &mut BTreeMap<String, f64>, j: &serde_json::Value) {
    fn num(v: &serde_json::Value) -> Option<f64> {
        v.as_f64()
            .or_else(|| v.as_bool().map(|b| f64::from(u8::from(b))))
    }
    for (k, val) in j.as_object().into_iter().flatten() {
        if let Some(obj) = val.as_object() {
            for (k2, v2) in obj {
                if let Some(f) = num(v2) {
                    metrics.insert(format!("{k}_{k2}"), f);
                } else if let Some(word) = v2.as_str().filter(|w| is_metric_word(w)) {
                    // A named state (`"fallback_cause": "holds_unrepaired"`) as a 0/1 metric:
                    // `sidekick_fallback_cause_holds_unrepaired = 1`.
                    metrics.insert(format!("{k}_{k2}_{word}"), 1.0);
                }
            }
        } else if let Some(f) = num(val) {
            metrics.insert(k.clone(), f);
        }
    }
}

/// A short identifier-like word (`holds_unrepaired`): fit to be part of a metric name.
fn is_metric_word(w: &str) -> bool {
    !w.is_empty()
        && w.len() <= 40
        && w.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The metric names of issue 9, derived from the raw per-trial figures:
///
/// - `client_pkts_sent`: packets the client's interface transmitted (base connection and
///   sidekick socket together).
/// - `proxy_pkts_sent`: packets the proxy sent: quACKs, resets and injected frames (discovery
///   replies, Packrat retransmissions); 0 without a proxy; from the metrics endpoint, or the
///   quACK count of its final log line when metrics are off.
/// - `sidekick_overhead_pct`: `proxy_pkts_sent` as a percentage of `client_pkts_sent`
///   (Sidekick (NSDI '24) Fig. 7's link overhead, for uploads).
/// - `spurious_retx`: an estimate of the data sender's end-to-end loss declarations for packets
///   that had in fact arrived: `lost_packets` minus the packets still missing, i.e. the frames the
///   emulated links dropped in the data direction (loss and queue drops) less the repairs of the
///   sidekick: the client's early resends (`sidekick_retransmissions`, Robin) and the proxy's
///   retransmissions (`proxy_retransmissions_total`, Packrat); 0 when negative. For a quinn
///   upload this counts quinn's retransmissions of packets the sidekick already repaired; for a
///   download, the server's loss declarations for packets the proxy repaired.
/// - `bytes_per_link_<link>_<down|up>`: bytes each emulated link direction delivered.
/// - `retx_amplification`: frames the box sent on in the data direction per frame it received
///   (download: `lan0_down_offered / wan_down_delivered`; upload: `wan_up_offered /
///   lan0_up_delivered`): 1.0 for a plain bridge, `1 + retransmissions / forwarded` with PEMI or
///   Packrat (PEMI §4.6 caps PEMI's share at 10 %); PEMI's ICMP probes are left out. `both`
///   (an upload beside a download): the download's form, where the box's retransmissions go.
pub fn derive_metrics(m: &mut BTreeMap<String, f64>, direction: &str) {
    let get = |m: &BTreeMap<String, f64>, k: &str| m.get(k).copied().unwrap_or(0.0);
    if let Some(c) = m.get("cli0_tx_packets").copied() {
        m.insert("client_pkts_sent".into(), c);
    }
    let proxy_sent = if m.contains_key("proxy_quacks_sent_total") {
        get(m, "proxy_quacks_sent_total")
            + get(m, "proxy_resets_sent_total")
            + get(m, "proxy_injected_total")
    } else {
        get(m, "proxy_log_quacks") + get(m, "proxy_log_retransmissions")
    };
    m.insert("proxy_pkts_sent".into(), proxy_sent);
    let base = get(m, "client_pkts_sent");
    if base > 0.0 {
        m.insert("sidekick_overhead_pct".into(), 100.0 * proxy_sent / base);
    }
    // `both`: data flows either way, and `lost_packets` is both senders' sum.
    let dirs: &[&str] = match direction {
        "upload" => &["up"],
        "both" => &["up", "down"],
        _ => &["down"],
    };
    let mut dropped = 0.0;
    for (k, v) in m.iter() {
        for dir in dirs {
            if k.ends_with(&format!("_{dir}_dropped_loss"))
                || k.ends_with(&format!("_{dir}_dropped_queue"))
                || k.ends_with(&format!("_{dir}_dropped_rule"))
            {
                dropped += v;
            }
        }
    }
    let repaired = get(m, "sidekick_retransmissions") + get(m, "proxy_retransmissions_total");
    let missing = (dropped - repaired).max(0.0);
    if let Some(lost) = m.get("lost_packets").copied() {
        m.insert("spurious_retx".into(), (lost - missing).max(0.0));
    }
    // PEMI §4.6 bounds what an in-network box may add: frames the client-side link was
    // offered in the data direction per frame the wide-area link delivered to the box (1.0 for
    // a plain bridge; PEMI's retransmissions and discovery replies add to it). Upload: the
    // other way round (the client side offers, the wide-area side carries what left the box).
    let (num, den) = if direction == "upload" {
        ("wan_up_offered", "lan0_up_delivered")
    } else {
        ("lan0_down_offered", "wan_down_delivered")
    };
    // PEMI's ICMP calibration probes (tiny, towards the receiver) are overhead, not
    // retransmissions: they are reported as `proxy_pemi_icmp_probes_total`.
    let probes = if direction == "upload" {
        0.0
    } else {
        get(m, "proxy_pemi_icmp_probes_total")
    };
    if get(m, den) > 0.0 && m.contains_key(num) {
        m.insert(
            "retx_amplification".into(),
            (get(m, num) - probes) / get(m, den),
        );
    }
}

pub(crate) fn add_element_metrics(m: &mut BTreeMap<String, f64>, link: &str, s: &ElementStats) {
    // Direction names: a→b is towards the client (down) for both wan and lan elements.
    for (dir, c) in [("down", &s.a_to_b), ("up", &s.b_to_a)] {
        c.add_metrics(m, link, dir);
    }
    m.insert(format!("{link}_late_p99_us"), s.late_p99_us);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_json_and_derived_metrics() {
        let mut m = BTreeMap::new();
        let j: serde_json::Value = serde_json::from_str(
            r#"{"stack":"quinn","goodput_mbps":7.5,"lost_packets":120,"sidekick":{"quacks":300,"active":true,"fallback":false,"state":"fallback","fallback_cause":"resends_unneeded","note":"Not A Word"}}"#,
        )
        .unwrap();
        add_client_json(&mut m, &j);
        assert_eq!(m["goodput_mbps"], 7.5);
        // Named states of nested objects become 0/1 metrics; free text does not.
        assert_eq!(m["sidekick_fallback_cause_resends_unneeded"], 1.0);
        assert_eq!(m["sidekick_state_fallback"], 1.0);
        assert!(!m.keys().any(|k| k.starts_with("sidekick_note")));
        assert_eq!(m["sidekick_quacks"], 300.0);
        assert_eq!(m["sidekick_active"], 1.0);
        assert_eq!(m["sidekick_fallback"], 0.0);
        assert!(!m.contains_key("stack"));
        // sidekick-rtc's line: every numeric key is a metric; a percentile without samples
        // (null) is left out.
        let mut r = BTreeMap::new();
        let j: serde_json::Value = serde_json::from_str(
            r#"{"stack":"quinn","frames_sent":600,"frames_received":600,"frame_delay_p50_ms":27.5,"frame_delay_p90_ms":31.0,"frame_delay_p99_ms":80.25,"frame_jitter_p50_ms":0.5,"frame_jitter_p90_ms":2.0,"frame_jitter_p99_ms":null,"goodput_mbps":2.99,"duration_s":20.05}"#,
        )
        .unwrap();
        add_client_json(&mut r, &j);
        assert_eq!(r["frame_jitter_p90_ms"], 2.0);
        assert_eq!(r["frame_delay_p90_ms"], 31.0);
        assert_eq!(r["goodput_mbps"], 2.99);
        assert_eq!(r["frames_received"], 600.0);
        assert!(!r.contains_key("frame_jitter_p99_ms"));
        assert_eq!(r.len(), 9);
        m.insert("cli0_tx_packets".into(), 9000.0);
        m.insert("proxy_quacks_sent_total".into(), 400.0);
        m.insert("proxy_injected_total".into(), 2.0);
        m.insert("proxy_resets_sent_total".into(), 3.0);
        m.insert("lan0_up_dropped_loss".into(), 90.0);
        m.insert("wan_up_dropped_queue".into(), 10.0);
        m.insert("lan0_down_dropped_loss".into(), 1000.0);
        derive_metrics(&mut m, "upload");
        assert_eq!(m["client_pkts_sent"], 9000.0);
        assert_eq!(m["proxy_pkts_sent"], 405.0);
        assert!((m["sidekick_overhead_pct"] - 4.5).abs() < 1e-9);
        // 120 declared lost, 100 dropped in the upload direction.
        assert_eq!(m["spurious_retx"], 20.0);
        // The sidekick repaired 60 of the drops early: 40 were missing, 80 declarations spurious.
        m.insert("sidekick_retransmissions".into(), 60.0);
        derive_metrics(&mut m, "upload");
        assert_eq!(m["spurious_retx"], 80.0);
        // Packrat: the proxy's retransmissions repair drops too.
        let mut d = BTreeMap::from([
            ("lost_packets".to_string(), 50.0),
            ("lan0_down_dropped_loss".to_string(), 30.0),
            ("proxy_retransmissions_total".to_string(), 25.0),
        ]);
        derive_metrics(&mut d, "download");
        assert_eq!(d["spurious_retx"], 45.0);
        assert!(!d.contains_key("retx_amplification"));
        // Retransmission amplification: 1000 frames reached the box, 1050 went to the client.
        d.insert("wan_down_delivered".into(), 1000.0);
        d.insert("lan0_down_offered".into(), 1050.0);
        derive_metrics(&mut d, "download");
        assert!((d["retx_amplification"] - 1.05).abs() < 1e-9);
        // PEMI's ICMP probes to the client are not retransmissions.
        d.insert("lan0_down_offered".into(), 1070.0);
        d.insert("proxy_pemi_icmp_probes_total".into(), 20.0);
        derive_metrics(&mut d, "download");
        assert!((d["retx_amplification"] - 1.05).abs() < 1e-9);
        // Without a proxy: nothing sent by it; without the proxy's metrics, its final log line.
        let mut e = BTreeMap::from([("lost_packets".to_string(), 5.0)]);
        e.insert("lan0_down_dropped_loss".into(), 9.0);
        derive_metrics(&mut e, "download");
        assert_eq!(e["proxy_pkts_sent"], 0.0);
        assert_eq!(e["spurious_retx"], 0.0);
        let mut l = BTreeMap::from([("proxy_log_quacks".to_string(), 17.0)]);
        derive_metrics(&mut l, "upload");
        assert_eq!(l["proxy_pkts_sent"], 17.0);
        // `both`: the drops of either direction count, against both senders' declarations
        // (summed in `lost_packets`) and both repairs (Robin's resends, Packrat's).
        let mut b = BTreeMap::from([
            ("lost_packets".to_string(), 70.0),
            ("lan0_down_dropped_loss".to_string(), 30.0),
            ("lan0_up_dropped_loss".to_string(), 20.0),
            ("sidekick_retransmissions".to_string(), 15.0),
            ("proxy_retransmissions_total".to_string(), 25.0),
        ]);
        derive_metrics(&mut b, "both");
        assert_eq!(b["spurious_retx"], 60.0);
    }
}
