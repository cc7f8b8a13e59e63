//! `sidekick-lab`: build namespace topologies with emulated links, check them, and run
//! scenarios (see `sidekick-lab --help` and interop/README.md).

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use sidekick_lab::cleanup::{self, CleanMode};
use sidekick_lab::netem::{self, BackendChoice};
use sidekick_lab::probe;
use sidekick_lab::runner::{self, RunOptions};
use sidekick_lab::scenario::Scenario;
use sidekick_lab::topo::{ApMode, TopoConfig, Topology};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Parser)]
#[command(
    version,
    about = "Network-namespace lab: emulated links, link checks, experiments, plots"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Remove namespaces and processes of lab runs whose owner died; live runs are left alone.
    Clean {
        /// Remove every run; refused while a run is live unless --force.
        #[arg(long)]
        all: bool,
        /// With --all: remove live runs too (breaks their experiments).
        #[arg(long, requires = "all")]
        force: bool,
        /// Only print what would be removed.
        #[arg(long)]
        dry_run: bool,
    },
    /// Build the scenario's topology and measure every link direction (delay, loss, rate).
    CheckLinks {
        /// Scenario file (or the name of a shipped scenario).
        scenario: String,
        /// Overrides, e.g. `--set lan.loss=2.5%`.
        #[arg(long = "set")]
        sets: Vec<String>,
        /// Skip the rate blasts.
        #[arg(long)]
        no_rate: bool,
        /// Write the checks as JSON.
        #[arg(long)]
        json: Option<PathBuf>,
        /// How to emulate links: netem when the kernel has it (auto), or always one of them.
        #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
        link_backend: BackendChoice,
    },
    /// Run a scenario: every variant in alternation, trials, JSON and plots.
    Run {
        /// Scenario file (or the name of a shipped scenario).
        scenario: String,
        /// Overrides, e.g. `--set wan.delay=40ms`.
        #[arg(long = "set")]
        sets: Vec<String>,
        /// Trials per variant (default: the scenario's).
        #[arg(long)]
        trials: Option<usize>,
        /// Number the trials from this index (each trial's link loss pattern is seeded by its
        /// index: `--first-trial 3 --trials 1` reruns the fourth trial's pattern alone).
        #[arg(long, default_value_t = 0)]
        first_trial: usize,
        /// Run only these variants (comma-separated names; default: every variant).
        #[arg(long, value_delimiter = ',')]
        variants: Vec<String>,
        /// Results file.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Directory for PNG and SVG plots.
        #[arg(long)]
        plot: Option<PathBuf>,
        /// Check the links before the trials (stored in the JSON); abort if any is off.
        #[arg(long)]
        check_links: bool,
        /// Where application binaries live (default: next to this executable).
        #[arg(long)]
        bin_dir: Option<PathBuf>,
        /// How to emulate links: netem when the kernel has it (auto), or always one of them.
        #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
        link_backend: BackendChoice,
    },
    /// Run a scenario once per value of one parameter and plot metric vs parameter; or, with
    /// `--grid`, once per point of a settings grid, writing a Markdown table (`--table`).
    Sweep {
        /// Scenario file (or the name of a shipped scenario).
        scenario: String,
        /// Parameter to sweep, e.g. `lan.loss`.
        #[arg(long, required_unless_present = "grid", requires = "values")]
        param: Option<String>,
        /// Comma-separated values, e.g. `0%,1%,2%,4%`.
        #[arg(long)]
        values: Option<String>,
        /// A grid axis `key=v1;v2;v3` (`;`-separated, so values may hold commas); repeat for
        /// more axes: every combination runs (first axis slowest). Excludes --param.
        #[arg(long, conflicts_with = "param")]
        grid: Vec<String>,
        /// With --grid: write the Markdown table (one row per point: the first metric's median
        /// and quartiles per variant, and each variant minus the first) to this file.
        #[arg(long)]
        table: Option<PathBuf>,
        /// Further overrides.
        #[arg(long = "set")]
        sets: Vec<String>,
        /// Trials per variant and value.
        #[arg(long)]
        trials: Option<usize>,
        /// Results file (all runs).
        #[arg(long)]
        json: Option<PathBuf>,
        /// Directory for plots.
        #[arg(long)]
        plot: Option<PathBuf>,
        /// Where application binaries live (default: next to this executable).
        #[arg(long)]
        bin_dir: Option<PathBuf>,
        /// How to emulate links: netem when the kernel has it (auto), or always one of them.
        #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
        link_backend: BackendChoice,
    },
    /// A short visible comparison (scenarios/demo.toml): a quinn upload over a lossy near link
    /// (Robin #2 links), end to end vs with the sidekick proxy and PACUBIC; prints the table and
    /// the goodput ratio.
    Demo {
        /// Directory for plots.
        #[arg(long, default_value = "lab-results")]
        plot: PathBuf,
        /// Trials per variant (default: the demo scenario's).
        #[arg(long)]
        trials: Option<usize>,
        /// Overrides, e.g. `--set lan.loss=1%`.
        #[arg(long = "set")]
        sets: Vec<String>,
        /// Where application binaries live (default: next to this executable).
        #[arg(long)]
        bin_dir: Option<PathBuf>,
        /// How to emulate links: netem when the kernel has it (auto), or always one of them.
        #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
        link_backend: BackendChoice,
    },
}

