//! Charts as inline SVG strings, drawn with plotters' SVG backend. Text is left to the browser
//! (plotters' naive font metrics lay it out), so no font files are needed.

use plotters::prelude::*;

/// Colours of successive series (colour-blind-safe Okabe–Ito palette).
pub(crate) const PALETTE: [RGBColor; 9] = [
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

/// A chart's size in pixels: wide enough to read at 1400 px, with the legend in its own panel
/// on the right (never over the data).
const W: u32 = 1100;
const H: u32 = 400;
const LEGEND_W: u32 = 260;

/// A named series of (x, y) points; `colour` is an index into [`PALETTE`] (None: its position
/// in the chart), so that one candidate keeps one colour across every chart of a report.
pub(crate) struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub colour: Option<usize>,
    /// Joined by a line (else dots only: points that are not a curve).
    pub line: bool,
}

impl Series {
    pub(crate) fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series { name: name.into(), points, colour: None, line: true }
    }

    /// Drawn as dots, not joined.
    pub(crate) fn dots(mut self) -> Series {
        self.line = false;
        self
    }

    pub(crate) fn coloured(mut self, colour: usize) -> Series {
        self.colour = Some(colour);
        self
    }

    fn colour(&self, position: usize) -> RGBColor {
        PALETTE[self.colour.unwrap_or(position) % PALETTE.len()]
    }
}

/// How a legend entry shows its colour.
#[derive(Clone, Copy)]
enum Swatch {
    Line,
    Box,
    Outline,
}

/// One legend entry.
struct Entry {
    label: String,
    colour: RGBColor,
    swatch: Swatch,
}

const RED: RGBColor = RGBColor(200, 0, 0);
const GREEN: RGBColor = RGBColor(0, 130, 0);

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// Splits a chart into its plot and its legend panel.
fn panels<'a>(root: &Area<'a>) -> (Area<'a>, Area<'a>) {
    root.split_horizontally(W - LEGEND_W)
}

/// Draws the legend in its own panel, one entry a line, names cut to fit.
fn legend(area: &Area, entries: &[Entry]) -> anyhow::Result<()> {
    let style = ("sans-serif", 13).into_font().color(&BLACK);
    for (i, e) in entries.iter().enumerate() {
        let y = 48 + 20 * i as i32;
        let c = e.colour;
        match e.swatch {
            Swatch::Line => area.draw(&PathElement::new(vec![(8, y), (30, y)], c.stroke_width(3))).map_err(err)?,
            Swatch::Box => area.draw(&Rectangle::new([(10, y - 6), (28, y + 6)], c.filled())).map_err(err)?,
            Swatch::Outline => {
                area.draw(&Rectangle::new([(10, y - 6), (28, y + 6)], c.stroke_width(2))).map_err(err)?
            }
        }
        let label: String = if e.label.chars().count() > 30 {
            e.label.chars().take(29).chain(['…']).collect()
        } else {
            e.label.clone()
        };
        area.draw_text(&label, &style, (36, y - 7)).map_err(err)?;
    }
    Ok(())
}

/// A point (or bar) to hover over, in pixels, with the text its tooltip shows.
struct Hover {
    at: (i32, i32),
    text: String,
}

/// Appends an invisible circle with an SVG `<title>` at each hover point, so that a browser
/// shows the exact value under the pointer.
fn with_hovers(mut svg: String, hovers: &[Hover]) -> String {
    if hovers.is_empty() {
        return svg;
    }
    let mut g = String::from("<g class=\"hover\">");
    for h in hovers {
        g += &format!(
            "<circle cx=\"{}\" cy=\"{}\" r=\"8\" fill=\"transparent\"><title>{}</title></circle>",
            h.at.0,
            h.at.1,
            super::html::escape(&h.text)
        );
    }
    g += "</g>";
    if let Some(end) = svg.rfind("</svg>") {
        svg.insert_str(end, &g);
    }
    svg
}

/// A marked reference value (an SLO threshold, the chosen point: red or green), or a
/// `reference` one (the baseline: grey).
pub(crate) struct Marker {
    pub label: String,
    pub value: f64,
    pub reference: bool,
}

impl Marker {
    pub(crate) fn new(label: impl Into<String>, value: f64) -> Marker {
        Marker { label: label.into(), value, reference: false }
    }

    pub(crate) fn reference(label: impl Into<String>, value: f64) -> Marker {
        Marker { label: label.into(), value, reference: true }
    }
}

