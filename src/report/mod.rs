//! Self-contained HTML reports: inline SVG charts and tables, no network, no JavaScript.
//!
//! A report is built from a run's output folder (`summary.json`, `requests.csv`,
//! `timeseries.csv`, `scenario.toml`), so `simulate --report` and `servesim report DIR` produce
//! the same page, and the tables show exactly the numbers of `summary.json`. Long runs are
//! downsampled for drawing only: CDFs to at most 400 quantile points, time series to at most 800
//! buckets; statistics are never recomputed from the downsampled data.

pub(crate) mod charts;
pub(crate) mod html;
pub(crate) mod plan_text;

use std::path::Path;

use anyhow::{bail, Context};

use charts::{Marker, Series};
use servesim_sim::metrics::Summary;

use crate::rows::{CompareCells, Ms, Plain, RequestRow, WindowRow};
use servesim_sim::plan::{self as plan, PlanReport};

/// Most points drawn per CDF.
pub(crate) const CDF_POINTS: usize = 400;
/// Most buckets drawn per time series.
pub(crate) const SERIES_BUCKETS: usize = 800;

/// Which command's outputs a report shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Kind {
    Simulate,
    Plan,
    Compare,
    Tune,
}

impl Kind {
    fn file(self) -> &'static str {
        match self {
            Kind::Simulate => "summary.json",
            Kind::Plan => "plan.json",
            Kind::Compare => "compare.csv",
            Kind::Tune => "tune.json",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Simulate => "simulate",
            Kind::Plan => "plan",
            Kind::Compare => "compare",
            Kind::Tune => "tune",
        }
    }
}

/// Builds the report of the outputs in `dir`: of `kind`, or of the one command whose outputs
/// it holds (by its `manifest.json`, else by its files: summary.json, plan.json, compare.csv);
/// several without `kind` is an error. Returns the page and what it shows, in words.
pub(crate) fn report_for_dir(dir: &Path, kind: Option<Kind>) -> anyhow::Result<(String, String)> {
    let manifest = crate::manifest::read(dir);
    let kind = match kind {
        Some(k) => k,
        None => {
            // One kind of outputs: that one. Several (a simulate and a compare of the same
            // scenario share outputs/<name>/): the user says which, never a guess by file age.
            // The manifest names the commands whose files are all there; without one, the files.
            let present: Vec<Kind> = [Kind::Simulate, Kind::Plan, Kind::Compare, Kind::Tune]
                .into_iter()
                .filter(|k| match manifest.as_ref().and_then(|m| m.runs.get(k.name())) {
                    Some(run) => run.files.iter().all(|f| dir.join(f).is_file()),
                    None => manifest.is_none() && dir.join(k.file()).is_file(),
                })
                .collect();
            match present.as_slice() {
                [] => bail!(
                    "{} has no summary.json, plan.json, compare.csv or tune.json: not a servesim output folder",
                    dir.display()
                ),
                [k] => *k,
                several => {
                    let list: Vec<String> = several.iter().map(|k| format!("{} ({})", k.name(), k.file())).collect();
                    bail!(
                        "{} holds the outputs of several commands: {}; choose one with --kind {}",
                        dir.display(),
                        list.join(", "),
                        several.iter().map(|k| k.name()).collect::<Vec<_>>().join("|")
                    )
                }
            }
        }
    };
    if !dir.join(kind.file()).exists() {
        bail!("{} has no {}", dir.display(), kind.file());
    }
    let html = match kind {
        Kind::Simulate => simulate_report(dir)?,
        Kind::Plan => plan_report(dir)?,
        Kind::Compare => compare_report(dir)?,
        Kind::Tune => tune_report(dir)?,
    };
    let what = match manifest.as_ref().and_then(|m| m.runs.get(kind.name())) {
        Some(r) => format!(
            "the {} run of scenario {} (seed {}, inputs {}, servesim {})",
            kind.name(),
            r.scenario,
            r.seed,
            &r.inputs_sha256[..r.inputs_sha256.len().min(12)],
            r.servesim
        ),
        None => format!("the {} outputs ({}; no manifest.json)", kind.name(), kind.file()),
    };
    Ok((html, what))
}

