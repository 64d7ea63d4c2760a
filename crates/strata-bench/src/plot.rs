//! Line charts as PNG files, for the figures of `docs/img/`.
//!
//! Text is drawn with plotters' pure-Rust font rasteriser and the DejaVu Sans font
//! (Debian's `fonts-dejavu-core`), loaded once when the first chart is drawn.

use std::path::Path;
use std::sync::OnceLock;

use anyhow::{Context, Result, anyhow};
use plotters::prelude::*;

/// Where Debian and most distributions keep DejaVu Sans.
const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

fn load_font() -> Result<()> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let bytes = FONT_PATHS
                .iter()
                .find_map(|p| std::fs::read(p).ok())
                .ok_or("no DejaVu Sans font found (apt-get install fonts-dejavu-core)")?;
            // plotters keeps fonts for the life of the process.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
                .map_err(|_| "DejaVu Sans did not load".to_string())
        })
        .clone()
        .map_err(|e| anyhow!(e))
}

/// One line of a chart.
pub struct Series {
    /// Its legend.
    pub name: String,
    /// Its points, in x order.
    pub points: Vec<(f64, f64)>,
}

/// A chart to draw.
pub struct Chart<'a> {
    /// The title on top.
    pub title: &'a str,
    /// The x axis label.
    pub x_label: &'a str,
    /// The y axis label.
    pub y_label: &'a str,
    /// Whether the x axis is logarithmic.
    pub log_x: bool,
    /// The lines.
    pub series: Vec<Series>,
}

const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Draws `chart` into a PNG file at `path`.
pub fn draw(path: &Path, chart: &Chart) -> Result<()> {
    load_font()?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let points = chart.series.iter().flat_map(|s| s.points.iter());
    let (mut x_min, mut x_max, mut y_max) = (f64::MAX, f64::MIN, 0.0f64);
    for &(x, y) in points {
        x_min = x_min.min(x);
        x_max = x_max.max(x);
        y_max = y_max.max(y);
    }
    if x_min > x_max {
        return Err(anyhow!("no points to draw"));
    }
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(chart.title, ("sans-serif", 22))
        .margin(14)
        .x_label_area_size(48)
        .y_label_area_size(70);
    let y_range = 0.0..y_max * 1.1;
    let result = if chart.log_x {
        let mut c = builder.build_cartesian_2d((x_min..x_max).log_scale(), y_range)?;
        c.configure_mesh()
            .x_desc(chart.x_label)
            .y_desc(chart.y_label)
            .label_style(("sans-serif", 15))
            .draw()?;
        draw_series(&mut c, chart)
    } else {
        let mut c = builder.build_cartesian_2d(x_min..x_max, y_range)?;
        c.configure_mesh()
            .x_desc(chart.x_label)
            .y_desc(chart.y_label)
            .label_style(("sans-serif", 15))
            .draw()?;
        draw_series(&mut c, chart)
    };
    result?;
    root.present()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

fn draw_series<'a, DB, X>(
    c: &mut ChartContext<'a, DB, Cartesian2d<X, plotters::coord::types::RangedCoordf64>>,
    chart: &Chart,
) -> Result<()>
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    X: Ranged<ValueType = f64>,
{
    for (i, s) in chart.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        c.draw_series(LineSeries::new(
            s.points.iter().copied(),
            color.stroke_width(2),
        ))
        .map_err(|e| anyhow!("{e}"))?
        .label(s.name.clone())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        c.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(|e| anyhow!("{e}"))?;
    }
    c.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

/// A horizontal bar chart: a group of bars (one per series) per category.
pub struct Bars<'a> {
    /// The title on top.
    pub title: &'a str,
    /// The value axis label.
    pub value_label: &'a str,
    /// The categories, top to bottom.
    pub categories: Vec<String>,
    /// The series: a legend and one value per category (NaN: no bar).
    pub series: Vec<(String, Vec<f64>)>,
}

/// Draws `bars` into a PNG file at `path`.
pub fn draw_bars(path: &Path, bars: &Bars) -> Result<()> {
    load_font()?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let n = bars.categories.len();
    let k = bars.series.len().max(1);
    let max = bars
        .series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    if n == 0 || max <= 0.0 {
        return Err(anyhow!("no bars to draw"));
    }
    let height = 120 + (n * (12 * k + 14)) as u32;
    let root = BitMapBackend::new(path, (1000, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut c = ChartBuilder::on(&root)
        .caption(bars.title, ("sans-serif", 20))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(250)
        .build_cartesian_2d(0.0..max * 1.15, 0.0..n as f64)?;
    c.configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_desc(bars.value_label)
        .x_label_formatter(&|v| format!("{v:.0}"))
        .label_style(("sans-serif", 14))
        .draw()?;
    let band = 0.8 / k as f64;
    for (j, (name, values)) in bars.series.iter().enumerate() {
        let color = COLORS[j % COLORS.len()];
        let rects = values
            .iter()
            .enumerate()
            .filter(|(_, v)| v.is_finite())
            .map(|(i, &v)| {
                // Category 0 on top.
                let top = (n - i) as f64 - 0.1 - band * j as f64;
                Rectangle::new([(0.0, top - band), (v, top)], color.filled())
            });
        c.draw_series(rects)
            .map_err(|e| anyhow!("{e}"))?
            .label(name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
    }
    for (i, name) in bars.categories.iter().enumerate() {
        let (x, y) = c.backend_coord(&(0.0, (n - i) as f64 - 0.5));
        let style = ("sans-serif", 14).into_font().color(&BLACK).pos(
            plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Right,
                plotters::style::text_anchor::VPos::Center,
            ),
        );
        root.draw(&Text::new(name.clone(), (x - 8, y), style))?;
    }
    c.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    root.present()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
