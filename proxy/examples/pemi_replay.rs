//! Replay a recorded flow through PEMI and score its loss inference against a link's drop log.
//!
//! ```text
//! cargo run --release -p sidekick-proxy --example pemi_replay -- TRACE [DROPS...]
//! ```
//!
//! TRACE is written by `sidekick-proxy --pemi-trace FILE`; DROPS are the lab's drop logs
//! (`SIDEKICK_LAB_DROP_LOG=<dir>`, one `<namespace>.drops` per link element). Prints the engine's
//! counters and, with drop logs, how many retransmissions repaired a real loss (precision) and
//! how many real losses were repaired (recall). The retransmission budget is lifted (set to 100 %)
//! so that every inferred loss is counted; `--budget 0.1` restores the paper's 10 %. `--penalty F`
//! sets `PemiConfig::loss_penalty_spacing` (0 = the paper's plain DP); `--no-gap` turns the
//! reply-length gap signal off (timing-only inference, the paper's), `--timing` lets the
//! timing inference retransmit while the gap signal measures the flow too (off by default),
//! `--no-second-guess` sets `PemiConfig::gap_second_guess_share` to 0,
//! `--calibrate-us N` hands the engine a receiver-side calibration sample of N µs every 50 ms
//! (what the live proxy's ICMP probes measure; a trace does not record them).

use anyhow::Context as _;
use sidekick_proxy::pemi::PemiConfig;
use sidekick_proxy::pemi::trace::{parse_drops, parse_trace, replay_calibrated, score};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut trace = None;
    let mut drops = std::collections::HashSet::new();
    let mut calibration = None;
    let mut cfg = PemiConfig {
        retx_budget: 1.0,
        enforce_delay: false,
        ..PemiConfig::default()
    };
    while let Some(a) = args.next() {
        if a == "--penalty" {
            let v = args.next().context("--penalty needs a value")?;
            cfg.loss_penalty_spacing = v.parse().context("--penalty")?;
        } else if a == "--calibrate-us" {
            let v: u64 = args
                .next()
                .context("--calibrate-us needs a value")?
                .parse()?;
            calibration = Some(std::time::Duration::from_micros(v));
        } else if a == "--no-gap" {
            cfg.gap_signal = false;
        } else if a == "--no-second-guess" {
            cfg.gap_second_guess_share = 0;
        } else if a == "--timing" {
            cfg.timing_retx = true;
        } else if a == "--budget" {
            let v = args.next().context("--budget needs a value")?;
            cfg.retx_budget = v.parse().context("--budget")?;
        } else if trace.is_none() {
            trace = Some(a);
        } else {
            let text = std::fs::read_to_string(&a).with_context(|| format!("read {a}"))?;
            drops.extend(parse_drops(&text));
        }
    }
    let path = trace
        .context("usage: pemi_replay TRACE [DROPS...] [--budget F] [--penalty F] [--no-gap] [--no-second-guess] [--timing] [--calibrate-us N]")?;
    let text = std::fs::read_to_string(&path).with_context(|| format!("read {path}"))?;
    let records = parse_trace(&text).with_context(|| format!("parse {path}"))?;
    let r = replay_calibrated(&records, cfg, calibration);
    let s = score(&records, &r, &drops);
    println!("records {}  protected {}", records.len(), s.protected);
    println!("{:#?}", r.stats);
    println!(
        "really lost {}  retransmitted {}  correct {}  precision {:.3}  recall {:.3}",
        s.really_lost,
        s.retransmitted,
        s.correct,
        s.precision(),
        s.recall()
    );
    if std::env::var_os("PEMI_REPLAY_LIST").is_some() {
        for &ix in &r.retransmitted {
            let rec = &records[ix];
            let real = drops.contains(&rec.hash);
            println!(
                "retx {ix} t_us {} {}",
                rec.t_ns / 1000,
                if real { "lost" } else { "spurious" }
            );
        }
        for &ix in &r.protected {
            let rec = &records[ix];
            if drops.contains(&rec.hash) && !r.retransmitted.contains(&ix) {
                println!("missed {ix} t_us {}", rec.t_ns / 1000);
            }
        }
    }
    Ok(())
}