/// The report of a `plan`: attainment against instance count per candidate (the chosen count
/// marked), and the cost table.
pub(crate) fn plan_report(dir: &Path) -> anyhow::Result<String> {
    let plan: PlanReport = read_typed(&dir.join("plan.json"), "plan")?;
    let candidates = &plan.candidates;
    let target = plan.header.slo.attainment;
    let recommended = plan.recommended.as_deref().unwrap_or("");
    let series: Vec<Series> = candidates
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut points: Vec<(f64, f64)> = c
                .points
                .iter()
                .filter_map(|p| {
                    // The worst seed's attainment: a count passes only if every seed does.
                    let worst = p.seeds.iter().map(|s| s.attainment).reduce(f64::min)?;
                    Some((p.instances as f64, worst * 100.0))
                })
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series::new(c.name.clone(), points).coloured(i)
        })
        .collect();
    let chosen = candidates.iter().find(|c| c.name == recommended).and_then(|c| c.instances_min).map(f64::from);
    let vmark = chosen.map(|n| Marker::new(format!("{recommended}: {n} instances"), n));
    let mut charts = vec![charts::lines(
        "SLO attainment vs instance count (worst seed)",
        "instances",
        "attainment (%)",
        &series,
        &[Marker::new(format!("target {:.1}%", target * 100.0), target * 100.0)],
        vmark.as_ref(),
        true,
    )?];
    // The cost frontier: every count each candidate ran on every seed (N − 1, N, the
    // recommended count), at its $/h (or GPUs without prices), by its worst seed's attainment.
    let priced = candidates.iter().all(|c| c.price_per_gpu_hour.is_some());
    // One series per candidate (in its colour) of (cost, the worst seed's value) at every count.
    let frontier_of = |pick: &dyn Fn(&[plan::SeedResult]) -> Option<f64>| -> Vec<Series> {
        candidates
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut pts: Vec<&plan::Point> = c.points.iter().collect();
                if let Some(p) = &c.provisioned {
                    pts.push(&p.point);
                }
                let mut points: Vec<(f64, f64)> = pts
                    .iter()
                    .filter_map(|p| {
                        let gpus = p.instances as f64 * (c.tp * c.pp) as f64;
                        let x = if priced { gpus * c.price_per_gpu_hour.unwrap_or(0.0) } else { gpus };
                        Some((x, pick(&p.seeds)?))
                    })
                    .collect();
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                points.dedup_by(|a, b| a.0 == b.0);
                Series::new(c.name.clone(), points).coloured(i)
            })
            .collect()
    };
    let x_desc = if priced { "$ per hour" } else { "GPUs" };
    let frontier = frontier_of(&|seeds| seeds.iter().map(|s| s.attainment).reduce(f64::min).map(|a| a * 100.0));
    charts.push(charts::frontier(
        "Cost frontier: worst-seed SLO attainment at each count run",
        x_desc,
        "attainment (%, worst seed)",
        &frontier,
        &Marker::new(format!("target {:.1}%", target * 100.0), target * 100.0),
    )?);
    // The same counts by their worst seed's p99 TTFT and TPOT, the SLO threshold drawn.
    for (title, threshold, pick) in [
        ("TTFT p99", plan.header.slo.ttft_ms, (|s: &plan::SeedResult| s.ttft_ms_p99) as fn(&plan::SeedResult) -> f64),
        ("TPOT p99", plan.header.slo.tpot_ms, |s: &plan::SeedResult| s.tpot_ms_p99),
    ] {
        let series = frontier_of(&|seeds| seeds.iter().map(pick).filter(|v| v.is_finite()).reduce(f64::max));
        let marks: Vec<Marker> =
            threshold.map(|t| Marker::new(format!("SLO {title} ≤ {t} ms"), t)).into_iter().collect();
        // Counts far over the threshold (one instance under the whole load) would flatten the
        // band that decides: values above 4× the threshold go on the top edge.
        charts.push(charts::lines_capped(
            &format!("Cost frontier: worst-seed {title} at each count run"),
            x_desc,
            "ms",
            &series,
            &marks,
            None,
            true,
            threshold.map(|t| 4.0 * t),
        )?);
    }
    let names: Vec<String> = candidates.iter().map(|c| c.name.clone()).collect();
    let costs: Vec<f64> = candidates.iter().map(|c| c.cost_per_hour.unwrap_or(f64::NAN)).collect();
    if costs.iter().any(|c| c.is_finite()) {
        let best = names.iter().position(|n| n == recommended).map(|i| (i, "recommended"));
        let colours: Vec<usize> = (0..names.len()).collect();
        charts.push(charts::bars(
            "Cost of each candidate (with headroom)",
            "$ per hour",
            &names,
            &costs,
            Some(&colours),
            best,
        )?);
    }
    let title = format!("servesim plan — {}", plan.header.scenario);
    // The evidence the CLI prints, the same text.
    let tables = html::plan_table(&plan)
        + "<h2>Evidence</h2><pre class=\"evidence\">"
        + &html::escape(&plan_text::evidence(&plan))
        + "</pre>\n";
    Ok(html::page(&title, &html::plan_header(&plan), &tables, &charts))
}

