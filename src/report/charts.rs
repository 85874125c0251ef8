//! Charts as inline SVG strings, drawn with plotters' SVG backend. Text is left to the browser
//! (plotters' naive font metrics lay it out), so no font files are needed.

use plotters::prelude::*;

/// Colours of successive series (colour-blind-safe Okabe–Ito palette).
pub const PALETTE: [RGBColor; 9] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(120, 120, 120),
    RGBColor(0, 0, 0),
    RGBColor(140, 86, 75),
];

const W: u32 = 760;
const H: u32 = 330;

/// A named series of (x, y) points.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A marked reference value (an SLO threshold, the chosen point).
pub struct Marker {
    pub label: String,
    pub value: f64,
}

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing a chart: {e}")
}

fn bounds(series: &[Series], pick: impl Fn(&(f64, f64)) -> f64) -> Option<(f64, f64)> {
    let mut it = series.iter().flat_map(|s| s.points.iter()).map(pick).filter(|v| v.is_finite());
    let first = it.next()?;
    Some(it.fold((first, first), |(lo, hi), v| (lo.min(v), hi.max(v))))
}

/// An empty chart with a title and a note, for series with no data (e.g. no finished request).
fn empty(title: &str, note: &str) -> anyhow::Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H / 2)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        root.titled(title, ("sans-serif", 18)).map_err(err)?;
        root.draw_text(note, &("sans-serif", 14).into_text_style(&root), (20, (H / 4) as i32)).map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Cumulative distributions on a log x axis, with vertical markers (e.g. SLO thresholds).
