//! Every distribution parameter of a workload at the bounds its validation accepts, and just
//! beyond them: accepted values build their samplers (no constructor is `expect`ed) and draw
//! finite, ordered arrivals and lengths within their clamps over many seeds; refused values
//! are errors naming the key, never a panic.

use super::*;

/// `workload` text with one distribution set; the rest at plain values.
fn spec(arrival: &str, prompt: &str) -> Result<WorkloadSpec, String> {
    let text = format!(
        "requests = 300\narrival = {arrival}\nprompt_tokens = {prompt}\noutput_tokens = {{ kind = \"fixed\", value = 3 }}\n"
    );
    let w: WorkloadSpec = toml::from_str(&text).map_err(|e| e.to_string())?;
    w.validate("workload").map_err(|e| e.to_string())?;
    Ok(w)
}

/// Draws a whole workload (closed-loop clients answered at once) and checks every request.
fn draw(w: &WorkloadSpec, seed: u64, what: &str) {
    let mut wl = Workload::new(w.clone(), seed);
    let mut reqs = wl.initial();
    let closed = matches!(w.arrival, Some(ArrivalSpec::ClosedLoop(_)));
    let mut last = SimTime::ZERO;
    for i in 0..400 {
        let Some(r) = reqs.pop() else { break };
        assert!(r.prompt_tokens >= 1 && r.output_tokens == 3, "{what}, seed {seed}: {r:?}");
        if !closed {
            assert!(r.arrival >= last, "{what}, seed {seed}: arrival {:?} before {:?}", r.arrival, last);
        }
        last = r.arrival;
        let next = if closed { wl.next_for_client(r.client, r.arrival) } else { wl.next_open() };
        reqs.extend(next);
        assert!(i < 399 || reqs.is_empty(), "{what}: more requests than asked");
    }
}

const PLAIN_ARRIVAL: &str = "{ kind = \"poisson\", rate = 5 }";
const PLAIN_LENGTH: &str = "{ kind = \"fixed\", value = 100 }";