/// The report of a `tune`: every configuration searched at its recommended count, by cost
/// and by its worst seed's p99 TTFT and TPOT, the Pareto frontier's points apart, the SLO thresholds
/// and the cheapest drawn; the configurations and the pruned ones in tables.
pub(crate) fn tune_report(dir: &Path) -> anyhow::Result<String> {
    let t: plan::tune::TuneReport = read_typed(&dir.join("tune.json"), "tune")?;
    let plan = &t.plan;
    let priced = plan.candidates.iter().all(|c| c.price_per_gpu_hour.is_some());
    let cost = |c: &plan::CandidateResult| plan::tune::cost_of(c, priced);
    let x_desc = if priced { "$ per hour (at the recommended count)" } else { "GPUs (at the recommended count)" };
    let recommended = t.recommended.as_deref().unwrap_or("");
    let best = plan.candidates.iter().find(|c| c.name == recommended).and_then(cost);
    let mut charts = vec![];
    for (title, threshold, pick) in [
        (
            "TTFT p99",
            plan.header.slo.ttft_ms,
            (|c: &plan::CandidateResult| c.ttft_ms_p99) as fn(&plan::CandidateResult) -> Option<f64>,
        ),
        ("TPOT p99", plan.header.slo.tpot_ms, |c: &plan::CandidateResult| c.tpot_ms_p99),
    ] {
        let point = |c: &plan::CandidateResult| Some((cost(c)?, pick(c)?));
        let feasible = || plan.candidates.iter().filter(|c| c.feasible);
        // The frontier is over cost, TTFT and TPOT at once: its points are dots here (a line
        // through them in one projection would suggest a trade-off it does not show).
        let front: Vec<(f64, f64)> = feasible().filter(|c| t.frontier.contains(&c.name)).filter_map(point).collect();
        let others: Vec<(f64, f64)> = feasible().filter(|c| !t.frontier.contains(&c.name)).filter_map(point).collect();
        let series = vec![
            Series::new(format!("Pareto frontier ({})", front.len()), front).coloured(0).dots(),
            Series::new(format!("other feasible ({})", others.len()), others).coloured(1).dots(),
        ];
        let marks: Vec<Marker> =
            threshold.map(|v| Marker::new(format!("SLO {title} ≤ {v} ms"), v)).into_iter().collect();
        let vmark = best.map(|b| Marker::new(format!("cheapest: {recommended}"), b));
        charts.push(charts::lines_capped(
            &format!("Configurations: worst-seed {title} against cost"),
            x_desc,
            "ms",
            &series,
            &marks,
            vmark.as_ref(),
            true,
            threshold.map(|v| 4.0 * v),
        )?);
    }
    let header = format!(
        "<p>{} configurations searched, {} pruned (they cannot be the cheapest: listed below). \
         Cheapest meeting the SLO on every seed: <b>{}</b>. The Pareto frontier: the feasible \
         configurations no other beats on cost, p99 TTFT and p99 TPOT at once.</p>{}",
        t.configurations,
        t.pruned.len(),
        html::escape(t.recommended.as_deref().unwrap_or("none")),
        t.launch_command.as_deref().map_or(String::new(), |l| format!("<pre>{}</pre>", html::escape(l)))
    );
    let header = if t.unsearched.is_empty() {
        header
    } else {
        header
            + &format!(
                "<p><b>The budget of {} runs was spent</b>: {} configuration(s) were not searched ({}); the cheapest \
                 above is the cheapest of those searched, not proven the cheapest of the space.</p>",
                t.budget_runs.unwrap_or(0),
                t.unsearched.len(),
                html::escape(&t.unsearched.join(", "))
            )
    };
    let mut tables = html::plan_table(plan);
    if !t.pruned.is_empty() {
        tables += "<h2>Pruned</h2><table><tr><th>configuration</th><th>least possible cost</th>\
                   <th>cheapest found then</th><th>why</th></tr>\n";
        for p in &t.pruned {
            let why = match p.failed_at_instances {
                Some(n) => format!("missed the SLO on the first seed at {n} instance(s)"),
                None => "its cost floor".to_string(),
            };
            tables += &format!(
                "<tr><td>{}</td><td>{}</td><td>{:.2}</td><td>{why}</td></tr>\n",
                html::escape(&p.name),
                p.least_cost.map_or("— (misses at the most instances)".to_string(), |c| format!("{c:.2}")),
                p.cheapest_found
            );
        }
        tables += "</table>\n";
    }
    Ok(html::page_charts_first(
        &format!("servesim tune — {}", t.scenario),
        &(html::plan_header(plan) + &header),
        &tables,
        &charts,
    ))
}

