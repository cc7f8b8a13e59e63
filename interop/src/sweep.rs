//! Grid sweeps: a scenario run once per point of a settings grid (`--grid key=v1;v2;v3`,
//! repeated for more keys: the cartesian product), summarised as one Markdown table row per
//! point — the shape of ReACKed QUICer (IMC '24) Figs. 6–7 and 12–13 (drop rule × stack × RTT).
//!
//! Values are separated by `;` so that a value may itself hold commas (`lan.drop=down:2,down:3`).

use crate::runner::RunResult;
use crate::scenario::ScenarioError;
use std::fmt::Write as _;

/// One axis of a grid: a `--set` key and its values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Axis {
    /// The key, e.g. `wan.delay`.
    pub key: String,
    /// The values, in order.
    pub values: Vec<String>,
}

/// Parses `key=v1;v2;v3`.
///
/// ```
/// let a = sidekick_lab::sweep::parse_axis("lan.drop=none;down:2,down:3").unwrap();
/// assert_eq!(a.values, ["none", "down:2,down:3"]);
/// ```
pub fn parse_axis(s: &str) -> Result<Axis, ScenarioError> {
    let (key, vals) = s
        .split_once('=')
        .ok_or_else(|| ScenarioError::Invalid(format!("--grid `{s}`: expected key=v1;v2")))?;
    let key = key.trim();
    if key.is_empty() || key.split('.').any(str::is_empty) {
        return Err(ScenarioError::Invalid(format!("--grid `{s}`: empty key")));
    }
    let values: Vec<String> = vals
        .split(';')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(String::from)
        .collect();
    if values.is_empty() {
        return Err(ScenarioError::Invalid(format!("--grid `{s}`: no values")));
    }
    Ok(Axis {
        key: key.to_string(),
        values,
    })
}

/// Most points a grid may have (a cap against typos such as a stray `;`).
pub const MAX_POINTS: usize = 1000;

/// The cartesian product of the axes, first axis slowest: each point as `key=value` overrides.
pub fn points(axes: &[Axis]) -> Result<Vec<Vec<String>>, ScenarioError> {
    let n = axes
        .iter()
        .try_fold(1usize, |n, a| n.checked_mul(a.values.len()))
        .filter(|n| *n <= MAX_POINTS)
        .ok_or_else(|| ScenarioError::Invalid(format!("grid above {MAX_POINTS} points")))?;
    let mut out = Vec::with_capacity(n);
    for mut i in 0..n {
        let mut p = vec![String::new(); axes.len()];
        for (k, a) in axes.iter().enumerate().rev() {
            p[k] = format!("{}={}", a.key, a.values[i % a.values.len()]);
            i /= a.values.len();
        }
        out.push(p);
    }
    Ok(out)
}

/// Header of the grid table: one column per axis, then per variant the median (q1–q3) of
/// `metric` and the trials, then each later variant's median relative to the first's.
pub fn table_header(axes: &[Axis], variants: &[String], metric: &str) -> String {
    let mut h = String::from("|");
    let mut rule = String::from("|");
    for a in axes {
        let _ = write!(h, " {} |", a.key);
        rule.push_str("---|");
    }
    for v in variants {
        let _ = write!(h, " {v}: {metric} median (q1–q3), n |");
        rule.push_str("---|");
    }
    for v in variants.iter().skip(1) {
        let _ = write!(
            h,
            " {v} − {} |",
            variants.first().map_or("", String::as_str)
        );
        rule.push_str("---|");
    }
    format!("{h}\n{rule}\n")
}