const GREY: RGBColor = RGBColor(110, 110, 110);

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
pub(crate) fn cdf(title: &str, x_desc: &str, series: &[Series], markers: &[Marker]) -> anyhow::Result<String> {
    let positive: Vec<Series> = series
        .iter()
        .map(|s| Series {
            name: s.name.clone(),
            points: s.points.iter().copied().filter(|p| p.0 > 0.0).collect(),
            colour: s.colour,
            line: s.line,
        })
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
        let (plot, side) = panels(&root);
        let mut entries = Vec::new();
        let mut chart = ChartBuilder::on(&plot)
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
            let c = s.colour(i);
            // An empirical CDF is a step function: rise at each value from the previous level.
            let mut steps = Vec::with_capacity(2 * s.points.len());
            let mut level = 0.0;
            for &(x, y) in &s.points {
                steps.push((x, level));
                steps.push((x, y));
                level = y;
            }
            chart.draw_series(LineSeries::new(steps, c.stroke_width(2))).map_err(err)?;
            entries.push(Entry { label: s.name.clone(), colour: c, swatch: Swatch::Line });
        }
        for m in markers {
            chart
                .draw_series(LineSeries::new(vec![(m.value, 0.0), (m.value, 1.0)], RED.stroke_width(2)))
                .map_err(err)?;
            entries.push(Entry { label: m.label.clone(), colour: RED, swatch: Swatch::Line });
        }
        legend(&side, &entries)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Line chart over a linear x axis, with optional horizontal markers and an optional vertical
/// marker (e.g. the chosen instance count).
pub(crate) fn lines(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    hmarkers: &[Marker],
    vmarker: Option<&Marker>,
    points: bool,
) -> anyhow::Result<String> {
    lines_capped(title, x_desc, y_desc, series, hmarkers, vmarker, points, None)
}

/// [`lines`] with values above `cap` drawn on the top edge (the title says so; hovering shows
/// the true value), so that one far point does not flatten the band that decides.
#[allow(clippy::too_many_arguments)]
pub(crate) fn lines_capped(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    hmarkers: &[Marker],
    vmarker: Option<&Marker>,
    points: bool,
    cap: Option<f64>,
) -> anyhow::Result<String> {
    let Some(mut x) = bounds(series, |p| p.0) else {
        return empty(title, "no data to plot");
    };
    // Dots on the plot's edge are half hidden: a margin when a series is dots only.
    if series.iter().any(|s| !s.line) {
        let pad = ((x.1 - x.0) * 0.05).max(x.1.abs() * 0.02).max(1e-9);
        x = (x.0 - pad, x.1 + pad);
    }
    let cap = cap.filter(|c| series.iter().any(|s| s.points.iter().any(|p| p.1 > *c)));
    let title = match cap {
        Some(c) => format!("{title} (over {} on the top edge)", short(c)),
        None => title.to_string(),
    };
    let title = title.as_str();
    let (y_lo, y_hi) = bounds(series, |p| cap.map_or(p.1, |c| p.1.min(c))).unwrap_or((0.0, 1.0));
    let y_lo = hmarkers.iter().map(|m| m.value).fold(y_lo, f64::min);
    let y_hi = hmarkers.iter().map(|m| m.value).fold(y_hi, f64::max);
    // From zero, unless everything lies in the upper half: then from just under the lowest
    // value, so that differences between close values show.
    let (y0, y1) = if y_hi <= 0.0 {
        (0.0, 1.0)
    } else if y_lo >= 0.5 * y_hi {
        let pad = ((y_hi - y_lo) * 0.1).max(y_hi * 0.01);
        ((y_lo - pad).max(0.0), y_hi + pad)
    } else {
        (0.0, y_hi * 1.1)
    };
    let clamp = (f64::NEG_INFINITY, cap.unwrap_or(f64::INFINITY));
    let frame = Frame { title, x_desc, y_desc, x, y: (y0, y1), y_labels: short_label, clamp };
    draw_lines(&frame, series, hmarkers, vmarker, points)
}

