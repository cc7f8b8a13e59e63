//! Who owns a lab run, and which runs `sidekick-lab clean` may remove.
//!
//! Every run (a [`crate::topo::Topology`]) records its owner under [`STATE_DIR`]`/<run>/`
//! (`owner`: the pid; `owner-start`: the pid's start time, so a reused pid is not mistaken for
//! the owner) *before* it creates any namespace, and publishes that directory with one rename,
//! so a run is never seen half-registered by a concurrent `clean`. Namespaces map to runs by
//! their name: run id `skl` + 5 hex digits, then `-`.
//!
//! Several engineers and CI share one machine, so the rule is that clean-up never destroys a
//! live run it does not own: plain `clean` removes only runs whose owner is dead and orphaned
//! namespaces (no run state at all: a run writes its state before its namespaces, so no live run
//! owns them); `clean --all` refuses while any run is live unless forced.

use crate::topo::{self, LabError, PREFIX};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Where runs record their owner process.
pub const STATE_DIR: &str = "/run/sidekick-lab";

/// A state directory without a readable owner file this young belongs to a run still starting
/// (lab binaries before the atomic publication wrote the owner after creating the directory).
const STARTING_GRACE: Duration = Duration::from_secs(60);

/// What is known of a run's owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// The owning process is running.
    Alive(i32),
    /// The owning process is gone (or its pid now names another process).
    Dead(i32),
    /// A state directory without an owner yet, created moments ago: a run starting.
    Starting,
    /// No usable run state: namespaces left without state, or a stale directory without owner.
    Orphan,
}

impl Owner {
    /// Whether `clean` must treat the run as live.
    pub fn is_live(self) -> bool {
        matches!(self, Owner::Alive(_) | Owner::Starting)
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Owner::Alive(p) => write!(f, "owner pid {p}, alive"),
            Owner::Dead(p) => write!(f, "owner pid {p}, dead"),
            Owner::Starting => f.write_str("starting, owner not yet recorded"),
            Owner::Orphan => f.write_str("no run state"),
        }
    }
}

/// One lab run found on the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// Run id (`skl` + 5 hex digits).
    pub id: String,
    /// Its namespaces.
    pub namespaces: Vec<String>,
    /// Whether it has a state directory.
    pub has_state: bool,
    /// Its owner.
    pub owner: Owner,
}

/// Which runs to remove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CleanMode {
    /// Runs whose owner is dead, and orphaned namespaces.
    Dead,
    /// Every run; refused while a run is live unless `force`.
    All {
        /// Remove live runs too.
        force: bool,
    },
}

/// What `clean` does: runs to remove and live runs left alone.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CleanPlan {
    /// Runs to remove.
    pub remove: Vec<Run>,
    /// Live runs left alone.
    pub keep: Vec<Run>,
}

/// Pid start time (clock ticks since boot, `/proc/<pid>/stat` field 22).
fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The owner of the run whose state directory is `dir` (which may not exist).
fn owner_of(dir: &Path, now: SystemTime) -> Owner {
    let Ok(meta) = std::fs::metadata(dir) else {
        return Owner::Orphan;
    };
    let pid = std::fs::read_to_string(dir.join("owner"))
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    let Some(pid) = pid else {
        let young = meta
            .modified()
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .is_none_or(|age| age < STARTING_GRACE);
        return if young {
            Owner::Starting
        } else {
            Owner::Orphan
        };
    };
    if !crate::sys::process_alive(pid) {
        return Owner::Dead(pid);
    }
    // Older runs record no start time: the pid alone decides (a reused pid keeps them).
    let recorded = std::fs::read_to_string(dir.join("owner-start"))
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    match (recorded, start_time(pid)) {
        (Some(r), Some(now)) if r != now => Owner::Dead(pid),
        _ => Owner::Alive(pid),
    }
}

/// The run id of a lab namespace (`skl` + 5 hex digits), `None` for other names.
pub fn run_of(namespace: &str) -> Option<&str> {
    topo::is_lab_namespace(namespace).then(|| &namespace[..PREFIX.len() + 5])
}

/// The runs on the machine: lab `namespaces` grouped by run id, and every run state directory
/// under `state_dir`, each with its owner.
pub fn survey(state_dir: &Path, namespaces: &[String]) -> Vec<Run> {
    let mut runs: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for ns in namespaces {
        if let Some(id) = run_of(ns) {
            runs.entry(id.to_string()).or_default().push(ns.clone());
        }
    }
    if let Ok(rd) = std::fs::read_dir(state_dir) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if topo::is_lab_namespace(&format!("{name}-")) {
                runs.entry(name).or_default();
            }
        }
    }
    let now = SystemTime::now();
    runs.into_iter()
        .map(|(id, namespaces)| {
            let dir = state_dir.join(&id);
            Run {
                has_state: dir.is_dir(),
                owner: owner_of(&dir, now),
                id,
                namespaces,
            }
        })
        .collect()
}

