//! Figures (PNG and SVG) with `plotters`: goodput bars with IQR error bars (the shape of seed
//! 001 Fig. 4b and Packrat (CoNEXT '26) Fig. 5) and per-trial CDFs of a metric.
//!
//! Text in bitmaps needs a TrueType font: DejaVu Sans from the Debian package
//! `fonts-dejavu-core` (override with `SIDEKICK_LAB_FONT`).

use crate::runner::RunResult;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// Plot errors.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// No font file.
    #[error("font {0} not found (apt-get install fonts-dejavu-core, or set SIDEKICK_LAB_FONT)")]
    Font(String),
    /// Drawing failed.
    #[error("drawing {path}: {msg}")]
    Draw {
        /// Output file.
        path: String,
        /// Backend message.
        msg: String,
    },
    /// Nothing to plot.
    #[error("no data for metric `{0}`")]
    NoData(String),
}

const DEFAULT_FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// Registers the font once per call site; plotters keeps a process-wide registry that only
/// grows (registering the same font again is harmless).
fn ensure_font() -> Result<(), PlotError> {
    let path = std::env::var("SIDEKICK_LAB_FONT").unwrap_or_else(|_| DEFAULT_FONT.to_string());
    let bytes = std::fs::read(&path).map_err(|_| PlotError::Font(path.clone()))?;
    // plotters wants 'static font data; one leaked copy per plotting call is a few hundred kB.
    let leaked: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, leaked)
        .map_err(|_| PlotError::Font(path))
}

fn draw_err(path: &Path) -> impl FnOnce(String) -> PlotError + '_ {
    move |msg| PlotError::Draw {
        path: path.display().to_string(),
        msg,
    }
}

/// Bar chart of the median of `metric` per variant with IQR whiskers; writes `<stem>.png` and
/// `<stem>.svg` in `dir` and returns the paths.
pub fn bars(
    r: &RunResult,
    metric: &str,
    dir: &Path,
    stem: &str,
) -> Result<Vec<PathBuf>, PlotError> {
    ensure_font()?;
    let rows: Vec<(String, f64, f64, f64)> = r
        .variants
        .iter()
        .filter_map(|v| {
            v.summary
                .get(metric)
                .map(|s| (v.name.clone(), s.median, s.q1, s.q3))
        })
        .collect();
    if rows.is_empty() {
        return Err(PlotError::NoData(metric.into()));
    }
    let ymax = rows.iter().map(|r| r.3).fold(0.0, f64::max) * 1.2 + 1e-9;
    let png = dir.join(format!("{stem}.png"));
    let svg = dir.join(format!("{stem}.svg"));
    let title = format!("{}: {metric} (median, IQR)", r.scenario);
    {
        let root = BitMapBackend::new(&png, (800, 500)).into_drawing_area();
        draw_bars(&root, &title, metric, &rows, ymax).map_err(draw_err(&png))?;
    }
    {
        let root = SVGBackend::new(&svg, (800, 500)).into_drawing_area();
        draw_bars(&root, &title, metric, &rows, ymax).map_err(draw_err(&svg))?;
    }
    Ok(vec![png, svg])
}

fn draw_bars<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    metric: &str,
    rows: &[(String, f64, f64, f64)],
    ymax: f64,
) -> Result<(), String> {
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    root.fill(&WHITE).map_err(e)?;
    let n = rows.len();
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..n as f64, 0f64..ymax)
        .map_err(e)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc(metric)
        .draw()
        .map_err(e)?;
    let colors = [BLUE, RED, GREEN, MAGENTA, CYAN];
    for (i, (name, med, q1, q3)) in rows.iter().enumerate() {
        let x = i as f64;
        let c = colors[i % colors.len()];
        let label = format!("{name}: {med:.2}");
        chart
            .draw_series(std::iter::once(Text::new(
                label,
                (x + 0.22, q3.max(*med) + ymax * 0.03),
                ("sans-serif", 18),
            )))
            .map_err(e)?;
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(x + 0.2, 0.0), (x + 0.8, *med)],
                c.mix(0.6).filled(),
            )))
            .map_err(e)?;
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(x + 0.5, *q1), (x + 0.5, *q3)],
                BLACK.stroke_width(2),
            )))
            .map_err(e)?;
        for y in [*q1, *q3] {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(x + 0.4, y), (x + 0.6, y)],
                    BLACK.stroke_width(2),
                )))
                .map_err(e)?;
        }
    }
    root.present().map_err(e)?;
    Ok(())
}

