use super::*;
use crate::workload::{Request, Workload, WorkloadSpec};

fn spec(format: TraceFormat, text: &str) -> TraceSpec {
    let mut s = TraceSpec::plain(format, "t");
    s.source = Some(TraceSource::from_bytes("t", text.as_bytes().to_vec()));
    s
}

fn replay(s: &TraceSpec, seed: u64) -> Result<Vec<Request>, TraceError> {
    TraceReplay::new(s, seed)?.collect()
}

fn err(s: &TraceSpec) -> String {
    replay(s, 0).unwrap_err().to_string()
}

const AZURE: &str = "TIMESTAMP,ContextTokens,GeneratedTokens\n\
2023-11-16 18:15:46.6805900,374,44\n\
2023-11-16 18:15:50.9951690,396,109\n\
2023-11-16 18:15:51.0000000,1000,5\n";

#[test]
fn azure_rows_become_requests_at_their_offsets() {
    let r = replay(&spec(TraceFormat::Azure, AZURE), 0).unwrap();
    assert_eq!(r.len(), 3);
    assert_eq!(r.iter().map(|r| r.arrival.0).collect::<Vec<_>>(), vec![0, 4_314_579_000, 4_319_410_000]);
    assert_eq!((r[1].prompt_tokens, r[1].output_tokens), (396, 109));
    assert!(r[0].content.is_empty());
}

#[test]
fn mooncake_hash_ids_become_512_token_segments() {
    let text = "{\"timestamp\": 0, \"input_length\": 1100, \"output_length\": 5, \"hash_ids\": [0, 1, 2]}\n\
                {\"timestamp\": 1500, \"input_length\": 600, \"output_length\": 7, \"hash_ids\": [0, 3]}\n";
    let r = replay(&spec(TraceFormat::Mooncake, text), 0).unwrap();
    assert_eq!(r[1].arrival.0, 1_500_000_000);
    let toks: Vec<u32> = r[0].content.iter().map(|s| s.tokens).collect();
    assert_eq!(toks, vec![512, 512, 76]);
    assert_eq!(r[0].content[0].hash, r[1].content[0].hash);
    assert_ne!(r[0].content[1].hash, r[1].content[1].hash);
    assert_eq!(r[1].content[1].tokens, 88);
}

#[test]
fn generic_csv_maps_columns() {
    let text = "t,in,out,conv,prio,sys,sys_len\n0.5,100,10,a,1,p1,40\n1.25,200,20,a,0,,\n2,300,30,b,2,p1,40\n";
    let mut s = spec(TraceFormat::Csv, text);
    s.columns = Some(Columns {
        arrival: Some("t".into()),
        prompt_tokens: Some("in".into()),
        output_tokens: Some("out".into()),
        session: Some("conv".into()),
        class: Some("prio".into()),
        prefix: Some("sys".into()),
        prefix_tokens: Some("sys_len".into()),
        ..Columns::default()
    });
    let r = replay(&s, 0).unwrap();
    assert_eq!(r.iter().map(|r| r.arrival.0).collect::<Vec<_>>(), vec![0, 750_000_000, 1_500_000_000]);
    assert_eq!(r[0].session, r[1].session);
    assert_ne!(r[0].session, r[2].session);
    assert_eq!(r.iter().map(|r| r.class).collect::<Vec<_>>(), vec![1, 0, 2]);
    assert_eq!(r[0].content, r[2].content);
    assert_eq!(r[0].content[0].tokens, 40);
    assert!(r[1].content.is_empty());
}

#[test]
fn generic_jsonl_defaults_and_units() {
    let text = "{\"arrival_s\": 10, \"prompt_tokens\": 5, \"output_tokens\": 6, \"session\": 42}\n\n\
                {\"arrival_s\": \"10.000000001\", \"prompt_tokens\": 7, \"output_tokens\": 8}\n";
    let r = replay(&spec(TraceFormat::Jsonl, text), 0).unwrap();
    assert_eq!(r[1].arrival.0, 1);
    assert_eq!(r[0].session, hash_text("42").min(crate::workload::NO_SESSION - 1));
    assert_eq!(r[1].session, crate::workload::NO_SESSION);
    let mut s = spec(TraceFormat::Jsonl, "{\"t\": 1000, \"prompt_tokens\": 5, \"output_tokens\": 6}\n{\"t\": 3000, \"prompt_tokens\": 5, \"output_tokens\": 6}\n");
    s.columns = Some(Columns { arrival: Some("t".into()), ..Columns::default() });
    s.arrival_unit = Some(TimeUnit::Us);
    assert_eq!(replay(&s, 0).unwrap()[1].arrival.0, 2_000_000);
}