/// The report of a `compare`: bars per variant for the key metrics, the baseline outlined, and
/// the table of compare.csv.
pub(crate) fn compare_report(dir: &Path) -> anyhow::Result<String> {
    let path = dir.join("compare.csv");
    let (mut headers, mut rows, mut cells) = (vec![], vec![], vec![]);
    crate::rows::each_record(&path, |rec, h| {
        if headers.is_empty() {
            headers = h.iter().map(str::to_string).collect();
        }
        cells.push(rec.deserialize::<CompareCells>(Some(h))?);
        rows.push(rec.iter().map(str::to_string).collect::<Vec<String>>());
        Ok(())
    })?;
    let col = |name: &str| headers.iter().position(|h| h == name);
    let baseline = rows.iter().position(|r| r[0] == "baseline");
    // The varied keys are the columns between the variant and the first metric; each variant is
    // named by its values ("64 · 2"), short enough for a bar label.
    let keys_end = col(&crate::rows::header::<CompareCells>()[0]).unwrap_or(1).max(1);
    let keys: Vec<String> = headers[1..keys_end].to_vec();
    let labels = variant_labels(&rows, keys_end);
    let mut charts = vec![];
    type Metric = fn(&CompareCells) -> f64;
    // One numeric key: the metrics as curves over its values (latency against load).
    let numeric: Option<Vec<(f64, &CompareCells)>> = (keys.len() == 1)
        .then(|| {
            rows.iter()
                .zip(&cells)
                .filter(|(r, _)| r[0] != "baseline")
                .map(|(r, c)| Some((r[1].parse().ok()?, c)))
                .collect()
        })
        .flatten();
    if let Some(xs) = numeric.filter(|xs| xs.len() >= 2) {
        let target = shared_setting(&cells, |c| c.slo_target);
        // The knee: the highest value of the key up to which every variant meets the SLO target.
        let mut order: Vec<(f64, &CompareCells)> = xs.clone();
        order.sort_by(|a, b| a.0.total_cmp(&b.0));
        let knee = target.and_then(|t| knee(&order, t));
        let knee_mark = knee.map(|x| Marker::new(format!("knee: SLO met up to {}", charts::short(x)), x));
        let base_cells = baseline.map(|b| &cells[b]);
        for (i, (metric, title, unit, scale, slo)) in slo_curves(&cells).into_iter().enumerate() {
            let points: Vec<(f64, f64)> = xs.iter().map(|(x, c)| (*x, metric(c) * scale)).collect();
            let mut marks: Vec<Marker> =
                slo.map(|(label, v)| Marker::new(format!("{label} {}", charts::short(v)), v)).into_iter().collect();
            if let Some(b) = base_cells.map(metric) {
                marks.push(Marker::reference(format!("baseline {}", charts::short(b * scale)), b * scale));
            }
            // Latencies far past the SLO (an overloaded variant) go on the top edge at 4× it.
            let is_latency = i < 2;
            let cap = slo.filter(|_| is_latency).map(|(_, v)| 4.0 * v);
            charts.push(charts::lines_capped(
                &format!("{title} against {}", keys[0]),
                &keys[0],
                unit,
                &[Series::new(title, points)],
                &marks,
                knee_mark.as_ref(),
                true,
                cap,
            )?);
        }
    }
    // A category and a number (a policy and a load): a curve per category along the number.
    if let Some(axes) = category_axes(&rows, keys_end) {
        charts.extend(category_curves(&axes, &keys, &rows, &cells)?);
    }
    let bars: [(Metric, &str, &str, f64); 6] = [
        (|c| c.ttft_ms_p99.0, "TTFT p99", "ms", 1.0),
        (|c| c.tpot_ms_p99.0, "TPOT p99", "ms", 1.0),
        (|c| c.e2e_ms_p99.0, "E2E p99", "ms", 1.0),
        (|c| c.throughput_rps.0, "Throughput", "requests / s", 1.0),
        (|c| c.goodput_rps.0, "Goodput", "requests / s within SLO", 1.0),
        (|c| c.attainment.0, "SLO attainment", "% of requests", 100.0),
    ];
    for (metric, title, unit, scale) in bars {
        let values: Vec<f64> = cells.iter().map(|c| metric(c) * scale).collect();
        charts.push(charts::bars(
            &format!("{title} per variant"),
            unit,
            &labels,
            &values,
            None,
            baseline.map(|b| (b, "baseline")),
        )?);
    }
    let title = format!("servesim compare — {}", dir.file_name().and_then(|n| n.to_str()).unwrap_or("compare"));
    // Bars too many to name are numbered: the table says which number is which.
    let labels: Vec<String> = if charts::bar_labels_fit(&labels) {
        labels
    } else {
        labels.iter().enumerate().map(|(i, l)| format!("#{} {l}", i + 1)).collect()
    };
    let tables = html::compare_key_table(&headers, &rows, &labels)
        + "<details><summary>Every column of compare.csv</summary>\n"
        + &html::csv_table(&headers, &rows, &labels)
        + "</details>\n";
    let meta = compare_meta(&keys, &rows, col(crate::rows::PRICED_BY), baseline);
    Ok(html::page(&title, &meta, &tables, &charts))
}