pub fn cdf(title: &str, x_desc: &str, series: &[Series], markers: &[Marker]) -> anyhow::Result<String> {
    let positive: Vec<Series> = series
        .iter()
        .map(|s| Series { name: s.name.clone(), points: s.points.iter().copied().filter(|p| p.0 > 0.0).collect() })
        .filter(|s| !s.points.is_empty())
        .collect();
    let Some((lo, hi)) = bounds(&positive, |p| p.0) else {
        return empty(title, "no finished requests to plot");
    };
    let hi = markers.iter().map(|m| m.value).fold(hi, f64::max);
    // At least one decade, so the log axis has labels even for a single value.
    let c = (lo * hi).sqrt();
    let (x0, x1) = ((lo / 1.3).min(c / 3.2), (hi * 1.3).max(c * 3.2));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(58)
            .build_cartesian_2d((x0..x1).log_scale(), 0.0..1.0)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc("fraction of requests")
            .y_label_formatter(&|v| format!("{:.0}%", v * 100.0))
            .x_label_formatter(&|v| short(*v))
            .draw()
            .map_err(err)?;
        for (i, s) in positive.iter().enumerate() {
            let c = PALETTE[i % PALETTE.len()];
            // An empirical CDF is a step function: rise at each value from the previous level.
            let mut steps = Vec::with_capacity(2 * s.points.len());
            let mut level = 0.0;
            for &(x, y) in &s.points {
                steps.push((x, level));
                steps.push((x, y));
                level = y;
            }
            chart
                .draw_series(LineSeries::new(steps, c.stroke_width(2)))
                .map_err(err)?
                .label(s.name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
        }
        for m in markers {
            let red = RGBColor(200, 0, 0);
            chart
                .draw_series(LineSeries::new(vec![(m.value, 0.0), (m.value, 1.0)], red.stroke_width(2)))
                .map_err(err)?
                .label(m.label.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], red.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Line chart over a linear x axis, with optional horizontal markers and an optional vertical
/// marker (e.g. the chosen instance count).
pub fn lines(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    hmarkers: &[Marker],
    vmarker: Option<&Marker>,
    points: bool,
) -> anyhow::Result<String> {
    let Some(x) = bounds(series, |p| p.0) else {
        return empty(title, "no data to plot");
    };
    let (_, y_hi) = bounds(series, |p| p.1).unwrap_or((0.0, 1.0));
    let y_hi = hmarkers.iter().map(|m| m.value).fold(y_hi, f64::max);
    let y1 = if y_hi > 0.0 { y_hi * 1.1 } else { 1.0 };
    let legend = if series.len() > 3 { SeriesLabelPosition::LowerRight } else { SeriesLabelPosition::UpperLeft };
    let frame = Frame { title, x_desc, y_desc, x, y: (0.0, y1), y_labels: short_label, legend };
    draw_lines(&frame, series, hmarkers, vmarker, points)
}

/// A cost frontier: each series' points (cost, attainment %) joined in cost order, the target
/// drawn. The y axis shows the band where the decision lies, from 10 points under the target
/// up (so that 95–100% is readable, not a sliver of 0–100%); counts further under it are drawn
/// on the bottom edge, and the title says so.
pub fn frontier(title: &str, x_desc: &str, y_desc: &str, series: &[Series], target: &Marker) -> anyhow::Result<String> {
    let Some((x0, x1)) = bounds(series, |p| p.0) else {
        return empty(title, "no data to plot");
    };
    let (lo, hi) = bounds(series, |p| p.1).unwrap_or((0.0, 100.0));
    let floor = (target.value - 10.0).max(0.0);
    let hi = hi.max(target.value);
    let y0 = if lo >= floor { (lo.min(target.value) - 0.5).max(0.0) } else { floor };
    let y1 = hi + ((hi - y0) * 0.08).max(0.3);
    let title = if lo < y0 { format!("{title} (counts under {y0:.0}% on the bottom edge)") } else { title.to_string() };
    let clamped: Vec<Series> = series
        .iter()
        .map(|s| {
            let mut points: Vec<(f64, f64)> = s.points.iter().map(|&(x, y)| (x, y.max(y0))).collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series { name: s.name.clone(), points }
        })
        .collect();
    let span = (x1 - x0).max(1e-9);
    let x = (x0 - span * 0.05, x1 + span * 0.05);
    let frame = Frame {
        title: &title,
        x_desc,
        y_desc,
        x,
        y: (y0, y1),
        y_labels: one_decimal,
        legend: SeriesLabelPosition::LowerRight,
    };
    draw_lines(&frame, &clamped, std::slice::from_ref(target), None, true)
}

fn short_label(v: &f64) -> String {
    short(*v)
}

fn one_decimal(v: &f64) -> String {
    format!("{v:.1}")
}

/// What a line chart is drawn in: its titles, axis ranges, y labels and legend corner.
struct Frame<'a> {
    title: &'a str,
    x_desc: &'a str,
    y_desc: &'a str,
    x: (f64, f64),
    y: (f64, f64),
    y_labels: fn(&f64) -> String,
    legend: SeriesLabelPosition,
}

/// Draws `series` as lines (with a marker on each point when `points`, or when a series is
/// too short for a line alone), red horizontal markers and a green vertical one.
fn draw_lines(
    f: &Frame,
    series: &[Series],
    hmarkers: &[Marker],
    vmarker: Option<&Marker>,
    points: bool,
) -> anyhow::Result<String> {
    let (mut x0, mut x1) = f.x;
    if x1 <= x0 {
        x0 -= 0.5;
        x1 += 0.5;
    }
    let (y0, y1) = f.y;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(f.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(64)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(f.x_desc)
            .y_desc(f.y_desc)
            .x_label_formatter(&|v| short(*v))
            .y_label_formatter(&f.y_labels)
            .draw()
            .map_err(err)?;
        for (i, s) in series.iter().enumerate() {
            let c = PALETTE[i % PALETTE.len()];
            chart
                .draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))
                .map_err(err)?
                .label(s.name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
            // Markers when asked, and always for short series, which a line alone may not show.
            if points || s.points.len() <= 3 {
                chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 4, c.filled()))).map_err(err)?;
            }
        }
        let red = RGBColor(200, 0, 0);
        for m in hmarkers {
            chart
                .draw_series(LineSeries::new(vec![(x0, m.value), (x1, m.value)], red.stroke_width(2)))
                .map_err(err)?
                .label(m.label.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], red.stroke_width(2)));
        }
        if let Some(m) = vmarker {
            let green = RGBColor(0, 130, 0);
            chart
                .draw_series(LineSeries::new(vec![(m.value, y0), (m.value, y1)], green.stroke_width(2)))
                .map_err(err)?
                .label(m.label.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], green.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .position(f.legend.clone())
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// One bar per category; the `highlight` bar (the baseline, the recommended candidate) is
/// outlined in black.
pub fn bars(
    title: &str,
    y_desc: &str,
    categories: &[String],
    values: &[f64],
    highlight: Option<usize>,
) -> anyhow::Result<String> {
    let y_hi = values.iter().copied().filter(|v| v.is_finite()).fold(0.0, f64::max);
    let y1 = if y_hi > 0.0 { y_hi * 1.15 } else { 1.0 };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(60)
            .y_label_area_size(64)
            .build_cartesian_2d(0.0..categories.len().max(1) as f64, 0.0..y1)
            .map_err(err)?;
        let cats = categories.to_vec();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(categories.len().max(1) * 2 + 1)
            .x_label_formatter(&move |v| {
                let i = v.floor() as usize;
                if (v - i as f64 - 0.5).abs() < 0.01 {
                    cats.get(i).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .x_label_style(("sans-serif", 11))
            .y_desc(y_desc)
            .y_label_formatter(&|v| short(*v))
            .draw()
            .map_err(err)?;
        let c = PALETTE[0];
        chart
            .draw_series(values.iter().enumerate().map(|(i, &v)| {
                let col = if Some(i) == highlight { PALETTE[1] } else { c };
                Rectangle::new(
                    [(i as f64 + 0.15, 0.0), (i as f64 + 0.85, if v.is_finite() { v } else { 0.0 })],
                    col.filled(),
                )
            }))
            .map_err(err)?
            .label(title.split(" per ").next().unwrap_or(title).to_string())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled()));
        if let Some(h) = highlight {
            let v = values.get(h).copied().filter(|v| v.is_finite()).unwrap_or(0.0);
            let name = categories.get(h).cloned().unwrap_or_default();
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(h as f64 + 0.15, 0.0), (h as f64 + 0.85, v)],
                    BLACK.stroke_width(2),
                )))
                .map_err(err)?
                .label(format!("{name} (marked)"))
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], PALETTE[1].filled()));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