#[test]
fn errors_name_file_line_and_field() {
    let bad = AZURE.replace(",396,", ",12a,");
    assert_eq!(err(&spec(TraceFormat::Azure, &bad)), "t:3: ContextTokens: \"12a\" is not a number");
    let bad = AZURE.replace(",109", ",-4");
    assert_eq!(err(&spec(TraceFormat::Azure, &bad)), "t:3: GeneratedTokens: -4 is negative: a token count must be ≥ 0");
    let bad = AZURE.replace("GeneratedTokens", "Generated");
    assert_eq!(
        err(&spec(TraceFormat::Azure, &bad)),
        "t:1: missing column \"GeneratedTokens\" (the header has: TIMESTAMP, ContextTokens, Generated)"
    );
    let bad = AZURE.replace("18:15:51", "18:15:41");
    assert!(err(&spec(TraceFormat::Azure, &bad))
        .starts_with("t:4: TIMESTAMP: 9.995169 s earlier than line 3: timestamps go backwards"));
    assert_eq!(err(&spec(TraceFormat::Azure, "")), "t: empty file: no header line");
    assert_eq!(
        err(&spec(TraceFormat::Azure, "TIMESTAMP,ContextTokens,GeneratedTokens\n")),
        "t: no requests: the file has no records"
    );
    assert_eq!(err(&spec(TraceFormat::Mooncake, "")), "t: no requests: the file has no records");
    let bad = AZURE.replace(",5\n", ",5,9\n");
    assert_eq!(err(&spec(TraceFormat::Azure, &bad)), "t:4: 4 fields where the header has 3");
    assert_eq!(
        err(&spec(
            TraceFormat::Mooncake,
            "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1}\n{\"timestamp\": 1}\n"
        )),
        "t:2: input_length: missing"
    );
    assert!(err(&spec(TraceFormat::Mooncake, "{\"timestamp\": 0,\n")).starts_with("t:1: not a JSON object (column "));
    assert_eq!(
        err(&spec(
            TraceFormat::Mooncake,
            "{\"timestamp\": 0, \"input_length\": 100, \"output_length\": 1, \"hash_ids\": [1, 2]}\n"
        )),
        "t:1: hash_ids: 2 blocks of 512 tokens need more than the request's 100 prompt tokens"
    );
    let zero = AZURE.replace(",44", ",0");
    assert_eq!(
        err(&spec(TraceFormat::Azure, &zero)),
        "t:2: GeneratedTokens: 0 tokens: a request needs at least one output token (set min_output_tokens = 1 to raise it)"
    );
    let mut raised = spec(TraceFormat::Azure, &zero);
    raised.min_output_tokens = Some(1);
    assert_eq!(replay(&raised, 0).unwrap()[0].output_tokens, 1);
}

#[test]
fn sorting_restores_order_within_the_window_and_fails_beyond_it() {
    let text = "arrival_s,prompt_tokens,output_tokens\n0,1,1\n3,3,1\n4,4,1\n1,1,1\n2,2,1\n";
    let mut s = spec(TraceFormat::Csv, text);
    assert!(err(&s).starts_with("t:5: arrival_s: 3 s earlier than line 4"), "{}", err(&s));
    s.unsorted = Unsorted::Sort;
    let r = replay(&s, 0).unwrap();
    assert_eq!(r.iter().map(|r| r.arrival.0 / 1_000_000_000).collect::<Vec<_>>(), vec![0, 1, 2, 3, 4]);
    let sc = scan(&s).unwrap();
    assert_eq!((sc.requests, sc.reordered), (5, 2));
    s.reorder_window = 1;
    assert!(err(&s).contains("out of order by more than reorder_window = 1 requests"), "{}", err(&s));
}

#[test]
fn window_speedup_target_rate_sample_and_clamps() {
    // 101 requests, one per second, prompts 1..=101.
    let mut text = String::from("arrival_s,prompt_tokens,output_tokens,hash_ids\n");
    for i in 0..=100 {
        text += &format!("{},{},{},\"{} {}\"\n", 1000 + i, 600 + i, 1 + i, 2 * i, 2 * i + 1);
    }
    let base = spec(TraceFormat::Csv, &text);
    let mut s = base.clone();
    s.window_s = Some([10.0, 20.0]);
    s.speedup = Some(2.0);
    let r = replay(&s, 0).unwrap();
    assert_eq!(r.len(), 10);
    assert_eq!(r[0].prompt_tokens, 610);
    assert_eq!(r[9].arrival.0, 4_500_000_000, "9 s of trace at 2× speed");

    let mut s = base.clone();
    s.target_rate = Some(5.0);
    let r = replay(&s, 0).unwrap();
    // 101 requests over 100 s is 1.01 req/s; at 5 req/s the 100 s take 100 × 1.01 / 5 s.
    assert_eq!(r[100].arrival, crate::SimTime::from_secs_f64(100.0 * 1.01 / 5.0));

    let mut s = base.clone();
    s.sample = Some(0.5);
    let a = replay(&s, 7).unwrap();
    let b = replay(&s, 7).unwrap();
    let c = replay(&s, 8).unwrap();
    assert_eq!(a, b, "sampling is seeded");
    assert_ne!(a, c);
    assert!((30..=70).contains(&a.len()), "{}", a.len());

    let mut s = base;
    s.max_prompt_tokens = Some(650);
    s.min_output_tokens = Some(50);
    let r = replay(&s, 0).unwrap();
    assert_eq!(r[100].prompt_tokens, 650);
    assert_eq!(r[10].content.len(), 2);
    assert_eq!(r[100].content.len(), 1, "the second 512-token block no longer fits whole");
    assert_eq!(r[0].output_tokens, 50);
    assert_eq!(r[60].output_tokens, 61);
}

#[test]
fn a_workload_replays_through_the_engine_interface() {
    let s = spec(TraceFormat::Azure, AZURE);
    let w = WorkloadSpec {
        duration_s: Some(4.315),
        requests: None,
        arrival: None,
        prompt_tokens: None,
        output_tokens: None,
        trace: Some(s),
        prefix: None,
        class_weights: None,
    };
    let mut wl = Workload::new(w, 0);
    let mut got: Vec<Request> = wl.initial();
    while let Some(r) = wl.next_open() {
        got.push(r);
    }
    assert_eq!(got.iter().map(|r| r.id).collect::<Vec<_>>(), vec![0, 1], "duration_s cuts the replay");
    assert!(wl.error().is_none());
}
