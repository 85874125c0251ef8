//! The crate's layers, checked from its source: no import cycle between the top-level modules of
//! `sim/src` (nor of the binary's `src/`), and `config` (the bottom layer) imports no other module. ARCHITECTURE.md draws the
//! layers; this test keeps the drawing true. A failure lists every cycle with the files that make
//! each of its edges.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// Module → module it uses → the files that use it.
type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// Every `.rs` file under `dir`, as (path relative to `root`, text).
fn sources(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> = fs::read_dir(dir).expect("sim/src is readable").map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            sources(root, &p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
            out.push((rel, fs::read_to_string(&p).unwrap()));
        }
    }
}

/// The top-level module a file belongs to (`instance/queue/mod.rs` → `instance`); `None` for
/// the crate root.
fn module_of(rel: &str) -> Option<String> {
    let first = rel.split('/').next()?;
    let m = first.strip_suffix(".rs").unwrap_or(first);
    (m != "lib" && m != "main").then(|| m.to_string())
}

/// The top-level names a file reaches through `crate::` paths (`use` lines and inline paths,
/// grouped imports `crate::{a, b::c}` included), comments left out.
fn crate_paths(src: &str) -> BTreeSet<String> {
    let code: String = src.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
    let mut names = BTreeSet::new();
    let bytes = code.as_bytes();
    let mut at = 0;
    while let Some(i) = code[at..].find("crate::") {
        let start = at + i + "crate::".len();
        at = start;
        if bytes.get(start) == Some(&b'{') {
            // Top-level names of the group: those at brace depth 1, each before `::`, `,` or `}`.
            let (mut depth, mut word, mut j) = (0usize, String::new(), start);
            while j < bytes.len() {
                let c = bytes[j] as char;
                match c {
                    '{' => {
                        if depth == 1 && !word.is_empty() {
                            names.insert(std::mem::take(&mut word));
                        }
                        depth += 1;
                    }
                    '}' => {
                        if depth == 1 && !word.is_empty() {
                            names.insert(std::mem::take(&mut word));
                        }
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ if depth == 1 && (c.is_alphanumeric() || c == '_') => word.push(c),
                    _ if depth == 1 => {
                        if !word.is_empty() {
                            names.insert(std::mem::take(&mut word));
                        }
                        // Skip the rest of this item (`b::c`, `self as x`) up to `,` at depth 1.
                        if c == ':' {
                            while j + 1 < bytes.len() && !matches!(bytes[j + 1], b',' | b'}' | b'{') {
                                j += 1;
                            }
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        } else {
            let word: String = code[start..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            names.insert(word);
        }
    }
    names
}

fn graph(files: &[(String, String)]) -> Graph {
    let modules: BTreeSet<String> = files.iter().filter_map(|(rel, _)| module_of(rel)).collect();
    let mut g = Graph::new();
    for (rel, src) in files {
        let Some(m) = module_of(rel) else { continue };
        g.entry(m.clone()).or_default();
        for n in crate_paths(src) {
            if n != m && modules.contains(&n) {
                g.entry(m.clone()).or_default().entry(n).or_default().insert(rel.clone());
            }
        }
    }
    g
}

/// The strongly connected components with more than one module (Tarjan), each sorted.
fn cycles(g: &Graph) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.g.get(v).into_iter().flat_map(|e| e.keys()) {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut scc = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(w);
                scc.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                t.out.push(scc);
            }
        }
    }
    let mut t =
        T { g, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), on: BTreeSet::new(), out: Vec::new() };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

fn describe(g: &Graph, scc: &[String]) -> String {
    let mut s = format!("cycle through {}:\n", scc.join(", "));
    for a in scc {
        for (b, files) in &g[a] {
            if scc.contains(b) {
                s += &format!("  {a} -> {b}: {}\n", files.iter().cloned().collect::<Vec<_>>().join(", "));
            }
        }
    }
    s
}

/// The graph of the sources under `dir` (relative to sim/), which must hold more than `min` files.
fn graph_of(dir: &str, min: usize) -> Graph {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files = Vec::new();
    sources(&root, &root, &mut files);
    assert!(files.len() > min, "found the sources of {dir} ({} files)", files.len());
    graph(&files)
}

fn sim_graph() -> Graph {
    graph_of("src", 50)
}

#[test]
fn no_import_cycle_between_top_level_modules() {
    let g = sim_graph();
    let found = cycles(&g);
    let text: Vec<String> = found.iter().map(|c| describe(&g, c)).collect();
    assert!(found.is_empty(), "import cycles between sim's top-level modules:\n{}", text.join("\n"));
}

/// The binary's modules (`src/` beside `sim/`), by the same rules.
fn binary_graph() -> Graph {
    graph_of("../src", 20)
}

#[test]
fn no_import_cycle_between_the_binarys_top_level_modules() {
    let g = binary_graph();
    let found = cycles(&g);
    let text: Vec<String> = found.iter().map(|c| describe(&g, c)).collect();
    assert!(found.is_empty(), "import cycles between the binary's top-level modules:\n{}", text.join("\n"));
}

#[test]
fn config_imports_no_other_module() {
    let g = sim_graph();
    let used: Vec<String> = g["config"].iter().map(|(m, f)| format!("{m} (in {f:?})")).collect();
    assert!(used.is_empty(), "config must import nothing of the crate, but uses {}", used.join(", "));
}

#[test]
fn the_runtime_does_not_reach_up_to_the_scenario_or_the_planner() {
    // The resolved scenario is above the components it builds; the planner is above the engine.
    let g = sim_graph();
    for m in ["workload", "cost", "metrics", "instance", "router", "fleet", "disagg", "frontend"] {
        for up in ["scenario", "engine", "plan"] {
            assert!(!g[m].contains_key(up), "{m} imports {up} ({:?}): the runtime must not import its configuration's resolver, the engine or the planner", g[m][up]);
        }
    }
}

#[test]
fn the_checker_finds_a_cycle_and_reads_grouped_imports() {
    // The check above can fail: a three-module cycle made only of grouped and inline paths.
    let files = vec![
        ("a/mod.rs".to_string(), "use crate::{b::{X, Y}, time};\n".to_string()),
        ("b.rs".to_string(), "fn f() { crate::c::g(); } // crate::a::h in a comment\n".to_string()),
        ("c/x.rs".to_string(), "use crate::{self as k, a::Z};\n".to_string()),
        ("time.rs".to_string(), "use crate::time::SimTime;\n".to_string()),
        ("lib.rs".to_string(), "pub mod a;\n".to_string()),
    ];
    let g = graph(&files);
    assert_eq!(cycles(&g), vec![vec!["a".to_string(), "b".to_string(), "c".to_string()]]);
    assert!(g["a"].contains_key("time") && !g["b"].contains_key("a"), "{g:?}");
    assert!(describe(&g, &["a".into(), "b".into(), "c".into()]).contains("b -> c: b.rs"));
}