#[allow(dead_code)] // kept for multi-series comparisons
/// Grouped bars: one group per category (x), one bar per series; `baseline` names the series
/// drawn with a black outline.
pub fn grouped_bars(
    title: &str,
    y_desc: &str,
    categories: &[String],
    series: &[(String, Vec<f64>)],
    baseline: Option<&str>,
) -> anyhow::Result<String> {
    let y_hi = series.iter().flat_map(|s| s.1.iter()).copied().filter(|v| v.is_finite()).fold(0.0, f64::max);
    let y1 = if y_hi > 0.0 { y_hi * 1.15 } else { 1.0 };
    let n = series.len().max(1) as f64;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(64)
            .build_cartesian_2d(0.0..categories.len().max(1) as f64, 0.0..y1)
            .map_err(err)?;
        let cats = categories.to_vec();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(categories.len().max(1) * 2 + 1)
            .x_label_formatter(&move |v| {
                let i = v.floor() as usize;
                if (v - i as f64 - 0.5).abs() < 0.01 {
                    cats.get(i).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_desc(y_desc)
            .y_label_formatter(&|v| short(*v))
            .draw()
            .map_err(err)?;
        for (si, (name, values)) in series.iter().enumerate() {
            let c = PALETTE[si % PALETTE.len()];
            let outline = baseline == Some(name.as_str());
            let rects: Vec<Rectangle<(f64, f64)>> = values
                .iter()
                .enumerate()
                .map(|(ci, &v)| {
                    let x0 = ci as f64 + 0.1 + 0.8 * si as f64 / n;
                    let x1 = x0 + 0.8 / n;
                    Rectangle::new([(x0, 0.0), (x1, if v.is_finite() { v } else { 0.0 })], c.filled())
                })
                .collect();
            let label = if outline { format!("{name} (baseline)") } else { name.clone() };
            chart
                .draw_series(rects)
                .map_err(err)?
                .label(label)
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled()));
            if outline {
                let frames: Vec<Rectangle<(f64, f64)>> = values
                    .iter()
                    .enumerate()
                    .map(|(ci, &v)| {
                        let x0 = ci as f64 + 0.1 + 0.8 * si as f64 / n;
                        Rectangle::new(
                            [(x0, 0.0), (x0 + 0.8 / n, if v.is_finite() { v } else { 0.0 })],
                            BLACK.stroke_width(2),
                        )
                    })
                    .collect();
                chart.draw_series(frames).map_err(err)?;
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Short axis labels: 1.2k, 35, 0.25, 0.0012.
pub fn short(v: f64) -> String {
    let a = v.abs();
    if a > 0.0 && a < 0.01 {
        let decimals = (-a.log10()).ceil() as usize + 1;
        return format!("{v:.decimals$}");
    }
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 10.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else if a >= 0.1 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}