/// Other names of shipped scenarios: the names the project's issues and docs use for the
/// papers' experiments.
const SCENARIO_ALIASES: [(&str, &str); 5] = [
    ("robin-media", "robin-1-media"),
    ("robin-upload", "robin-2-upload"),
    ("robin-ack-reduction", "robin-3-ack-reduction"),
    ("packrat-http", "packrat-wifi"),
    ("packrat-media", "packrat-satellite"),
];

fn scenario_path(s: &str) -> PathBuf {
    let p = PathBuf::from(s);
    if p.exists() {
        return p;
    }
    let name = SCENARIO_ALIASES
        .iter()
        .find(|(alias, _)| *alias == s)
        .map_or(s, |(_, name)| name);
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(format!("{name}.toml"))
}

fn stop_flag() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handler")?;
    }
    Ok(stop)
}

fn bin_dir(opt: Option<PathBuf>) -> Result<PathBuf> {
    match opt {
        Some(d) => Ok(d),
        None => Ok(std::env::current_exe()?
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()),
    }
}

fn run_and_report(
    scn: &Scenario,
    opts: &RunOptions,
    json: Option<PathBuf>,
    plot: Option<PathBuf>,
) -> Result<runner::RunResult> {
    let r = runner::run(scn, opts, |_, _| {}).context("running the scenario")?;
    if !r.link_checks.is_empty() {
        println!("{}", probe::format_checks(&r.link_checks));
    }
    for m in &scn.metrics {
        println!("{}", runner::format_table(&r, m));
    }
    if let Some(j) = json {
        std::fs::write(&j, serde_json::to_string_pretty(&r)?)
            .with_context(|| format!("writing {}", j.display()))?;
        println!("results: {}", j.display());
    }
    if let Some(d) = plot {
        std::fs::create_dir_all(&d)?;
        for m in &scn.metrics {
            for f in sidekick_lab::plot::bars(&r, m, &d, &format!("{}-{m}-bars", r.scenario))?
                .into_iter()
                .chain(sidekick_lab::plot::cdf(
                    &r,
                    m,
                    &d,
                    &format!("{}-{m}-cdf", r.scenario),
                )?)
            {
                println!("plot: {}", f.display());
            }
        }
    }
    if opts.stop.load(Ordering::Relaxed) {
        bail!("interrupted (topology removed)");
    }
    if r.variants
        .iter()
        .all(|v| v.skipped.is_some() || v.trials.iter().all(|t| t.error.is_some()))
    {
        bail!("no variant produced a successful trial");
    }
    Ok(r)
}

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().cmd {
        Cmd::Clean {
            all,
            force,
            dry_run,
        } => {
            let mode = if all {
                CleanMode::All { force }
            } else {
                CleanMode::Dead
            };
            let r = cleanup::clean(mode, dry_run).context("cleaning")?;
            let verb = if dry_run { "would remove" } else { "removed" };
            for run in &r.removed {
                println!(
                    "{verb} {} ({}, {} namespace(s))",
                    run.id,
                    run.owner,
                    run.namespaces.len()
                );
            }
            for run in &r.kept_live {
                println!("left alone {} ({})", run.id, run.owner);
            }
            println!(
                "{verb} {} run(s), {} namespace(s); {} live run(s) left alone",
                r.removed.len(),
                r.removed_namespaces,
                r.kept_live.len()
            );
        }
        Cmd::CheckLinks {
            scenario,
            sets,
            no_rate,
            json,
            link_backend,
        } => {
            let stop = stop_flag()?;
            let scn = Scenario::load(&scenario_path(&scenario), &sets)?;
            println!(
                "{}: wan {} | lan {} | {} client(s)",
                scn.name, scn.wan, scn.lan, scn.clients
            );
            let backend = netem::resolve(link_backend)?;
            println!("links emulated by: {backend}");
            let t = Topology::up_with(
                &TopoConfig {
                    clients: scn.clients,
                    wan: scn.wan,
                    lan: scn.lan,
                    seed: 1,
                    ap: ApMode::Router,
                },
                backend,
            )?;
            let checks = probe::check_links(&t, &scn.wan, &scn.lan, !no_rate)?;
            let stats = {
                let mut t = t;
                let s = t.stop_links();
                t.down()?;
                s
            };
            print!("{}", probe::format_checks(&checks));
            for (name, s) in stats {
                println!(
                    "element {name}: timer lateness p50 {:.0} us, p99 {:.0} us, max {:.0} us over {} frames; csum filled {}, send errors {}",
                    s.late_p50_us,
                    s.late_p99_us,
                    s.late_max_us,
                    s.late_samples,
                    s.csum_filled,
                    s.send_errors
                );
            }
            if let Some(j) = json {
                std::fs::write(&j, serde_json::to_string_pretty(&checks)?)?;
            }
            if stop.load(Ordering::Relaxed) {
                bail!("interrupted");
            }
            let failed = checks.iter().filter(|c| !c.pass).count();
            if failed > 0 {
                bail!("{failed} link check(s) out of tolerance");
            }
            println!("all {} link checks within tolerance", checks.len());
        }
        Cmd::Run {
            scenario,
            sets,
            trials,
            first_trial,
            variants,
            json,
            plot,
            check_links,
            bin_dir: bd,
            link_backend,
        } => {
            let stop = stop_flag()?;
            let mut scn = Scenario::load(&scenario_path(&scenario), &sets)?;
            scn.keep_variants(&variants)?;
            eprintln!("{}: wan {} | lan {}", scn.name, scn.wan, scn.lan);
            let opts = RunOptions {
                trials,
                first_trial,
                bin_dir: bin_dir(bd)?,
                stop,
                progress: true,
                check_links,
                link_backend: netem::resolve(link_backend)?,
            };
            run_and_report(&scn, &opts, json, plot)?;
        }
        Cmd::Sweep {
            scenario,
            param,
            values,
            grid,
            table,
            sets,
            trials,
            json,
            plot,
            bin_dir: bd,
            link_backend,
        } => {
            let stop = stop_flag()?;
            let opts = RunOptions {
                trials,
                first_trial: 0,
                bin_dir: bin_dir(bd)?,
                stop,
                progress: true,
                check_links: false,
                link_backend: netem::resolve(link_backend)?,
            };
            if !grid.is_empty() {
                return sweep_grid(&scenario, &grid, &sets, &opts, json, table);
            }
            let (param, values) = (param.unwrap_or_default(), values.unwrap_or_default());
            let mut points = Vec::new();
            let mut runs = Vec::new();
            let mut metric = String::from("goodput_mbps");
            for v in values.split(',').map(str::trim).filter(|v| !v.is_empty()) {
                let mut s = sets.clone();
                s.push(format!("{param}={v}"));
                let scn = Scenario::load(&scenario_path(&scenario), &s)?;
                metric = scn.metrics.first().cloned().unwrap_or(metric);
                eprintln!("{param} = {v}");
                let r = runner::run(&scn, &opts, |_, _| {})?;
                let mut per = std::collections::BTreeMap::new();
                for vr in &r.variants {
                    if let Some(x) = vr.summary.get(&metric) {
                        per.insert(vr.name.clone(), (x.median, x.q1, x.q3));
                    }
                }
                println!("{param} = {v}\n{}", runner::format_table(&r, &metric));
                points.push(sidekick_lab::plot::SweepPoint {
                    value: v.to_string(),
                    x: sidekick_lab::plot::numeric_prefix(v),
                    variants: per,
                });
                runs.push(r);
                if opts.stop.load(Ordering::Relaxed) {
                    bail!("interrupted");
                }
            }
            if let Some(j) = json {
                let doc = serde_json::json!({ "param": param, "metric": metric, "points": points, "runs": runs });
                std::fs::write(&j, serde_json::to_string_pretty(&doc)?)?;
                println!("results: {}", j.display());
            }
            if let Some(d) = plot {
                std::fs::create_dir_all(&d)?;
                let stem = format!(
                    "{}-{metric}-vs-{}",
                    runs.first().map_or("sweep", |r| r.scenario.as_str()),
                    param.replace('.', "-")
                );
                for f in sidekick_lab::plot::sweep(&points, &param, &metric, &d, &stem)? {
                    println!("plot: {}", f.display());
                }
            }
        }
        Cmd::Demo {
            plot,
            trials,
            sets,
            bin_dir: bd,
            link_backend,
        } => {
            let stop = stop_flag()?;
            let scn = Scenario::load(&scenario_path("demo"), &sets)?;
            eprintln!(
                "demo: {}\n  wan {}\n  lan {}\n  {} trial(s) per variant, variants in alternation",
                scn.description,
                scn.wan,
                scn.lan,
                trials.unwrap_or(scn.trials)
            );
            let opts = RunOptions {
                trials,
                first_trial: 0,
                bin_dir: bin_dir(bd)?,
                stop,
                progress: true,
                check_links: false,
                link_backend: netem::resolve(link_backend)?,
            };
            std::fs::create_dir_all(&plot)?;
            let r = run_and_report(&scn, &opts, Some(plot.join("demo.json")), Some(plot))?;
            println!("{}", runner::format_comparison(&r, "goodput_mbps"));
        }
    }
    Ok(())
}