/// Empirical CDF of `metric` over each variant's trials (PNG and SVG).
pub fn cdf(r: &RunResult, metric: &str, dir: &Path, stem: &str) -> Result<Vec<PathBuf>, PlotError> {
    ensure_font()?;
    let series: Vec<(String, Vec<f64>)> = r
        .variants
        .iter()
        .map(|v| {
            let vals: Vec<f64> = v
                .trials
                .iter()
                .filter(|t| t.error.is_none())
                .filter_map(|t| t.metrics.get(metric).copied())
                .collect();
            (v.name.clone(), crate::stats::sorted(&vals))
        })
        .filter(|(_, v)| !v.is_empty())
        .collect();
    if series.is_empty() {
        return Err(PlotError::NoData(metric.into()));
    }
    let xmax = series
        .iter()
        .flat_map(|s| s.1.iter().copied())
        .fold(0.0, f64::max)
        * 1.1
        + 1e-9;
    let png = dir.join(format!("{stem}.png"));
    let svg = dir.join(format!("{stem}.svg"));
    let title = format!("{}: CDF of {metric}", r.scenario);
    {
        let root = BitMapBackend::new(&png, (800, 500)).into_drawing_area();
        draw_cdf(&root, &title, metric, &series, xmax).map_err(draw_err(&png))?;
    }
    {
        let root = SVGBackend::new(&svg, (800, 500)).into_drawing_area();
        draw_cdf(&root, &title, metric, &series, xmax).map_err(draw_err(&svg))?;
    }
    Ok(vec![png, svg])
}

fn draw_cdf<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    metric: &str,
    series: &[(String, Vec<f64>)],
    xmax: f64,
) -> Result<(), String> {
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    root.fill(&WHITE).map_err(e)?;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..xmax, 0f64..1.0)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc(metric)
        .y_desc("CDF")
        .draw()
        .map_err(e)?;
    let colors = [BLUE, RED, GREEN, MAGENTA, CYAN];
    for (i, (name, vals)) in series.iter().enumerate() {
        let c = colors[i % colors.len()];
        let n = vals.len() as f64;
        let mut pts = vec![(0.0, 0.0)];
        for (k, v) in vals.iter().enumerate() {
            pts.push((*v, k as f64 / n));
            pts.push((*v, (k + 1) as f64 / n));
        }
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))
            .map_err(e)?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(e)?;
    root.present().map_err(e)?;
    Ok(())
}

/// One point of a sweep: the swept value and, per variant, (median, q1, q3) of the metric.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SweepPoint {
    /// The value as given (`2%`).
    pub value: String,
    /// Its numeric part (x coordinate).
    pub x: f64,
    /// Variant name → (median, q1, q3).
    pub variants: std::collections::BTreeMap<String, (f64, f64, f64)>,
}

/// The numeric part of a swept value (`"2.5%"` → 2.5); NaN if none.
pub fn numeric_prefix(s: &str) -> f64 {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
        .unwrap_or(s.len());
    s[..end].parse().unwrap_or(f64::NAN)
}

