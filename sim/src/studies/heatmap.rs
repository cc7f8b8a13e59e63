//! Heat maps (SVG and PNG, with `plotters` as the lab's plots): one panel per value of an
//! optional third axis, a cell per (x, y) point coloured by a ratio on a log scale (blue above 1,
//! red below, white at 1) and labelled with its value.
//!
//! Text needs a TrueType font, as for the lab's plots: DejaVu Sans from `fonts-dejavu-core`
//! (override with `SIDEKICK_LAB_FONT`).

use std::path::{Path, PathBuf};

use plotters::prelude::*;

/// Heat-map errors.
#[derive(Debug, thiserror::Error)]
pub enum HeatmapError {
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
}

/// One panel: a title and `cells[y][x]` (`None`: no value, drawn grey).
#[derive(Debug, Clone)]
pub struct Panel {
    /// Panel title (e.g. `wan.rate = 10Mbit`).
    pub title: String,
    /// Values, row by row (`y` outer, `x` inner).
    pub cells: Vec<Vec<Option<f64>>>,
}

/// A figure of panels sharing axes.
#[derive(Debug, Clone)]
pub struct Heatmap {
    /// Figure title.
    pub title: String,
    /// X axis name and tick labels.
    pub x: (String, Vec<String>),
    /// Y axis name and tick labels.
    pub y: (String, Vec<String>),
    /// The panels, left to right, top to bottom.
    pub panels: Vec<Panel>,
}

const DEFAULT_FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

fn ensure_font() -> Result<(), HeatmapError> {
    let path = std::env::var("SIDEKICK_LAB_FONT").unwrap_or_else(|_| DEFAULT_FONT.to_string());
    let bytes = std::fs::read(&path).map_err(|_| HeatmapError::Font(path.clone()))?;
    let leaked: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, leaked)
        .map_err(|_| HeatmapError::Font(path))
}

/// The colour of ratio `v`: white at 1, saturating blue at 8× and red at 1/8×.
pub fn colour(v: Option<f64>) -> RGBColor {
    let Some(v) = v.filter(|v| v.is_finite() && *v > 0.0) else {
        return RGBColor(200, 200, 200);
    };
    let t = (v.log2() / 3.0).clamp(-1.0, 1.0);
    let fade = |c: u8, t: f64| (255.0 - (255.0 - f64::from(c)) * t.abs()).round() as u8;
    if t >= 0.0 {
        RGBColor(fade(33, t), fade(102, t), fade(172, t))
    } else {
        RGBColor(fade(178, t), fade(24, t), fade(43, t))
    }
}

impl Heatmap {
    /// Writes `<stem>.svg` and `<stem>.png` in `dir`; returns the paths.
    pub fn write(&self, dir: &Path, stem: &str) -> Result<Vec<PathBuf>, HeatmapError> {
        ensure_font()?;
        std::fs::create_dir_all(dir).map_err(|e| HeatmapError::Draw {
            path: dir.display().to_string(),
            msg: e.to_string(),
        })?;
        let n = self.panels.len().max(1);
        let cols = n.min(3);
        let rows = n.div_ceil(cols);
        let size = ((cols as u32 * 420 + 40).max(760), rows as u32 * 380 + 60);
        let svg = dir.join(format!("{stem}.svg"));
        let png = dir.join(format!("{stem}.png"));
        let err = |p: &Path| {
            let p = p.display().to_string();
            move |msg: String| HeatmapError::Draw { path: p, msg }
        };
        {
            let root = SVGBackend::new(&svg, size).into_drawing_area();
            self.draw(&root, rows, cols).map_err(err(&svg))?;
        }
        {
            let root = BitMapBackend::new(&png, size).into_drawing_area();
            self.draw(&root, rows, cols).map_err(err(&png))?;
        }
        Ok(vec![svg, png])
    }

    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, plotters::coord::Shift>,
        rows: usize,
        cols: usize,
    ) -> Result<(), String> {
        let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
        root.fill(&WHITE).map_err(e)?;
        let root = root.titled(&self.title, ("sans-serif", 18)).map_err(e)?;
        let areas = root.split_evenly((rows, cols));
        let (nx, ny) = (self.x.1.len(), self.y.1.len());
        for (panel, area) in self.panels.iter().zip(areas.iter()) {
            let mut chart = ChartBuilder::on(area)
                .caption(&panel.title, ("sans-serif", 16))
                .margin(8)
                .x_label_area_size(40)
                .y_label_area_size(55)
                .build_cartesian_2d(0f64..nx as f64, 0f64..ny as f64)
                .map_err(e)?;
            let xs = self.x.1.clone();
            let ys = self.y.1.clone();
            chart
                .configure_mesh()
                .disable_mesh()
                .x_labels(nx * 2 + 1)
                .y_labels(ny * 2 + 1)
                .x_label_formatter(&|v| tick(&xs, *v))
                .y_label_formatter(&|v| tick(&ys, *v))
                .x_desc(self.x.0.as_str())
                .y_desc(self.y.0.as_str())
                .draw()
                .map_err(e)?;
            for (j, row) in panel.cells.iter().enumerate() {
                for (i, v) in row.iter().enumerate() {
                    let (x0, y0) = (i as f64, j as f64);
                    chart
                        .draw_series(std::iter::once(Rectangle::new(
                            [(x0, y0), (x0 + 1.0, y0 + 1.0)],
                            colour(*v).filled(),
                        )))
                        .map_err(e)?;
                    let label = v.map_or_else(|| "–".to_string(), |v| format!("{v:.2}"));
                    chart
                        .draw_series(std::iter::once(Text::new(
                            label,
                            (x0 + 0.2, y0 + 0.6),
                            ("sans-serif", 12),
                        )))
                        .map_err(e)?;
                }
            }
        }
        root.present().map_err(e)
    }
}

/// The label of the cell whose centre is at `v` (ticks fall on centres and edges).
fn tick(labels: &[String], v: f64) -> String {
    let c = v - 0.5;
    if (c - c.round()).abs() < 1e-6 && c >= 0.0 {
        labels.get(c.round() as usize).cloned().unwrap_or_default()
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_follow_the_ratio() {
        assert_eq!(colour(Some(1.0)), RGBColor(255, 255, 255));
        assert_eq!(colour(Some(8.0)), RGBColor(33, 102, 172));
        assert_eq!(colour(Some(100.0)), RGBColor(33, 102, 172));
        assert_eq!(colour(Some(0.125)), RGBColor(178, 24, 43));
        assert_eq!(colour(None), RGBColor(200, 200, 200));
        let RGBColor(r2, _, _) = colour(Some(2.0));
        let RGBColor(r4, _, _) = colour(Some(4.0));
        assert!(r4 < r2 && r2 < 255, "deeper blue for a larger gain");
        assert_eq!(tick(&["a".into(), "b".into()], 1.5), "b");
        assert_eq!(tick(&["a".into(), "b".into()], 1.0), "");
    }
}