/// The compare report's head: what varies, and what priced the rows.
fn compare_meta(keys: &[String], rows: &[Vec<String>], priced_at: Option<usize>, baseline: Option<usize>) -> String {
    let varied = if keys.is_empty() { "the scenario".to_string() } else { html::escape(&keys.join(", ")) };
    format!(
        "<p class=\"meta\">Variants of {varied} on the identical request stream; the baseline is the scenario as written (outlined in the bars).</p>{}",
        priced_by_html(rows, priced_at, baseline)
    )
}

/// What priced the compared rows (compare.csv's `priced_by` column, `at`): one line when every
/// row was priced alike, else the baseline's and each row priced otherwise.
fn priced_by_html(rows: &[Vec<String>], at: Option<usize>, baseline: Option<usize>) -> String {
    let Some(at) = at else { return String::new() };
    let cell = |r: &Vec<String>| r.get(at).cloned().unwrap_or_default();
    let base = baseline.map(|b| cell(&rows[b])).unwrap_or_default();
    let other: Vec<&Vec<String>> = rows.iter().filter(|r| cell(r) != base).collect();
    if other.is_empty() {
        return format!("<p class=\"meta\">Priced by: {}</p>", html::escape(&base));
    }
    let mut o = format!("<p class=\"meta\">Priced by (baseline): {}</p>\n<ul class=\"meta\">\n", html::escape(&base));
    for r in other {
        o += &format!("<li>{}: {}</li>\n", html::escape(&r[0]), html::escape(&cell(r)));
    }
    o + "</ul>"
}

/// The knee of variants ordered by the number: the highest value up to which every one meets
/// the SLO target (`None`: the first already misses it).
fn knee(by_number: &[(f64, &CompareCells)], target: f64) -> Option<f64> {
    by_number.iter().take_while(|(_, c)| c.attainment.0 >= target).last().map(|(x, _)| *x)
}

/// A setting every variant shares (the SLO, unless it is what varies), else none.
fn shared_setting(cells: &[CompareCells], f: fn(&CompareCells) -> Option<Plain>) -> Option<f64> {
    let v = f(cells.first()?)?;
    cells.iter().all(|c| f(c) == Some(v)).then_some(v.0)
}