/// Decides which runs to remove. `All` without `force` fails while any run is live, naming the
/// live runs and their owners.
pub fn plan(runs: Vec<Run>, mode: CleanMode) -> Result<CleanPlan, LabError> {
    let (live, dead): (Vec<Run>, Vec<Run>) = runs.into_iter().partition(|r| r.owner.is_live());
    match mode {
        CleanMode::Dead => Ok(CleanPlan {
            remove: dead,
            keep: live,
        }),
        CleanMode::All { force: true } => Ok(CleanPlan {
            remove: dead.into_iter().chain(live).collect(),
            keep: Vec::new(),
        }),
        CleanMode::All { force: false } if live.is_empty() => Ok(CleanPlan {
            remove: dead,
            keep: Vec::new(),
        }),
        CleanMode::All { force: false } => Err(LabError::Config(format!(
            "refusing `clean --all`: {} live run(s): {} (plain `clean` removes only dead runs; \
             --force removes live runs too and breaks their experiments)",
            live.len(),
            live.iter()
                .map(|r| format!("{} ({})", r.id, r.owner))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// What [`clean`] did (or, dry, would do).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CleanReport {
    /// Runs removed.
    pub removed: Vec<Run>,
    /// Namespaces deleted.
    pub removed_namespaces: usize,
    /// Live runs left alone.
    pub kept_live: Vec<Run>,
}

/// Removes leftovers of lab runs as [`plan`] decides: namespaces (killing the processes inside
/// first) and state directories. With `dry_run`, only reports what it would remove.
pub fn clean(mode: CleanMode, dry_run: bool) -> Result<CleanReport, LabError> {
    let runs = survey(Path::new(STATE_DIR), &topo::lab_namespaces()?);
    let p = plan(runs, mode)?;
    let mut rep = CleanReport {
        removed_namespaces: p.remove.iter().map(|r| r.namespaces.len()).sum(),
        kept_live: p.keep,
        removed: Vec::new(),
    };
    if dry_run {
        rep.removed = p.remove;
        return Ok(rep);
    }
    for run in p.remove {
        for ns in &run.namespaces {
            topo::kill_ns_processes(ns);
        }
        for ns in &run.namespaces {
            topo::ip(&["netns", "del", ns])?;
        }
        let _ = std::fs::remove_dir_all(PathBuf::from(STATE_DIR).join(&run.id));
        rep.removed.push(run);
    }
    Ok(rep)
}

/// Records this process as the owner of run `id` under `state_dir` and returns the run's state
/// directory; `Ok(None)` when the id is taken. The directory is filled under a temporary name and
/// renamed into place, so a concurrent `clean` sees either nothing or a complete owner record.
pub fn register(state_dir: &Path, id: &str) -> Result<Option<PathBuf>, LabError> {
    let io = |what: String| {
        move |source| LabError::Io {
            context: what,
            source,
        }
    };
    std::fs::create_dir_all(state_dir).map_err(io(format!("creating {}", state_dir.display())))?;
    let pid = std::process::id();
    let tmp = state_dir.join(format!(".new-{id}-{pid}"));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir(&tmp).map_err(io(format!("creating {}", tmp.display())))?;
    std::fs::write(tmp.join("owner"), pid.to_string()).map_err(io("writing owner".into()))?;
    if let Some(t) = start_time(i32::try_from(pid).unwrap_or(i32::MAX)) {
        std::fs::write(tmp.join("owner-start"), t.to_string())
            .map_err(io("writing owner start time".into()))?;
    }
    let dir = state_dir.join(id);
    // rename(2) onto a non-empty directory fails: an id in use is never taken over.
    if dir.exists() || std::fs::rename(&tmp, &dir).is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
        return Ok(None);
    }
    Ok(Some(dir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A scratch state directory, removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new() -> Self {
            static N: AtomicUsize = AtomicUsize::new(0);
            let p = std::env::temp_dir().join(format!(
                "sidekick-lab-cleanup-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            Scratch(p)
        }
        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A pid no process can have: pids stay below `pid_max`.
    fn dead_pid() -> i32 {
        let max: i32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(!crate::sys::process_alive(max));
        max
    }

    fn own_pid() -> i32 {
        i32::try_from(std::process::id()).unwrap()
    }

    fn fake_run(state: &Path, id: &str, pid: Option<i32>) {
        std::fs::create_dir_all(state.join(id)).unwrap();
        if let Some(pid) = pid {
            std::fs::write(state.join(id).join("owner"), pid.to_string()).unwrap();
        }
    }

    fn nss(ids: &[&str]) -> Vec<String> {
        ids.iter()
            .flat_map(|id| ["srv", "wan", "ap", "lan0", "cli0"].map(|s| format!("{id}-{s}")))
            .collect()
    }

    fn ids(runs: &[Run]) -> Vec<&str> {
        runs.iter().map(|r| r.id.as_str()).collect()
    }

    /// Live (this test's pid), dead (a pid that cannot exist), orphaned namespaces, a starting
    /// run (state without owner) and a dead run whose namespaces are gone.
    fn machine() -> (Scratch, Vec<Run>) {
        let d = Scratch::new();
        let s = d.path();
        fake_run(s, "skl0000a", Some(own_pid()));
        fake_run(s, "skl0000b", Some(dead_pid()));
        fake_run(s, "skl0000d", None);
        fake_run(s, "skl0000e", Some(dead_pid()));
        std::fs::create_dir_all(s.join(".new-skl0000f-1")).unwrap();
        let mut namespaces = nss(&["skl0000a", "skl0000b", "skl0000c"]);
        namespaces.push("other-ns".into());
        let runs = survey(s, &namespaces);
        (d, runs)
    }

    #[test]
    fn survey_finds_owners() {
        let (_d, runs) = machine();
        let by_id: BTreeMap<&str, &Run> = runs.iter().map(|r| (r.id.as_str(), r)).collect();
        assert_eq!(
            by_id.keys().copied().collect::<Vec<_>>(),
            ["skl0000a", "skl0000b", "skl0000c", "skl0000d", "skl0000e"]
        );
        assert_eq!(by_id["skl0000a"].owner, Owner::Alive(own_pid()));
        assert_eq!(by_id["skl0000a"].namespaces.len(), 5);
        assert_eq!(by_id["skl0000b"].owner, Owner::Dead(dead_pid()));
        assert_eq!(by_id["skl0000c"].owner, Owner::Orphan);
        assert!(!by_id["skl0000c"].has_state);
        assert_eq!(by_id["skl0000d"].owner, Owner::Starting);
        assert!(by_id["skl0000e"].namespaces.is_empty());
    }

    #[test]
    fn plain_clean_removes_only_dead_and_orphaned() {
        let (_d, runs) = machine();
        let p = plan(runs, CleanMode::Dead).unwrap();
        assert_eq!(ids(&p.remove), ["skl0000b", "skl0000c", "skl0000e"]);
        assert_eq!(ids(&p.keep), ["skl0000a", "skl0000d"]);
    }

    #[test]
    fn clean_all_refuses_live_runs_unless_forced() {
        let (_d, runs) = machine();
        let e = plan(runs.clone(), CleanMode::All { force: false })
            .unwrap_err()
            .to_string();
        assert!(e.contains("2 live run(s)"), "{e}");
        assert!(
            e.contains(&format!("skl0000a (owner pid {}, alive)", own_pid())),
            "{e}"
        );
        assert!(e.contains("skl0000d (starting"), "{e}");
        let p = plan(runs.clone(), CleanMode::All { force: true }).unwrap();
        assert_eq!(p.remove.len(), 5);
        assert!(p.keep.is_empty());
        // Without live runs `--all` needs no force.
        let dead: Vec<Run> = runs.into_iter().filter(|r| !r.owner.is_live()).collect();
        let p = plan(dead, CleanMode::All { force: false }).unwrap();
        assert_eq!(ids(&p.remove), ["skl0000b", "skl0000c", "skl0000e"]);
    }

    #[test]
    fn reused_pid_is_not_the_owner() {
        let d = Scratch::new();
        fake_run(d.path(), "skl00001", Some(own_pid()));
        std::fs::write(d.path().join("skl00001/owner-start"), "1").unwrap();
        let runs = survey(d.path(), &[]);
        assert_eq!(runs[0].owner, Owner::Dead(own_pid()));
    }

    #[test]
    fn register_publishes_a_complete_record_once() {
        let d = Scratch::new();
        let dir = register(d.path(), "skl00abc").unwrap().unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("owner")).unwrap(),
            std::process::id().to_string()
        );
        let runs = survey(d.path(), &[]);
        assert_eq!(runs[0].owner, Owner::Alive(own_pid()));
        // The id is taken now; no temporary directory is left behind.
        assert_eq!(register(d.path(), "skl00abc").unwrap(), None);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn namespace_names_map_to_runs() {
        assert_eq!(run_of("skl1a2b3-cli12"), Some("skl1a2b3"));
        assert_eq!(run_of("skl1a2b3"), None);
        assert_eq!(run_of("sklzzzzz-srv"), None);
    }
}