/// `sweep --grid`: every point of the grid, a table row printed (and appended to `table`) as
/// soon as the point is done.
fn sweep_grid(
    scenario: &str,
    grid: &[String],
    sets: &[String],
    opts: &RunOptions,
    json: Option<PathBuf>,
    table: Option<PathBuf>,
) -> Result<()> {
    use sidekick_lab::sweep;
    let axes = grid
        .iter()
        .map(|g| sweep::parse_axis(g))
        .collect::<Result<Vec<_>, _>>()?;
    let points = sweep::points(&axes)?;
    let mut runs = Vec::new();
    let mut text = String::new();
    for (i, p) in points.iter().enumerate() {
        let mut s = sets.to_vec();
        s.extend(p.iter().cloned());
        let scn = Scenario::load(&scenario_path(scenario), &s)?;
        let metric = scn
            .metrics
            .first()
            .cloned()
            .unwrap_or_else(|| "goodput_mbps".into());
        eprintln!("point {}/{}: {}", i + 1, points.len(), p.join(" "));
        let r = runner::run(&scn, opts, |_, _| {})?;
        if text.is_empty() {
            let names: Vec<String> = r.variants.iter().map(|v| v.name.clone()).collect();
            text = sweep::table_header(&axes, &names, &metric);
            print!("{text}");
        }
        let row = sweep::table_row(p, &r, &metric);
        print!("{row}");
        text.push_str(&row);
        if let Some(t) = &table {
            std::fs::write(t, &text).with_context(|| format!("writing {}", t.display()))?;
        }
        runs.push(serde_json::json!({ "point": p, "run": r }));
        if let Some(j) = &json {
            let doc = serde_json::json!({ "grid": grid, "sets": sets, "runs": runs });
            std::fs::write(j, serde_json::to_string_pretty(&doc)?)?;
        }
        if opts.stop.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_name_shipped_scenarios() {
        for (alias, name) in SCENARIO_ALIASES {
            let p = scenario_path(alias);
            assert!(p.exists(), "{alias} -> {}", p.display());
            assert!(p.ends_with(format!("{name}.toml")));
        }
        assert!(scenario_path("demo").exists());
    }
}