/// A compare curve: (metric, title, unit, scale, the threshold line).
type SloCurve = (fn(&CompareCells) -> f64, &'static str, &'static str, f64, Option<(&'static str, f64)>);

/// TTFT p99, TPOT p99 and SLO attainment, each with its SLO line where every variant has the same.
fn slo_curves(cells: &[CompareCells]) -> [SloCurve; 3] {
    let shared = |f| shared_setting(cells, f);
    [
        (|c| c.ttft_ms_p99.0, "TTFT p99", "ms", 1.0, shared(|c| c.slo_ttft_ms).map(|v| ("SLO TTFT", v))),
        (|c| c.tpot_ms_p99.0, "TPOT p99", "ms", 1.0, shared(|c| c.slo_tpot_ms).map(|v| ("SLO TPOT", v))),
        (
            |c| c.attainment.0,
            "SLO attainment",
            "% of requests",
            100.0,
            shared(|c| c.slo_target).map(|t| ("target", t * 100.0)),
        ),
    ]
}

/// The variants' labels: their values ("64 · 2", a policy by its kind), cut to 24 characters.
fn variant_labels(rows: &[Vec<String>], keys_end: usize) -> Vec<String> {
    rows.iter()
        .map(|r| {
            if r[0] == "baseline" {
                return "baseline".to_string();
            }
            let v = r[1..keys_end].iter().map(|v| short_value(v)).collect::<Vec<_>>().join(" · ");
            if v.chars().count() > 24 {
                format!("{}…", v.chars().take(23).collect::<String>())
            } else {
                v
            }
        })
        .collect()
}

/// A varied value as a label: a policy table naming only its kind (`{kind="chunked"}`) by
/// its kind, anything else as typed.
fn short_value(v: &str) -> &str {
    let kind = v.strip_prefix('{').and_then(|v| v.strip_suffix('}')).and_then(|v| {
        let (k, val) = v.split_once('=')?;
        let val = val.trim().strip_prefix('"')?.strip_suffix('"')?;
        (k.trim() == "kind" && !val.contains('"')).then_some(val)
    });
    kind.unwrap_or(v)
}

/// Which of two varied keys is the number and which the category: the number is a key whose
/// every variant's value is a number with at least two distinct values (of two such, the one
/// with more values, else the second, which varies fastest); the other is the category.
/// `None` unless exactly two keys vary and one of them is such a number.
fn category_axes(rows: &[Vec<String>], keys_end: usize) -> Option<CategoryAxes> {
    if keys_end != 3 {
        return None;
    }
    let variants: Vec<&Vec<String>> = rows.iter().filter(|r| r[0] != "baseline").collect();
    let distinct = |k: usize| -> Option<usize> {
        let mut xs: Vec<f64> =
            variants.iter().map(|r| r[k].parse::<f64>().ok().filter(|x| x.is_finite())).collect::<Option<_>>()?;
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        (xs.len() >= 2).then_some(xs.len())
    };
    let x = match (distinct(1), distinct(2)) {
        (Some(a), Some(b)) if a > b => 1,
        (_, Some(_)) => 2,
        (Some(_), None) => 1,
        (None, None) => return None,
    };
    Some(CategoryAxes { x, category: 3 - x })
}

/// The columns of compare.csv holding the number and the category ([`category_axes`]).
struct CategoryAxes {
    x: usize,
    category: usize,
}

/// TTFT p99, TPOT p99 and SLO attainment against the number, a curve per category (in the
/// order the variants first name them), with the SLO lines; each curve's legend entry says up to
/// which value it meets the SLO target (its knee).
fn category_curves(
    axes: &CategoryAxes,
    keys: &[String],
    rows: &[Vec<String>],
    cells: &[CompareCells],
) -> anyhow::Result<Vec<String>> {
    let mut categories: Vec<&str> = Vec::new();
    for r in rows.iter().filter(|r| r[0] != "baseline") {
        if !categories.contains(&r[axes.category].as_str()) {
            categories.push(&r[axes.category]);
        }
    }
    let shown = |cat: &str| short_value(cat).to_string();
    let target = shared_setting(cells, |c| c.slo_target);
    // Each category's variants, by the number.
    let of = |cat: &str| -> Vec<(f64, &CompareCells)> {
        let mut v: Vec<(f64, &CompareCells)> = rows
            .iter()
            .zip(cells)
            .filter(|(r, _)| r[0] != "baseline" && r[axes.category] == cat)
            .map(|(r, c)| (r[axes.x].parse().expect("a number, by category_axes"), c))
            .collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v
    };
    let (x_key, cat_key) = (&keys[axes.x - 1], &keys[axes.category - 1]);
    let name = |value: &str| -> String {
        let (pts, cat) = (of(value), shown(value));
        let knee = target.map(|t| knee(&pts, t));
        match knee {
            None => cat,
            Some(None) => format!("{cat}: SLO missed at {}", charts::short(pts[0].0)),
            Some(Some(x)) if x == pts[pts.len() - 1].0 => format!("{cat}: SLO throughout"),
            Some(Some(x)) => format!("{cat}: SLO to {}", charts::short(x)),
        }
    };
    let mut charts = Vec::new();
    for (i, (metric, title, unit, scale, slo)) in slo_curves(cells).into_iter().enumerate() {
        let series: Vec<Series> = categories
            .iter()
            .enumerate()
            .map(|(j, cat)| {
                Series::new(name(cat), of(cat).iter().map(|(x, c)| (*x, metric(c) * scale)).collect()).coloured(j)
            })
            .collect();
        let marks: Vec<Marker> =
            slo.map(|(label, v)| Marker::new(format!("{label} {}", charts::short(v)), v)).into_iter().collect();
        let cap = slo.filter(|_| i < 2).map(|(_, v)| 4.0 * v);
        charts.push(charts::lines_capped(
            &format!("{title} against {x_key}, a curve per {cat_key}"),
            x_key,
            unit,
            &series,
            &marks,
            None,
            true,
            cap,
        )?);
    }
    Ok(charts)
}

/// The empirical CDF of `values` (sorted here), downsampled to at most `CDF_POINTS` points at
/// evenly spaced ranks, always keeping the first and last.
pub(crate) fn cdf_points(values: &mut [f64]) -> Vec<(f64, f64)> {
    values.sort_unstable_by(|a, b| a.total_cmp(b));
    let n = values.len();
    if n == 0 {
        return vec![];
    }
    let k = CDF_POINTS.min(n);
    (0..k)
        .map(|i| {
            let idx = if k == 1 { n - 1 } else { ((i as f64) * (n - 1) as f64 / (k - 1) as f64).round() as usize };
            (values[idx], (idx + 1) as f64 / n as f64)
        })
        .collect()
}

/// One row of `timeseries.csv`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Window {
    pub t_s: f64,
    pub arrivals: f64,
    pub waiting: f64,
    pub running: f64,
    pub kv_util: f64,
    pub ttft_p99: Option<f64>,
    /// Instances provisioned and serving.
    pub instances: f64,
    pub instances_ready: f64,
    pub failures: f64,
    pub restarts: f64,
    /// SLO attainment of the window's arrivals.
    pub attainment: Option<f64>,
}

/// Reads `timeseries.csv`.
pub(crate) fn read_timeseries(path: &Path) -> anyhow::Result<Vec<Window>> {
    let mut out = vec![];
    crate::rows::each_record(path, |rec, headers| {
        let w: WindowRow = rec.deserialize(Some(headers))?;
        out.push(Window {
            t_s: w.t_s.0,
            arrivals: w.arrivals as f64,
            waiting: w.waiting_mean.0,
            running: w.running_mean.0,
            kv_util: w.kv_utilization_mean.0,
            ttft_p99: w.ttft_ms_p99.map(|v| v.0),
            instances: w.instances_mean.0,
            instances_ready: w.instances_ready_mean.0,
            failures: w.failures as f64,
            restarts: w.restarts as f64,
            attainment: w.slo_attainment.map(|v| v.0),
        });
        Ok(())
    })?;
    Ok(out)
}

/// Groups windows into at most `SERIES_BUCKETS` buckets: means for rates, occupancy and
/// instance counts, sums for failures and restarts, the maximum for p99 TTFT and the minimum
/// for SLO attainment (a bucket's worst window), so a short burst or dip stays visible.
pub(crate) fn downsample(rows: &[Window], window_s: f64) -> Vec<Window> {
    if rows.is_empty() {
        return vec![];
    }
    let g = rows.len().div_ceil(SERIES_BUCKETS);
    rows.chunks(g)
        .map(|c| {
            let n = c.len() as f64;
            Window {
                t_s: c[0].t_s,
                arrivals: c.iter().map(|w| w.arrivals).sum::<f64>() / (n * window_s),
                waiting: c.iter().map(|w| w.waiting).sum::<f64>() / n,
                running: c.iter().map(|w| w.running).sum::<f64>() / n,
                kv_util: c.iter().map(|w| w.kv_util).sum::<f64>() / n,
                ttft_p99: c.iter().filter_map(|w| w.ttft_p99).reduce(f64::max),
                instances: c.iter().map(|w| w.instances).sum::<f64>() / n,
                instances_ready: c.iter().map(|w| w.instances_ready).sum::<f64>() / n,
                failures: c.iter().map(|w| w.failures).sum(),
                restarts: c.iter().map(|w| w.restarts).sum(),
                attainment: c.iter().filter_map(|w| w.attainment).reduce(f64::min),
            }
        })
        .collect()
}

/// Latencies of measured, finished requests from `requests.csv`: (TTFT, TPOT, E2E) in ms.
fn read_latencies(path: &Path) -> anyhow::Result<(Vec<f64>, Vec<f64>, Vec<f64>)> {
    let (mut ttft, mut tpot, mut e2e) = (vec![], vec![], vec![]);
    crate::rows::each_record(path, |rec, headers| {
        let r: RequestRow = rec.deserialize(Some(headers))?;
        if r.measured == 1 && r.status == "finished" {
            let need = |v: Option<Ms>, name: &str| {
                v.map(Ms::as_f64).ok_or_else(|| {
                    csv::Error::from(std::io::Error::other(format!("a finished request without {name}")))
                })
            };
            ttft.push(need(r.ttft_ms, "ttft_ms")?);
            e2e.push(need(r.e2e_ms, "e2e_ms")?);
            tpot.extend(r.tpot_ms.map(|v| v.0));
        }
        Ok(())
    })?;
    Ok((ttft, tpot, e2e))
}

fn slo_marker(threshold: Option<f64>, label: &str) -> Vec<Marker> {
    threshold.map(|v| Marker::new(format!("SLO {label} {v} ms"), v)).into_iter().collect()
}

/// Reads an output file as the typed struct its command wrote (`summary.json`, `plan.json`).
fn read_typed<T: serde::de::DeserializeOwned>(path: &Path, command: &str) -> anyhow::Result<T> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: not the output of this servesim's {command} (written by another version, or edited?)",
            path.display()
        )
    })
}

