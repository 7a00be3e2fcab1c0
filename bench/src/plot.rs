//! PNG plots like the thesis' figures 1–2: acquisition index (x) against
//! milliseconds since the start of the run (y), one line per process. Even
//! lines rising together mean fair turns; a line that stays flat while the
//! others climb is a starving process.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};

use crate::stats::Sample;

/// DejaVu Sans Mono (Bitstream Vera license, see `assets/DejaVu-LICENSE`),
/// embedded so plots render the same on any machine, with no system fonts.
const FONT: &[u8] = include_bytes!("../assets/DejaVuSansMono.ttf");
const FAMILY: &str = "lockshift-mono";

/// A plot could not be drawn or written.
#[derive(Debug, thiserror::Error)]
#[error("cannot draw {path}: {message}")]
pub struct PlotError {
    /// The file.
    pub path: String,
    /// What went wrong.
    pub message: String,
}

fn register() {
    // Registering twice is harmless; the first wins. An error means the
    // embedded font is broken, which drawing reports right after.
    let _ = register_font(FAMILY, FontStyle::Normal, FONT);
}

/// Draws `samples` of one run to `path` (PNG, 1000×600).
///
/// # Errors
/// [`PlotError`] when the file cannot be written.
pub fn draw(path: &Path, title: &str, samples: &[Sample]) -> Result<(), PlotError> {
    register();
    let fail = |e: &dyn std::fmt::Display| PlotError {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let start = samples.iter().map(|s| s.requested_at).min().unwrap_or(0);
    let mut lines: BTreeMap<u32, Vec<(u32, f64)>> = BTreeMap::new();
    for s in samples {
        lines
            .entry(s.worker)
            .or_default()
            .push((s.index, (s.acquired_at - start) as f64 / 1000.0));
    }
    for line in lines.values_mut() {
        line.sort_by_key(|(i, _)| *i);
    }
    let max_x = samples.iter().map(|s| s.index).max().unwrap_or(0) + 1;
    let max_y = lines
        .values()
        .flat_map(|l| l.iter().map(|(_, y)| *y))
        .fold(1.0_f64, f64::max)
        * 1.02;

    let root = BitMapBackend::new(path, (1000, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, (FAMILY, 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(0u32..max_x, 0f64..max_y)
        .map_err(|e| fail(&e))?;
    chart
        .configure_mesh()
        .x_desc("acquisition number (per process)")
        .y_desc("ms since start")
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 16))
        .draw()
        .map_err(|e| fail(&e))?;
    for (i, (worker, line)) in lines.into_iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(line, color.stroke_width(2)))
            .map_err(|e| fail(&e))?
            .label(format!("process {worker}"))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .label_font((FAMILY, 14))
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| fail(&e))?;
    root.present().map_err(|e| fail(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_a_png() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("queue.png");
        let samples: Vec<Sample> = (0..30)
            .map(|i| Sample {
                worker: i % 3,
                index: i / 3,
                requested_at: i64::from(i) * 1000,
                acquired_at: i64::from(i) * 1000 + 500,
                release_started: i64::from(i) * 1000 + 900,
                released_at: i64::from(i) * 1000 + 950,
            })
            .collect();
        draw(&path, "queue: P = 3", &samples).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        assert!(bytes.len() > 5_000, "a real image, {} bytes", bytes.len());
    }
}
