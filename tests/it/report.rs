//! HTML reports: their tables equal summary.json, they are self-contained, they stay small and
//! readable from 1 to 1,000,000 requests, and they render in headless Chromium.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

/// Every `data-key` cell of a report: (key, text, decimals, scale).
fn cells(html: &str) -> Vec<(String, String, i32, f64)> {
    let mut out = vec![];
    for part in html.split("<td data-key=\"").skip(1) {
        let key = part.split('"').next().unwrap().to_string();
        let attr =
            |name: &str| part.split(&format!("{name}=\"")).nth(1).and_then(|s| s.split('"').next()).map(str::to_string);
        let text = part.split('>').nth(1).unwrap().split('<').next().unwrap().to_string();
        if let (Some(d), Some(s)) = (attr("data-decimals"), attr("data-scale")) {
            out.push((key, text, d.parse().unwrap(), s.parse().unwrap()));
        }
    }
    out
}

fn json_at<'a>(v: &'a serde_json::Value, key: &str) -> &'a serde_json::Value {
    key.split('.').fold(v, |v, k| match k.parse::<usize>() {
        Ok(i) if v.is_array() => &v[i],
        _ => &v[k],
    })
}

fn simulate_with_report(name: &str, scenario_text: &str) -> (PathBuf, PathBuf) {
    let dir = out_dir(name);
    std::fs::create_dir_all(&dir).unwrap();
    let scen = dir.join("scenario-in.toml");
    std::fs::write(&scen, scenario_text).unwrap();
    let out = dir.join("run");
    let html = dir.join("report.html");
    let o = servesim(&[
        "simulate",
        "--scenario",
        scen.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--report",
        html.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    (out, html)
}

fn check_tables_match_summary(html: &str, summary_path: &Path) {
    check_tables_match_json(html, summary_path, 40);
}

fn check_tables_match_json(html: &str, summary_path: &Path, min_cells: usize) {
    let summary: serde_json::Value = serde_json::from_str(&read(summary_path)).unwrap();
    let cells = cells(html);
    assert!(cells.len() >= min_cells, "the report shows the summary's numbers ({} cells)", cells.len());
    for (key, text, decimals, scale) in cells {
        let shown: f64 = text.trim_end_matches('%').parse().unwrap_or_else(|_| panic!("{key}: {text:?}"));
        let want = json_at(&summary, &key).as_f64().unwrap_or_else(|| panic!("{key} not in summary.json"));
        let tol = 0.5 * 10f64.powi(-decimals) + 1e-9;
        assert!((shown - want * scale).abs() <= tol, "{key}: report shows {text}, summary.json has {want}");
    }
}

fn check_self_contained(html: &str) {
    assert!(!html.contains("<script"), "no JavaScript");
    for bad in ["src=\"http", "href=\"http", "src='http", "href='http", "@import", "url("] {
        assert!(!html.contains(bad), "no external resource ({bad})");
    }
    assert!(html.contains("<svg"), "charts are inline SVG");
}

#[test]
fn report_tables_equal_summary_json_and_page_is_self_contained() {
    let (out, html_path) = simulate_with_report("report_chat", &read(&root().join("scenarios/chat.toml")));
    let html = read(&html_path);
    check_tables_match_summary(&html, &out.join("summary.json"));
    check_self_contained(&html);
    // Titles, axis descriptions and legends are present.
    for text in [
        "Time to first token — CDF",
        "TTFT (ms, log scale)",
        "fraction of requests",
        "SLO TTFT 2000 ms",
        "Arrival rate",
        "requests / s",
        "KV cache use",
        "p99 TTFT per window",
    ] {
        assert!(html.contains(text), "missing «{text}»");
    }
    // `servesim report DIR` rebuilds the same page from the outputs.
    let again = out.join("again.html");
    let o = servesim(&["report", out.to_str().unwrap(), "--out", again.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read(&again), html);
}

#[test]
fn the_report_reads_the_typed_summary_and_names_a_missing_key() {
    // The report reads summary.json into the struct simulate wrote it from: renaming a field
    // breaks the build (the report's code names the field) or this file's cross-check of every
    // cell's data-key; a summary.json without a key the struct has is refused, naming the key,
    // never shown as "–".
    let (out, _) = simulate_with_report("report_typed", &tiny(200, 20.0));
    let text = read(&out.join("summary.json"));
    let s: servesim_sim::metrics::Summary = serde_json::from_str(&text).expect("summary.json reads back typed");
    assert_eq!(serde_json::to_string_pretty(&s).unwrap() + "\n", text, "read back and written again, byte for byte");
    let edited = out_dir("report_typed_edited");
    std::fs::create_dir_all(&edited).unwrap();
    for f in ["requests.csv", "timeseries.csv", "scenario.toml"] {
        std::fs::copy(out.join(f), edited.join(f)).unwrap();
    }
    std::fs::write(edited.join("summary.json"), text.replace("\"goodput_rps\"", "\"goodput\"")).unwrap();
    let o = servesim(&["report", edited.to_str().unwrap(), "--out", edited.join("r.html").to_str().unwrap()]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("summary.json") && err.contains("goodput_rps"), "{err}");
    assert!(!edited.join("r.html").exists(), "no report written from a summary it cannot read");
}

#[test]
fn per_class_results_sum_to_the_totals_in_every_output() {
    let (out, html_path) = simulate_with_report("report_classes", &read(&root().join("scenarios/priority.toml")));
    let v: serde_json::Value = serde_json::from_str(&read(&out.join("summary.json"))).unwrap();
    let classes = v["classes"].as_array().expect("summary.classes for a workload with classes");
    assert_eq!(classes.iter().map(|c| c["class"].as_u64().unwrap()).collect::<Vec<_>>(), vec![0, 1, 2]);
    let sum = |k: &str| classes.iter().map(|c| c[k].as_f64().unwrap()).sum::<f64>();
    assert_eq!(sum("measured"), v["requests"]["measured"].as_f64().unwrap());
    assert_eq!(sum("finished"), v["requests"]["finished"].as_f64().unwrap(), "no warm-up: every request is measured");
    let goodput = v["slo"]["goodput_rps"].as_f64().unwrap();
    assert!((sum("goodput_rps") - goodput).abs() <= 1e-9 * goodput, "goodputs sum to the total");
    let met: f64 = classes.iter().map(|c| c["attainment"].as_f64().unwrap() * c["measured"].as_f64().unwrap()).sum();
    let total_met = v["slo"]["attainment"].as_f64().unwrap() * v["requests"]["measured"].as_f64().unwrap();
    assert!((met - total_met).abs() < 1e-6, "requests meeting the SLO: {met} by class, {total_met} in all");
    // The overloaded minute: the batch class waits longest, by its own figures.
    let q99 = |i: usize| classes[i]["queue_ms"]["p99"].as_f64().unwrap();
    assert!(q99(2) > q99(0) * 5.0, "class 2 p99 queueing {} ms vs class 0 {} ms", q99(2), q99(0));
    // requests.csv names each request's class, and its counts are the summary's.
    let csv = read(&out.join("requests.csv"));
    let head: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = head.iter().position(|h| *h == "class").expect("a class column");
    for (i, c) in classes.iter().enumerate() {
        let n = csv.lines().skip(1).filter(|l| l.split(',').nth(col) == Some(&i.to_string()[..])).count();
        assert_eq!(n as u64, c["measured"].as_u64().unwrap(), "class {i} rows");
    }
    // The report's class table shows summary.json's numbers (every data-key cell checked).
    let html = read(&html_path);
    assert!(html.contains("Priority classes") && html.contains("data-key=\"classes.2.queue_ms.p99\""));
    check_tables_match_summary(&html, &out.join("summary.json"));
    // compare gets each class's columns.
    let cmp = out_dir("report_classes_compare");
    let o = servesim(&[
        "compare",
        "--scenario",
        root().join("scenarios/priority.toml").to_str().unwrap(),
        "--vary",
        "scheduler.queue.aging_per_s=0,0.2",
        "--out",
        cmp.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let head = read(&cmp.join("compare.csv")).lines().next().unwrap().to_string();
    assert!(
        head.ends_with("class2_ttft_ms_p99,class2_queue_ms_p99,class2_attainment,class2_goodput_rps,priced_by"),
        "{head}"
    );
    let table = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(table.contains("per priority class"), "{table}");
}

#[test]
fn a_failing_fleet_gets_its_charts_and_table() {
    let (out, html_path) = simulate_with_report("report_failures", &read(&root().join("scenarios/failures.toml")));
    let html = read(&html_path);
    check_tables_match_summary(&html, &out.join("summary.json"));
    check_self_contained(&html);
    for text in ["Instances over time", "Failures and restarts", "SLO attainment of each window", "restarts", "serving"]
    {
        assert!(html.contains(text), "missing «{text}»");
    }
    // The fleet table shows summary.json's fleet numbers (checked above with every cell).
    assert!(html.contains("data-key=\"fleet.instance_hours\"") && html.contains("data-key=\"fleet.cost_per_day\""));
    // A run whose fleet never changes does not draw them.
    let (_, plain) = simulate_with_report("report_fixed_fleet", &tiny(100, 50.0));
    assert!(!read(&plain).contains("Instances over time"));
}

fn tiny(requests: u64, rate: f64) -> String {
    format!(
        "[model]\nname = \"tiny\"\nlayers = 2\nhidden = 256\nheads = 4\nkv_heads = 2\nhead_dim = 64\nintermediate = 512\n\
         vocab = 1000\nmax_context = 4096\n[gpu]\npreset = \"h100-sxm\"\n[cost]\ncpu_overhead_base_us = 50\ncpu_overhead_per_seq_us = 0.5\n\
         [workload]\nrequests = {requests}\narrival = {{ kind = \"poisson\", rate = {rate} }}\n\
         prompt_tokens = {{ kind = \"uniform\", min = 16, max = 64 }}\noutput_tokens = {{ kind = \"uniform\", min = 1, max = 4 }}\n\
         [slo]\nttft_ms = 50\ntpot_ms = 20\n"
    )
}

/// Points in the longest polyline of the page.
fn longest_polyline(html: &str) -> usize {
    html.split("<polyline")
        .skip(1)
        .map(|p| p.split("points=\"").nth(1).unwrap_or("").split('"').next().unwrap().split_whitespace().count())
        .max()
        .unwrap_or(0)
}

#[test]
fn charts_stay_readable_from_one_to_a_million_requests() {
    let (out1, html1) = simulate_with_report("report_one", &tiny(1, 1.0));
    let h1 = read(&html1);
    check_tables_match_summary(&h1, &out1.join("summary.json"));
    assert!(!h1.contains("NaN") && !h1.contains("inf"), "no NaN/inf drawn");

    let (outm, htmlm) = simulate_with_report("report_million", &tiny(1_000_000, 20_000.0));
    let hm = read(&htmlm);
    check_tables_match_summary(&hm, &outm.join("summary.json"));
    let summary: serde_json::Value = serde_json::from_str(&read(&outm.join("summary.json"))).unwrap();
    assert_eq!(summary["requests"]["finished"], 1_000_000);
    // The drawing is downsampled, the statistics are not: a bounded page whatever the run.
    assert!(hm.len() < 1_500_000, "report is {} bytes", hm.len());
    assert!(longest_polyline(&hm) <= 800, "{} points in one line", longest_polyline(&hm));
    assert!(!hm.contains("NaN"));
}

/// Chromium's command, or `None` when it is not installed (a skip, said on stderr; under CI a
/// failure).
fn chromium() -> Option<&'static str> {
    let chromium = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()));
    if chromium.is_none() {
        // Under CI (CI=true, or SERVESIM_REQUIRE_CHROMIUM=1) a missing Chromium is a failure.
        if std::env::var("SERVESIM_REQUIRE_CHROMIUM").is_ok_and(|v| v == "1")
            || std::env::var("CI").is_ok_and(|v| v == "true")
        {
            panic!("Chromium is required (CI=true or SERVESIM_REQUIRE_CHROMIUM=1) but not installed: apt-get install chromium");
        }
        // Written past the test harness's capture, so that `cargo test` shows the skip.
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "skipped: Chromium not found (apt-get install chromium to run this check)");
    }
    chromium
}

/// Headless Chromium's flags, with a fresh profile at `profile`.
fn chromium_args(profile: &Path) -> Vec<String> {
    let _ = std::fs::remove_dir_all(profile);
    [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ]
    .iter()
    .map(|a| a.to_string())
    .chain([format!("--user-data-dir={}", profile.display())])
    .collect()
}

/// Renders a page with headless Chromium to a PNG and returns (width, height, RGBA pixels).
fn screenshot(html: &Path, png: &Path) -> Option<(u32, u32, Vec<u8>)> {
    let chromium = chromium()?;
    let profile = png.with_extension("profile");
    let o = Command::new(chromium)
        .args(chromium_args(&profile))
        .arg("--window-size=1600,2400")
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", html.canonicalize().unwrap().display()))
        .output()
        .expect("chromium runs");
    assert!(png.exists(), "no screenshot: {}", String::from_utf8_lossy(&o.stderr));
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(png).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let rgba: Vec<u8> = buf[..info.buffer_size()].chunks(channels).flat_map(|p| [p[0], p[1], p[2], 255]).collect();
    Some((info.width, info.height, rgba))
}

#[test]
fn report_renders_in_headless_chromium() {
    let (_, html) = simulate_with_report("report_render", &read(&root().join("scenarios/peak.toml")));
    let png = html.with_extension("png");
    let Some((w, h, px)) = screenshot(&html, &png) else { return };
    assert_eq!((w, h), (1600, 2400));
    let pixels = px.chunks(4);
    let n = (w * h) as f64;
    let non_white = px.chunks(4).filter(|p| p[0] < 240 || p[1] < 240 || p[2] < 240).count() as f64;
    // Chart lines in the palette's blue (0, 114, 178) and the SLO red (200, 0, 0).
    let blue = pixels.clone().filter(|p| p[2] > 140 && p[0] < 60 && p[1] > 80 && p[1] < 150).count();
    let red = pixels.filter(|p| p[0] > 170 && p[1] < 50 && p[2] < 50).count();
    assert!(non_white / n > 0.03, "page is blank: {:.2}% non-white", non_white / n * 100.0);
    assert!(blue > 2000 && red > 200, "charts drawn: {blue} blue, {red} red pixels");
}

/// `servesim plan` of tests/plan/small.toml with `--report` into a fresh folder `name`: the
/// folder, the page's path and the run (its stdout is the CLI's table and evidence).
fn plan_with_report(name: &str) -> (PathBuf, PathBuf, std::process::Output) {
    let dir = out_dir(name);
    let html = dir.join("plan.html");
    let o = servesim(&[
        "plan",
        "--scenario",
        "tests/plan/small.toml",
        "--out",
        dir.to_str().unwrap(),
        "--report",
        html.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    (dir, html, o)
}

#[test]
fn plan_and_compare_reports_show_their_files_numbers() {
    let (dir, html, o) = plan_with_report("report_plan");
    let page = read(&html);
    let plan: serde_json::Value = serde_json::from_str(&read(&dir.join("plan.json"))).unwrap();
    let n = plan["candidates"].as_array().unwrap().len();
    check_tables_match_json(&page, &dir.join("plan.json"), 4 * n);
    check_self_contained(&page);
    assert!(page.contains("SLO attainment vs instance count"));
    // The cost frontier: $/h on x (small.toml prices every GPU), the band under the target shown.
    assert!(page.contains("Cost frontier: worst-seed SLO attainment at each count run"));
    assert!(page.contains("$ per hour") && page.contains("attainment (%, worst seed)"));
    // The chosen point is marked, and every candidate has a series in the legend.
    if let Some(rec) = plan["recommended"].as_str() {
        assert!(page.contains(&format!("{rec}: ")), "the chosen count is marked");
        assert!(page.contains("★ recommended"));
    }
    for c in plan["candidates"].as_array().unwrap() {
        assert!(page.contains(c["name"].as_str().unwrap()));
    }
    // The p99 frontiers, each with its SLO threshold, and hover values on the points.
    assert!(page.contains("Cost frontier: worst-seed TTFT p99 at each count run"));
    assert!(page.contains("Cost frontier: worst-seed TPOT p99 at each count run"));
    assert!(page.contains("<title>") && page.contains("$ per hour, "), "points carry hover values");
    // The evidence lines are the CLI's (the same run's stdout), word for word.
    let text = stdout(&o);
    let evidence = &text[text.find("method: capacity of one instance").expect("the CLI prints its evidence")..];
    let escaped =
        evidence.trim_end().replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;");
    assert!(page.contains("<h2>Evidence</h2>") && page.contains(&escaped), "the report's evidence is the CLI's");
    // One colour per candidate across charts: each cost bar is in its candidate's colour (not
    // all in one blue), the colours the other charts give the candidates' lines.
    let bars = page.split("<div class=\"chart\">").find(|c| c.contains("Cost of each candidate")).expect("cost bars");
    let fills: std::collections::BTreeSet<&str> = bars
        .split("fill=\"#")
        .skip(1)
        .filter_map(|p| p.get(..6))
        .filter(|c| !["000000", "FFFFFF"].contains(c))
        .collect();
    assert_eq!(fills.len(), n, "{fills:?}: one bar colour per candidate");
    // `servesim report DIR --kind plan` gives the same page.
    let again = dir.join("again.html");
    let o = servesim(&["report", dir.to_str().unwrap(), "--kind", "plan", "--out", again.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read(&again), page);

    let cdir = out_dir("report_compare");
    let chtml = cdir.join("compare.html");
    let o = servesim(&[
        "compare",
        "--scenario",
        "scenarios/chat.toml",
        "--vary",
        "workload.arrival.rate=3,9",
        "--out",
        cdir.to_str().unwrap(),
        "--report",
        chtml.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = read(&chtml);
    check_self_contained(&page);
    let csv = read(&cdir.join("compare.csv"));
    let rows: Vec<Vec<&str>> = csv.lines().skip(1).map(|l| l.split(',').collect()).collect();
    let mut seen = 0;
    for part in page.split("<td data-csv=\"").skip(1) {
        let at = part.split('"').next().unwrap();
        let (r, c) = at.split_once(',').unwrap();
        let text = part.split('>').nth(1).unwrap().split('<').next().unwrap();
        assert_eq!(text, rows[r.parse::<usize>().unwrap()][c.parse::<usize>().unwrap()], "cell {at}");
        seen += 1;
    }
    assert!(seen >= 3 * 20, "{seen} numeric cells");
    for title in [
        "TTFT p99 per variant",
        "Throughput per variant",
        "SLO attainment per variant",
        // The baseline outlined and in the legend; the SLO, the baseline and the knee on the
        // curves; hover values.
        "baseline",
        "knee: SLO met up to 9",
        "SLO TTFT 2.0k",
        "<title>",
        // Organised for a person: the key metrics first, variants named by their values, the
        // full table folded, and a numeric key drawn as curves over its values.
        "<h2>Key metrics</h2>",
        "<details><summary>Every column of compare.csv</summary>",
        "TTFT p99 against workload.arrival.rate",
        "SLO attainment against workload.arrival.rate",
        "Variants of workload.arrival.rate",
    ] {
        assert!(page.contains(title), "missing «{title}»");
    }
    // The key table's cells are compare.csv's values as written.
    for part in page.split("<span data-csv=\"").skip(1) {
        let at = part.split('"').next().unwrap();
        let (r, c) = at.split_once(',').unwrap();
        let text = part.split('>').nth(1).unwrap().split('<').next().unwrap();
        assert_eq!(text, rows[r.parse::<usize>().unwrap()][c.parse::<usize>().unwrap()], "key cell {at}");
    }
    assert!(!page.contains(">#1<"), "bars are named by their values, not numbered");
}

#[test]
fn plan_report_renders_in_headless_chromium() {
    let (_, html, _) = plan_with_report("report_plan_render");
    let Some((w, h, px)) = screenshot(&html, &html.with_extension("png")) else { return };
    let non_white = px.chunks(4).filter(|p| p[0] < 240 || p[1] < 240 || p[2] < 240).count() as f64;
    let red = px.chunks(4).filter(|p| p[0] > 170 && p[1] < 50 && p[2] < 50).count();
    assert!(non_white / (w * h) as f64 > 0.02, "page is blank");
    assert!(red > 100, "the attainment target line is drawn ({red} red pixels)");
}

/// The report says what priced the run: a roofline run is not said to be priced by measured
/// tables, and summary.json names each group's source.
#[test]
fn the_report_says_what_priced_the_run() {
    let (out, html_path) = simulate_with_report("report_roofline", &tiny(50, 20.0));
    let html = read(&html_path);
    assert!(html.contains("<p>Priced by roofline.</p>"), "{html}");
    assert!(html.contains("The roofline priced the iterations"));
    assert!(!html.contains("Every op priced from its measured table"));
    let v: serde_json::Value = serde_json::from_str(&read(&out.join("summary.json"))).unwrap();
    assert_eq!(v["cost"]["sources"][0]["source"], "roofline", "{}", v["cost"]);
    // The kernel database prices chat.toml: said so, with its framework.
    let (out, html_path) = simulate_with_report("report_database", &read(&root().join("scenarios/chat.toml")));
    let v: serde_json::Value = serde_json::from_str(&read(&out.join("summary.json"))).unwrap();
    let words = v["cost"]["sources"][0]["words"].as_str().unwrap().to_string();
    assert_eq!(v["cost"]["sources"][0]["source"], "database", "{}", v["cost"]);
    assert!(read(&html_path).contains(&format!("Priced by {words}")), "{words}");
}

/// The pairs of text elements of one chart (SVG) whose boxes overlap as Chromium lays the page
/// out: "chart: text / text" each.
fn overlapping_labels(html: &Path) -> Option<Vec<String>> {
    let chromium = chromium()?;
    const PROBE: &str = "<script>const bad = [];
document.querySelectorAll('svg').forEach((svg, k) => {
  const ts = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim() !== '')
    .map(t => [t.textContent, t.getBoundingClientRect()]);
  for (let i = 0; i < ts.length; i++) for (let j = i + 1; j < ts.length; j++) {
    const a = ts[i][1], b = ts[j][1];
    if (a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5)
      bad.push(k + ': ' + ts[i][0] + ' / ' + ts[j][0]);
  }
});
const out = document.createElement('pre'); out.id = 'overlaps'; out.textContent = bad.join('|');
document.body.appendChild(out);</script>";
    let probe = html.with_extension("probe.html");
    std::fs::write(&probe, read(html).replace("</body>", &format!("{PROBE}</body>"))).unwrap();
    let o = Command::new(chromium)
        .args(chromium_args(&html.with_extension("probe-profile")))
        .arg("--window-size=1400,2400")
        .arg("--dump-dom")
        .arg(format!("file://{}", probe.canonicalize().unwrap().display()))
        .output()
        .expect("chromium runs");
    let dom = String::from_utf8_lossy(&o.stdout);
    let found = dom.split("<pre id=\"overlaps\">").nth(1).unwrap_or_else(|| panic!("no probe result: {dom}"));
    let found = found.split("</pre>").next().unwrap();
    Some(found.split('|').filter(|p| !p.is_empty()).map(str::to_string).collect())
}

#[test]
fn compare_over_a_policy_and_a_load_draws_a_curve_per_policy_and_no_label_overlaps() {
    let dir = out_dir("report_compare_curves");
    std::fs::create_dir_all(&dir).unwrap();
    let scenario = dir.join("routers.toml");
    let text = read(&root().join("scenarios/chat.toml"))
        .replace("instances = 1", "instances = 2\nrouter = { kind = \"round-robin\" }")
        .replace("duration_s = 300", "duration_s = 60");
    std::fs::write(&scenario, text).unwrap();
    let html = dir.join("compare.html");
    let o = servesim(&[
        "compare",
        "--scenario",
        scenario.to_str().unwrap(),
        "--vary",
        "cluster.router={kind=\"round-robin\"},{kind=\"random\"},{kind=\"least-outstanding\"}",
        "--vary",
        "workload.arrival.rate=10,20,30,40,45,50",
        "--seeds",
        "1",
        "--quiet",
        "--out",
        dir.to_str().unwrap(),
        "--report",
        html.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = read(&html);
    // TTFT, TPOT and attainment along the load, a curve per router named by its kind, each
    // with its knee (the highest load up to which it meets the SLO) in the legend.
    for metric in ["TTFT p99", "TPOT p99", "SLO attainment"] {
        assert!(
            page.contains(&format!("{metric} against workload.arrival.rate, a curve per cluster.router")),
            "{metric}"
        );
    }
    let csv = read(&dir.join("compare.csv"));
    let (head, rows): (Vec<&str>, Vec<Vec<&str>>) = {
        let mut l = csv.lines();
        (l.next().unwrap().split(',').collect(), l.map(|r| r.split(',').collect()).collect())
    };
    let col = |n: &str| head.iter().position(|h| *h == n).unwrap();
    for router in ["round-robin", "random", "least-outstanding"] {
        // The knee by hand from compare.csv: the rates in order while attainment ≥ 0.99.
        let knee = rows
            .iter()
            .filter(|r| r[col("cluster.router")].contains(&format!("\"{router}\"")))
            .take_while(|r| r[col("attainment")].parse::<f64>().unwrap() >= 0.99)
            .last()
            .map(|r| r[col("workload.arrival.rate")].to_string());
        let want = match knee {
            Some(k) if k == "50" => format!("{router}: SLO throughout"),
            Some(k) => format!("{router}: SLO to {k}"),
            None => format!("{router}: SLO missed at 10"),
        };
        assert_eq!(page.matches(&format!(">\n{want}\n</text>")).count(), 3, "{want} in each of the three legends");
    }
    // 19 bars are too many to name side by side: numbered, and the table says which is which.
    assert!(page.contains("#1 baseline") && page.contains("#19 least-outstanding · 50"), "numbered");
    let Some(overlaps) = overlapping_labels(&html) else { return };
    assert!(overlaps.is_empty(), "labels overlap: {overlaps:?}");
    // The probe sees an overlap where there is one.
    let bad = dir.join("bad.html");
    std::fs::write(
        &bad,
        "<html><body><svg width=\"200\" height=\"50\"><text x=\"10\" y=\"20\">label one</text>\
         <text x=\"20\" y=\"22\">label two</text></svg></body></html>",
    )
    .unwrap();
    assert_eq!(overlapping_labels(&bad).unwrap(), vec!["0: label one / label two".to_string()]);
}
