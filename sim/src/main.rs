//! `sidekick-sim`: run the lab's scenarios in virtual time.
//!
//! ```text
//! sidekick-sim run robin-2-upload --trials 20 --set lan.loss=2% [--seed S] [--first-trial N] [--json FILE]
//! sidekick-sim study scale|fairness|sweep ...
//! ```

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use sidekick_lab::scenario::Scenario;
use sidekick_sim::run::{SimOptions, run};
use sidekick_sim::studies::cli::Study;

/// Counts live heap bytes for `study scale`.
#[global_allocator]
static ALLOC: sidekick_sim::studies::alloc::Counting = sidekick_sim::studies::alloc::Counting;

/// The lab's experiments in virtual time: same scenarios, same metrics, seconds instead of
/// minutes, the same result for the same seed.
#[derive(Debug, Parser)]
#[command(version)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run a scenario (a name from the scenarios directory, or a TOML file).
    Run {
        /// Scenario name or file.
        scenario: String,
        /// Trials per variant (default: the scenario's).
        #[arg(long)]
        trials: Option<usize>,
        /// Overrides, `key.path=value` (repeatable), as the lab's `--set`.
        #[arg(long = "set")]
        sets: Vec<String>,
        /// Run only these variants (comma-separated names; default: every variant), as the
        /// lab's `--variants`.
        #[arg(long, value_delimiter = ',')]
        variants: Vec<String>,
        /// Seed of the run.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Index of the first trial (its seeds, as in a longer run with the same seed).
        #[arg(long, default_value_t = 0)]
        first_trial: usize,
        /// Write the results (the lab's JSON layout) to this file.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Directory of scenario files.
        #[arg(long)]
        scenarios_dir: Option<PathBuf>,
        /// No per-trial progress lines.
        #[arg(long)]
        quiet: bool,
    },
    /// Studies the lab cannot run: an access point at scale, fairness on a shared bottleneck,
    /// large sweeps with heat maps.
    Study {
        #[command(subcommand)]
        study: Study,
    },
}

fn scenario_path(name: &str, dir: Option<&Path>) -> PathBuf {
    let p = Path::new(name);
    if p.exists() {
        return p.to_path_buf();
    }
    let dir = dir.map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../interop/scenarios"),
        Path::to_path_buf,
    );
    dir.join(format!("{name}.toml"))
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().cmd {
        Cmd::Run {
            scenario,
            trials,
            sets,
            variants,
            seed,
            first_trial,
            json,
            scenarios_dir,
            quiet,
        } => {
            let path = scenario_path(&scenario, scenarios_dir.as_deref());
            let mut scn = Scenario::load(&path, &sets)
                .with_context(|| format!("scenario {}", path.display()))?;
            scn.keep_variants(&variants)?;
            let opts = SimOptions {
                trials,
                first_trial,
                seed,
                progress: !quiet,
            };
            let r = run(&scn, &opts).with_context(|| format!("scenario {}", scn.name))?;
            let text = serde_json::to_string_pretty(&r)?;
            if let Some(p) = json {
                std::fs::write(&p, format!("{text}\n"))
                    .with_context(|| format!("writing {}", p.display()))?;
            } else {
                println!("{text}");
            }
            let lab = r.as_lab();
            let metric = scn.metrics.first().map_or("goodput_mbps", String::as_str);
            eprint!("{}", sidekick_lab::runner::format_table(&lab, metric));
            eprint!("{}", sidekick_lab::runner::format_comparison(&lab, metric));
        }
        Cmd::Study { study } => sidekick_sim::studies::cli::run(study)?,
    }
    Ok(())
}