/// One table row for a point (`sets`, as produced by [`points`]) and its run.
pub fn table_row(sets: &[String], r: &RunResult, metric: &str) -> String {
    let mut row = String::from("|");
    for s in sets {
        let v = s.split_once('=').map_or(s.as_str(), |(_, v)| v);
        let _ = write!(row, " {v} |");
    }
    let medians: Vec<Option<f64>> = r
        .variants
        .iter()
        .map(|v| v.summary.get(metric).map(|x| x.median))
        .collect();
    for v in &r.variants {
        let failed = v.trials.iter().filter(|t| t.error.is_some()).count();
        let fail = if failed > 0 {
            format!(", {failed} failed")
        } else {
            String::new()
        };
        match v.summary.get(metric) {
            Some(x) => {
                let _ = write!(
                    row,
                    " {:.1} ({:.1}–{:.1}), {}{fail} |",
                    x.median, x.q1, x.q3, x.n
                );
            }
            None => {
                let _ = write!(row, " n/a{fail} |");
            }
        }
    }
    let base = medians.first().copied().flatten();
    for m in medians.iter().skip(1) {
        match (base, m) {
            (Some(b), Some(x)) => {
                let _ = write!(row, " {:+.1} |", x - b);
            }
            _ => row.push_str(" n/a |"),
        }
    }
    row.push('\n');
    row
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::{Trial, VariantResult};
    use crate::stats::Summary;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn grid_is_the_cartesian_product_first_axis_slowest() {
        let axes = [
            parse_axis("app.stack=quinn;quiche").unwrap(),
            parse_axis("wan.delay=4ms;50ms;150ms").unwrap(),
        ];
        let p = points(&axes).unwrap();
        assert_eq!(p.len(), 6);
        assert_eq!(p[0], ["app.stack=quinn", "wan.delay=4ms"]);
        assert_eq!(p[2], ["app.stack=quinn", "wan.delay=150ms"]);
        assert_eq!(p[3], ["app.stack=quiche", "wan.delay=4ms"]);
        assert_eq!(points(&[]).unwrap(), vec![Vec::<String>::new()]);
        for bad in ["nokey", "=a;b", "a..b=1", "a="] {
            assert!(parse_axis(bad).is_err(), "{bad}");
        }
        let big = parse_axis(&format!(
            "x={}",
            (0..100)
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(";")
        ))
        .unwrap();
        assert!(points(&[big.clone(), big]).is_err());
    }

    fn summary(median: f64) -> Summary {
        Summary {
            n: 3,
            min: median - 2.0,
            q1: median - 1.0,
            median,
            q3: median + 1.0,
            max: median + 2.0,
            iqr: 2.0,
            mean: median,
        }
    }

    #[test]
    fn rows_carry_medians_and_differences() {
        let v = |name: &str, m: Option<f64>| VariantResult {
            name: name.into(),
            skipped: None,
            trials: vec![Trial {
                trial: 0,
                metrics: BTreeMap::new(),
                error: None,
            }],
            summary: m
                .map(|m| BTreeMap::from([("ttfb_ms".to_string(), summary(m))]))
                .unwrap_or_default(),
        };
        let r = RunResult {
            scenario: "handshake-loss".into(),
            description: String::new(),
            settings: serde_json::Value::Null,
            link_backend: crate::netem::LinkBackend::Userspace,
            link_checks: vec![],
            variants: vec![v("e2e", Some(80.0)), v("rescue", Some(30.0))],
        };
        let row = table_row(&["lan.drop=down:2,down:3".into()], &r, "ttfb_ms");
        assert_eq!(
            row,
            "| down:2,down:3 | 80.0 (79.0–81.0), 3 | 30.0 (29.0–31.0), 3 | -50.0 |\n"
        );
        let h = table_header(
            &[parse_axis("lan.drop=a;b").unwrap()],
            &["e2e".into(), "rescue".into()],
            "ttfb_ms",
        );
        assert!(h.starts_with("| lan.drop | e2e: ttfb_ms"));
        assert_eq!(h.lines().nth(1), Some("|---|---|---|---|"));
    }

    proptest! {
        #[test]
        fn axis_parser_never_panics(s in ".{0,40}") {
            let _ = parse_axis(&s);
        }
    }
}
