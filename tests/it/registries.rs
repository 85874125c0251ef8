//! docs/scenario.md's policy tables against the registries: each table lists exactly the kinds
//! its family registers (`policy_family!`'s `KINDS`), so a new policy without its row, or a row
//! for a policy that is gone, fails here.

use servesim_sim::instance::batching::BatchingSpec;
use servesim_sim::instance::preemption::PreemptionSpec;
use servesim_sim::instance::queue::QueueSpec;
use servesim_sim::router::RouterSpec;

/// The kinds in the first column of the table under `heading` (`| \`kind\` … |` rows).
fn table_kinds(doc: &str, heading: &str) -> Vec<String> {
    let at = doc.find(heading).unwrap_or_else(|| panic!("docs/scenario.md has no heading {heading:?}"));
    let mut kinds = Vec::new();
    let mut in_table = false;
    for line in doc[at + heading.len()..].lines() {
        if line.starts_with('#') {
            break;
        }
        if !line.starts_with('|') {
            if in_table {
                break;
            }
            continue;
        }
        in_table = true;
        let first = line.split('|').nth(1).unwrap_or("").trim();
        if let Some(kind) = first.strip_prefix('`').and_then(|r| r.split('`').next()) {
            kinds.push(kind.to_string());
        }
    }
    kinds
}

#[test]
fn the_docs_policy_tables_list_exactly_the_registered_kinds() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/scenario.md")).unwrap();
    let families: [(&str, &[&str]); 4] = [
        ("### `cluster.router` (`kind = ...`)", RouterSpec::KINDS),
        ("### `[scheduler.batching]` (`kind = ...`)", BatchingSpec::KINDS),
        ("### `[scheduler.queue]` (`kind = ...`)", QueueSpec::KINDS),
        ("### `[scheduler.preemption]` (`kind = ...`)", PreemptionSpec::KINDS),
    ];
    for (heading, registered) in families {
        let mut documented = table_kinds(&doc, heading);
        let mut registered: Vec<String> = registered.iter().map(|k| k.to_string()).collect();
        documented.sort();
        registered.sort();
        assert_eq!(
            documented, registered,
            "docs/scenario.md {heading}: its table's kinds (left) against the registry's"
        );
    }
}

#[test]
fn the_table_reader_finds_the_first_column_and_stops_at_the_next_heading() {
    let doc = "### A\n\ntext\n\n| kind | keys |\n|---|---|\n| `x` (default) | — |\n| `y` | `k` |\n\nafter\n| `z` | |\n### B\n";
    assert_eq!(table_kinds(doc, "### A"), ["x", "y"]);
}