/// The report of one `simulate` run.
pub(crate) fn simulate_report(dir: &Path) -> anyhow::Result<String> {
    let summary: Summary = read_typed(&dir.join("summary.json"), "simulate")?;
    let scenario: toml::Value = {
        let p = dir.join("scenario.toml");
        let text = std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        toml::from_str(&text).with_context(|| format!("{}: not valid TOML", p.display()))?
    };
    let (mut ttft, mut tpot, mut e2e) = read_latencies(&dir.join("requests.csv"))?;
    let rows = read_timeseries(&dir.join("timeseries.csv"))?;
    let window_s = scenario.get("metrics").and_then(|m| m.get("window_s")).and_then(|v| v.as_float()).unwrap_or(1.0);
    let ds = downsample(&rows, window_s);

    let mut charts = vec![];
    let one = |name: &str, values: &mut Vec<f64>| vec![Series::new(name, cdf_points(values))];
    charts.push(charts::cdf(
        "Time to first token — CDF",
        "TTFT (ms, log scale)",
        &one("TTFT", &mut ttft),
        &slo_marker(summary.slo.ttft_ms, "TTFT"),
    )?);
    charts.push(charts::cdf(
        "Time per output token — CDF",
        "TPOT (ms, log scale)",
        &one("TPOT", &mut tpot),
        &slo_marker(summary.slo.tpot_ms, "TPOT"),
    )?);
    charts.push(charts::cdf(
        "End-to-end latency — CDF",
        "E2E (ms, log scale)",
        &one("E2E", &mut e2e),
        &slo_marker(summary.slo.e2e_ms, "E2E"),
    )?);

    let pts = |f: &dyn Fn(&Window) -> Option<f64>| -> Vec<(f64, f64)> {
        ds.iter().filter_map(|w| f(w).map(|v| (w.t_s, v))).collect()
    };
    let s = |name: &str, points: Vec<(f64, f64)>| vec![Series::new(name, points)];
    charts.push(charts::lines(
        "Arrival rate",
        "time (s)",
        "requests / s",
        &s("arrivals", pts(&|w| Some(w.arrivals))),
        &[],
        None,
        false,
    )?);
    charts.push(charts::lines(
        "Queue and running batch",
        "time (s)",
        "requests (mean over window)",
        &[Series::new("waiting", pts(&|w| Some(w.waiting))), Series::new("running", pts(&|w| Some(w.running)))],
        &[],
        None,
        false,
    )?);
    charts.push(charts::lines(
        "KV cache use",
        "time (s)",
        "% of blocks",
        &s("KV used", pts(&|w| Some(w.kv_util * 100.0))),
        &[],
        None,
        false,
    )?);
    let slo_ttft = slo_marker(summary.slo.ttft_ms, "TTFT");
    // Markers only when there are few windows to draw; otherwise they bury the line.
    let p99 = pts(&|w| w.ttft_p99);
    let few = p99.len() <= 60;
    charts.push(charts::lines(
        "p99 TTFT per window",
        "time (s)",
        "TTFT p99 (ms)",
        &s("p99 TTFT", p99),
        &slo_ttft,
        None,
        few,
    )?);

    // The fleet over time, when it changed: instances, failures and restarts, and attainment
    // of each window's arrivals (where a failure or a traffic step shows as a dip).
    let fleet = &summary.fleet;
    let dynamic = fleet.instances_min != fleet.instances_max || fleet.failures > 0 || fleet.scale_ups > 0;
    if dynamic {
        charts.push(charts::lines(
            "Instances over time",
            "time (s)",
            "instances (mean over window)",
            &[
                Series::new("provisioned", pts(&|w| Some(w.instances))),
                Series::new("serving", pts(&|w| Some(w.instances_ready))),
            ],
            &[],
            None,
            false,
        )?);
        charts.push(charts::lines(
            "Failures and restarts",
            "time (s)",
            "per window",
            &[Series::new("failures", pts(&|w| Some(w.failures))), Series::new("restarts", pts(&|w| Some(w.restarts)))],
            &[],
            None,
            false,
        )?);
        let target = summary.slo.target * 100.0;
        charts.push(charts::lines(
            "SLO attainment of each window's arrivals",
            "time (s)",
            "attainment (%)",
            &s("attainment", pts(&|w| w.attainment.map(|a| a * 100.0))),
            &[Marker::new(format!("target {target:.1}%"), target)],
            None,
            false,
        )?);
    }

    let title = format!("servesim simulate — {}", summary.scenario);
    Ok(html::page(&title, &html::scenario_header(&scenario, &summary), &html::summary_tables(&summary), &charts))
}