/// A cost frontier: each series' points (cost, attainment %) joined in cost order, the target
/// drawn. The y axis shows the band where the decision lies, from 10 points under the target
/// up (so that 95–100% is readable, not a sliver of 0–100%); counts further under it are drawn
/// on the bottom edge, and the title says so.
pub(crate) fn frontier(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    target: &Marker,
) -> anyhow::Result<String> {
    let Some((x0, x1)) = bounds(series, |p| p.0) else {
        return empty(title, "no data to plot");
    };
    let (lo, hi) = bounds(series, |p| p.1).unwrap_or((0.0, 100.0));
    let floor = (target.value - 10.0).max(0.0);
    let hi = hi.max(target.value);
    let y0 = if lo >= floor { (lo.min(target.value) - 0.5).max(0.0) } else { floor };
    let y1 = hi + ((hi - y0) * 0.08).max(0.3);
    let title = if lo < y0 { format!("{title} (counts under {y0:.0}% on the bottom edge)") } else { title.to_string() };
    let sorted: Vec<Series> = series
        .iter()
        .map(|s| {
            let mut points = s.points.clone();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series { name: s.name.clone(), points, colour: s.colour, line: s.line }
        })
        .collect();
    let span = (x1 - x0).max(1e-9);
    let x = (x0 - span * 0.05, x1 + span * 0.05);
    let clamp = (y0, f64::INFINITY);
    let frame = Frame { title: &title, x_desc, y_desc, x, y: (y0, y1), y_labels: one_decimal, clamp };
    draw_lines(&frame, &sorted, std::slice::from_ref(target), None, true)
}

fn short_label(v: &f64) -> String {
    short(*v)
}

fn one_decimal(v: &f64) -> String {
    format!("{v:.1}")
}

/// What a line chart is drawn in: its titles, axis ranges and y labels.
struct Frame<'a> {
    title: &'a str,
    x_desc: &'a str,
    y_desc: &'a str,
    x: (f64, f64),
    y: (f64, f64),
    y_labels: fn(&f64) -> String,
    /// Values outside (low, high) are drawn at the nearer bound, on the plot's edge; their hover
    /// text keeps the value.
    clamp: (f64, f64),
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
    let mut hovers = Vec::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (plot, side) = panels(&root);
        let mut entries = Vec::new();
        let mut chart = ChartBuilder::on(&plot)
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
        let drawn = |&(x, y): &(f64, f64)| (x, y.clamp(f.clamp.0, f.clamp.1));
        for (i, s) in series.iter().enumerate() {
            let c = s.colour(i);
            if s.line {
                chart.draw_series(LineSeries::new(s.points.iter().map(drawn), c.stroke_width(2))).map_err(err)?;
            }
            entries.push(Entry {
                label: s.name.clone(),
                colour: c,
                swatch: if s.line { Swatch::Line } else { Swatch::Box },
            });
            // Markers when asked, and always for short series, which a line alone may not show.
            if points || !s.line || s.points.len() <= 3 {
                chart.draw_series(s.points.iter().map(|p| Circle::new(drawn(p), 4, c.filled()))).map_err(err)?;
            }
            for p in &s.points {
                let text = format!("{}: {} {}, {} {}", s.name, short(p.0), f.x_desc, (f.y_labels)(&p.1), f.y_desc);
                hovers.push(Hover { at: chart.backend_coord(&drawn(p)), text });
            }
        }
        for m in hmarkers {
            let c = if m.reference { GREY } else { RED };
            chart.draw_series(LineSeries::new(vec![(x0, m.value), (x1, m.value)], c.stroke_width(2))).map_err(err)?;
            entries.push(Entry { label: m.label.clone(), colour: c, swatch: Swatch::Line });
        }
        if let Some(m) = vmarker {
            chart
                .draw_series(LineSeries::new(vec![(m.value, y0), (m.value, y1)], GREEN.stroke_width(2)))
                .map_err(err)?;
            entries.push(Entry { label: m.label.clone(), colour: GREEN, swatch: Swatch::Line });
        }
        legend(&side, &entries)?;
        root.present().map_err(err)?;
    }
    Ok(with_hovers(svg, &hovers))
}

/// One bar per category, each in `colours[i]` (an index into [`PALETTE`]; None: all in the
/// first colour); the `highlight` bar (the baseline, the recommended candidate) is outlined in
/// red and named in the legend with its label.
/// Width of the plot area of a chart, px: the chart less its legend panel, the y-axis labels and
/// the margins.
const PLOT_W: f64 = (W - LEGEND_W) as f64 - 64.0 - 24.0;

/// The width an 11-px sans-serif label takes, px: about 6.5 a character (DejaVu Sans, Chromium's
/// fallback, averages 6.4 at that size on digits and lower case), and a little space.
fn label_width(label: &str) -> f64 {
    label.chars().count() as f64 * 6.5 + 6.0
}

/// Whether `labels` fit side by side under their bars in [`bars`]; when not, the bars are
/// numbered 1, 2, … instead, and the caller says which is which (`#1 …` in its table).
pub(crate) fn bar_labels_fit(labels: &[String]) -> bool {
    let spacing = PLOT_W / labels.len().max(1) as f64;
    labels.iter().all(|l| label_width(l) <= spacing)
}