#[test]
fn every_distribution_parameter_draws_at_its_bounds_and_is_refused_beyond_them() {
    let max = f64::MAX;
    let accepted_arrivals = [
        "{ kind = \"poisson\", rate = 1e-12 }".to_string(),
        "{ kind = \"poisson\", rate = 1e9 }".into(),
        "{ kind = \"constant\", rate = 1e-12 }".into(),
        "{ kind = \"constant\", rate = 1e9 }".into(),
        "{ kind = \"gamma\", rate = 1e-12, cv = 0.001 }".into(),
        "{ kind = \"gamma\", rate = 1e-12, cv = 100 }".into(),
        "{ kind = \"gamma\", rate = 1e9, cv = 0.001 }".into(),
        "{ kind = \"gamma\", rate = 1e9, cv = 100 }".into(),
        "{ kind = \"phases\", phases = [{ duration_s = 1e-300, rate = 0, cv = 100 }, { duration_s = 1e300, rate = 1e9, cv = 0.001 }] }".into(),
        "{ kind = \"diurnal\", peak_rate = 1e9, trough_rate = 0, period_s = 1, peak_at_s = 1e9 }".into(),
        "{ kind = \"diurnal\", peak_rate = 1e-12, trough_rate = 1e-12, period_s = 1e9, peak_at_s = 0 }".into(),
        "{ kind = \"curve\", points = [[0, 0], [1e9, 1e9]] }".into(),
        "{ kind = \"closed-loop\", clients = 1, think_time_s = 0 }".into(),
        format!("{{ kind = \"closed-loop\", clients = 64, think_time_s = {max:e}, ramp_s = 999999999 }}"),
        format!("{{ kind = \"closed-loop\", clients = 3, think_time_s = {max:e}, think = \"fixed\" }}"),
    ];
    let accepted_lengths = [
        "{ kind = \"fixed\", value = 1 }".to_string(),
        "{ kind = \"fixed\", value = 9223372036854775807 }".into(),
        "{ kind = \"uniform\", min = 1, max = 9223372036854775807 }".into(),
        "{ kind = \"normal\", mean = 5e-324, std = 0 }".into(),
        format!("{{ kind = \"normal\", mean = {max:e}, std = {max:e} }}"),
        format!("{{ kind = \"normal\", mean = 1, std = {max:e}, min = 9223372036854775807, max = 9223372036854775807 }}"),
        format!("{{ kind = \"lognormal\", median = 1, p99 = {max:e} }}"),
        format!("{{ kind = \"lognormal\", median = {max:e}, p99 = {max:e} }}"),
        "{ kind = \"lognormal\", mu = -49.999, sigma = 0 }".into(),
        "{ kind = \"lognormal\", mu = 49.999, sigma = 10 }".into(),
        format!(
            "{{ kind = \"mixture\", components = [{{ weight = 5e-324, kind = \"fixed\", value = 1 }}, \
             {{ weight = {max:e}, kind = \"uniform\", min = 1, max = 9 }}, {{ weight = {max:e}, kind = \"fixed\", value = 7 }}] }}"
        ),
    ];
    for a in &accepted_arrivals {
        let w = spec(a, PLAIN_LENGTH).unwrap_or_else(|e| panic!("{a}: refused: {e}"));
        for seed in 0..25 {
            draw(&w, seed, a);
        }
    }
    for l in &accepted_lengths {
        let w = spec(PLAIN_ARRIVAL, l).unwrap_or_else(|e| panic!("{l}: refused: {e}"));
        for seed in 0..25 {
            draw(&w, seed, l);
        }
    }
    // Just beyond each bound: an error naming the key.
    let refused = [
        ("{ kind = \"poisson\", rate = 9.9e-13 }", PLAIN_LENGTH, "workload.arrival.rate"),
        ("{ kind = \"poisson\", rate = 1.1e9 }", PLAIN_LENGTH, "workload.arrival.rate"),
        ("{ kind = \"gamma\", rate = 1, cv = 0.00099 }", PLAIN_LENGTH, "workload.arrival.cv"),
        ("{ kind = \"gamma\", rate = 1, cv = 100.1 }", PLAIN_LENGTH, "workload.arrival.cv"),
        (
            "{ kind = \"diurnal\", peak_rate = 1, trough_rate = 0, period_s = 0.99 }",
            PLAIN_LENGTH,
            "workload.arrival.period_s",
        ),
        (
            "{ kind = \"closed-loop\", clients = 1, think_time_s = -1e-300 }",
            PLAIN_LENGTH,
            "workload.arrival.think_time_s",
        ),
        (PLAIN_ARRIVAL, "{ kind = \"fixed\", value = 0 }", "workload.prompt_tokens.value"),
        (PLAIN_ARRIVAL, "{ kind = \"normal\", mean = 0, std = 1 }", "workload.prompt_tokens.mean"),
        (PLAIN_ARRIVAL, "{ kind = \"normal\", mean = 1, std = -5e-324 }", "workload.prompt_tokens.std"),
        (PLAIN_ARRIVAL, "{ kind = \"lognormal\", median = 0.99, p99 = 2 }", "workload.prompt_tokens.median"),
        (PLAIN_ARRIVAL, "{ kind = \"lognormal\", mu = 50, sigma = 1 }", "workload.prompt_tokens.mu"),
        (PLAIN_ARRIVAL, "{ kind = \"lognormal\", mu = 1, sigma = 10.01 }", "workload.prompt_tokens.sigma"),
        (PLAIN_ARRIVAL, "{ kind = \"mixture\", components = [{ weight = 0, kind = \"fixed\", value = 1 }] }", "weight"),
    ];
    for (a, l, key) in refused {
        match spec(a, l) {
            Ok(_) => panic!("{a} / {l}: accepted"),
            Err(e) => assert!(e.contains(key), "{a} / {l}: {e}"),
        }
    }
}