/// Metric vs swept parameter, one line per variant with IQR whiskers (the shape of goodput vs
/// loss figures, e.g. PEMI Fig. 10); PNG and SVG.
pub fn sweep(
    points: &[SweepPoint],
    param: &str,
    metric: &str,
    dir: &Path,
    stem: &str,
) -> Result<Vec<PathBuf>, PlotError> {
    ensure_font()?;
    let xs: Vec<f64> = points
        .iter()
        .map(|p| p.x)
        .filter(|x| x.is_finite())
        .collect();
    if xs.is_empty() {
        return Err(PlotError::NoData(metric.into()));
    }
    let xmin = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let xmax = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let pad = ((xmax - xmin) * 0.05).max(0.1);
    let ymax = points
        .iter()
        .flat_map(|p| p.variants.values().map(|v| v.2))
        .fold(0.0, f64::max)
        * 1.15
        + 1e-9;
    let png = dir.join(format!("{stem}.png"));
    let svg = dir.join(format!("{stem}.svg"));
    let title = format!("{metric} vs {param} (median, IQR)");
    let range = (xmin - pad, xmax + pad);
    {
        let root = BitMapBackend::new(&png, (800, 500)).into_drawing_area();
        draw_sweep(&root, &title, param, metric, points, range, ymax).map_err(draw_err(&png))?;
    }
    {
        let root = SVGBackend::new(&svg, (800, 500)).into_drawing_area();
        draw_sweep(&root, &title, param, metric, points, range, ymax).map_err(draw_err(&svg))?;
    }
    Ok(vec![png, svg])
}

fn draw_sweep<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    param: &str,
    metric: &str,
    points: &[SweepPoint],
    (x0, x1): (f64, f64),
    ymax: f64,
) -> Result<(), String> {
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    root.fill(&WHITE).map_err(e)?;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x0..x1, 0f64..ymax)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc(param)
        .y_desc(metric)
        .draw()
        .map_err(e)?;
    let mut names: Vec<&String> = points.iter().flat_map(|p| p.variants.keys()).collect();
    names.sort();
    names.dedup();
    let colors = [BLUE, RED, GREEN, MAGENTA, CYAN];
    for (i, name) in names.iter().enumerate() {
        let c = colors[i % colors.len()];
        let pts: Vec<(f64, (f64, f64, f64))> = points
            .iter()
            .filter(|p| p.x.is_finite())
            .filter_map(|p| p.variants.get(*name).map(|v| (p.x, *v)))
            .collect();
        chart
            .draw_series(LineSeries::new(
                pts.iter().map(|(x, v)| (*x, v.0)),
                c.stroke_width(2),
            ))
            .map_err(e)?
            .label((*name).clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
        for (x, v) in &pts {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(*x, v.1), (*x, v.2)],
                    c.stroke_width(2),
                )))
                .map_err(e)?;
            chart
                .draw_series(std::iter::once(Circle::new((*x, v.0), 4, c.filled())))
                .map_err(e)?;
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(e)?;
    root.present().map_err(e)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_prefixes() {
        assert_eq!(numeric_prefix("2.5%"), 2.5);
        assert_eq!(numeric_prefix("40ms"), 40.0);
        assert!(numeric_prefix("fast").is_nan());
    }

    #[test]
    fn plots_are_written() {
        if !Path::new(DEFAULT_FONT).exists() && std::env::var_os("SIDEKICK_LAB_FONT").is_none() {
            eprintln!("plots_are_written: skipped (no font: apt-get install fonts-dejavu-core)");
            return;
        }
        let dir = std::env::temp_dir().join(format!("skl-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut variants = std::collections::BTreeMap::new();
        variants.insert("e2e".to_string(), (2.0, 1.5, 2.5));
        let pts = vec![
            SweepPoint {
                value: "1%".into(),
                x: 1.0,
                variants: variants.clone(),
            },
            SweepPoint {
                value: "2%".into(),
                x: 2.0,
                variants,
            },
        ];
        let files = sweep(&pts, "lan.loss", "goodput_mbps", &dir, "t").unwrap();
        for f in &files {
            assert!(
                std::fs::metadata(f).unwrap().len() > 1000,
                "{}",
                f.display()
            );
        }
        let png = std::fs::read(&files[0]).unwrap();
        assert_eq!(&png[..4], b"\x89PNG");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