/// The x labels of [`bars`], at the bars' centres: the categories, or the bars' numbers from 1
/// when those do not fit ([`bar_labels_fit`]); every k-th when even those would touch.
fn bar_label_formatter(categories: &[String]) -> impl Fn(&f64) -> String {
    let labels: Vec<String> = if bar_labels_fit(categories) {
        categories.to_vec()
    } else {
        (1..=categories.len()).map(|i| i.to_string()).collect()
    };
    let spacing = PLOT_W / categories.len().max(1) as f64;
    let widest = labels.iter().map(|l| label_width(l)).fold(0.0, f64::max);
    let every = ((widest / spacing).ceil() as usize).max(1);
    move |v: &f64| {
        let i = v.floor() as usize;
        let centre = (v - i as f64 - 0.5).abs() < 0.01;
        if centre && i.is_multiple_of(every) {
            labels.get(i).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    }
}

/// Bars, one per category. Their labels are the categories where they fit side by side
/// ([`bar_labels_fit`]), else the bars' numbers from 1 (every k-th when even those do not fit);
/// hovering a bar shows its name and value either way.
pub(crate) fn bars(
    title: &str,
    y_desc: &str,
    categories: &[String],
    values: &[f64],
    colours: Option<&[usize]>,
    highlight: Option<(usize, &str)>,
) -> anyhow::Result<String> {
    let numbered = !bar_labels_fit(categories);
    let label_of = bar_label_formatter(categories);
    let y_hi = values.iter().copied().filter(|v| v.is_finite()).fold(0.0, f64::max);
    let y1 = if y_hi > 0.0 { y_hi * 1.15 } else { 1.0 };
    let colour = |i: usize| PALETTE[colours.and_then(|c| c.get(i).copied()).unwrap_or(0) % PALETTE.len()];
    let mut svg = String::new();
    let mut hovers = Vec::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (plot, side) = panels(&root);
        let mut chart = ChartBuilder::on(&plot)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(60)
            .y_label_area_size(64)
            .build_cartesian_2d(0.0..categories.len().max(1) as f64, 0.0..y1)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(categories.len().max(1) * 2 + 1)
            .x_label_formatter(&label_of)
            .x_label_style(("sans-serif", 11))
            .y_desc(y_desc)
            .y_label_formatter(&|v| short(*v))
            .draw()
            .map_err(err)?;
        let height = |v: f64| if v.is_finite() { v } else { 0.0 };
        chart
            .draw_series(values.iter().enumerate().map(|(i, &v)| {
                Rectangle::new([(i as f64 + 0.15, 0.0), (i as f64 + 0.85, height(v))], colour(i).filled())
            }))
            .map_err(err)?;
        for (i, &v) in values.iter().enumerate() {
            let name =
                categories
                    .get(i)
                    .map_or(String::new(), |c| if numbered { format!("#{} {c}", i + 1) } else { c.clone() });
            let text =
                if v.is_finite() { format!("{name}: {} {y_desc}", short(v)) } else { format!("{name}: no value") };
            hovers.push(Hover { at: chart.backend_coord(&(i as f64 + 0.5, height(v) / 2.0)), text });
        }
        let mut entries = Vec::new();
        if colours.is_none() {
            let label = title.split(" per ").next().unwrap_or(title).to_string();
            entries.push(Entry { label, colour: PALETTE[0], swatch: Swatch::Box });
        }
        if let Some((h, label)) = highlight {
            let v = values.get(h).copied().map(height).unwrap_or(0.0);
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(h as f64 + 0.15, 0.0), (h as f64 + 0.85, v)],
                    RED.stroke_width(4),
                )))
                .map_err(err)?;
            let name = categories.get(h).cloned().unwrap_or_default();
            let label = if name == label { name } else { format!("{name} ({label})") };
            entries.push(Entry { label, colour: RED, swatch: Swatch::Outline });
        }
        legend(&side, &entries)?;
        root.present().map_err(err)?;
    }
    Ok(with_hovers(svg, &hovers))
}

#[allow(dead_code)] // kept for multi-series comparisons
/// Grouped bars: one group per category (x), one bar per series; `baseline` names the series
/// drawn with a black outline.
pub(crate) fn grouped_bars(
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
        let (plot, side) = panels(&root);
        let mut entries = Vec::new();
        let mut chart = ChartBuilder::on(&plot)
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
            chart.draw_series(rects).map_err(err)?;
            entries.push(Entry { label, colour: c, swatch: Swatch::Box });
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
        legend(&side, &entries)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Short axis labels: 1.2k, 35, 0.25, 0.0012.
pub(crate) fn short(v: f64) -> String {
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
