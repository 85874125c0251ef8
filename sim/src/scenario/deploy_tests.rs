use yaml_rust2::{Yaml, YamlLoader};

use super::*;

/// llama-3-70b on H100s at TP `tp` under `engine` and `router`, 96 sequences and 4,096 tokens
/// per step; `model_extra`: more keys of `[model]` (also the launch command tests').
pub(crate) fn scenario(engine: &str, router: &str, tp: u32, model_extra: &str) -> Scenario {
    let src = format!(
        r#"name = "Peak_Chat.EU"
engine = "{engine}"
[model]
preset = "llama-3-70b"
{model_extra}
[gpu]
preset = "h100-sxm"
[cluster]
instances = 1
tp = {tp}
router = {{ kind = "{router}" }}
[scheduler]
max_num_seqs = 96
max_num_batched_tokens = 4096
[workload]
duration_s = 10
arrival = {{ kind = "poisson", rate = 2 }}
prompt_tokens = {{ kind = "fixed", value = 100 }}
output_tokens = {{ kind = "fixed", value = 10 }}
"#
    );
    Scenario::from_toml(&src, "t").unwrap()
}

fn docs(m: &str) -> Vec<Yaml> {
    YamlLoader::load_from_str(m).unwrap_or_else(|e| panic!("{e}\n{m}")).into_iter().filter(|d| !d.is_null()).collect()
}

fn strings(y: &Yaml) -> Vec<String> {
    y.as_vec().unwrap().iter().map(|w| w.as_str().unwrap().to_string()).collect()
}

fn find<'a>(docs: &'a [Yaml], kind: &str, name: &str) -> &'a Yaml {
    docs.iter()
        .find(|d| d["kind"].as_str() == Some(kind) && d["metadata"]["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

#[test]
fn a_vllm_manifest_parses_back_to_the_deployment() {
    let s = scenario("vllm", "round-robin", 4, "");
    let d = Deployment::of(&s, &[5]);
    assert_eq!(d.name, "peak-chat-eu");
    let m = d.manifest("written by a test").unwrap();
    let docs = docs(&m);
    // The engine: 5 replicas of the launch command, 4 GPUs each, its Service selecting its pods.
    let dep = find(&docs, "Deployment", "peak-chat-eu");
    assert_eq!(dep["spec"]["replicas"].as_i64(), Some(5));
    assert_eq!(dep["spec"]["selector"]["matchLabels"]["app"].as_str(), Some("peak-chat-eu"));
    let pod = &dep["spec"]["template"];
    assert_eq!(pod["metadata"]["labels"]["app"].as_str(), Some("peak-chat-eu"));
    let c = &pod["spec"]["containers"][0];
    assert_eq!(c["image"].as_str(), Some("vllm/vllm-openai:latest"));
    assert_eq!(strings(&c["command"]), ["vllm", "serve"]);
    let mut args = d.servers[0].command.args.clone();
    args.extend(["--host", "0.0.0.0", "--port", "8000"].map(String::from));
    assert_eq!(strings(&c["args"]), args);
    assert_eq!(c["resources"]["limits"]["nvidia.com/gpu"].as_i64(), Some(4));
    let svc = find(&docs, "Service", "peak-chat-eu");
    assert_eq!(svc["spec"]["selector"]["app"].as_str(), Some("peak-chat-eu"));
    assert_eq!(svc["spec"]["ports"][0]["port"].as_i64(), Some(8000));
    // The router: production-stack's, round-robin, discovering the engine's pods by label.
    let r = &find(&docs, "Deployment", "peak-chat-eu-router")["spec"]["template"]["spec"];
    assert_eq!(r["serviceAccountName"].as_str(), Some("peak-chat-eu-router"));
    let ra = strings(&r["containers"][0]["args"]);
    let after = |f: &str| ra[ra.iter().position(|a| a == f).unwrap() + 1].clone();
    assert_eq!(after("--routing-logic"), "roundrobin");
    assert_eq!(after("--k8s-label-selector"), "app=peak-chat-eu");
    let role = find(&docs, "Role", "peak-chat-eu-router");
    assert_eq!(strings(&role["rules"][0]["verbs"]), ["get", "list", "watch"]);
    assert_eq!(
        find(&docs, "RoleBinding", "peak-chat-eu-router")["roleRef"]["name"].as_str(),
        Some("peak-chat-eu-router")
    );
    assert_eq!(docs.len(), 7);
}

#[test]
fn sglang_routers_and_routers_without_an_equivalent() {
    let s = scenario("sglang", "power-of-two", 2, "");
    let d = Deployment::of(&s, &[3]);
    let docs = docs(&d.manifest("t").unwrap());
    let c = &find(&docs, "Deployment", "peak-chat-eu")["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(strings(&c["command"]), ["python3", "-m", "sglang.launch_server"]);
    assert!(strings(&c["args"]).ends_with(&["--host", "0.0.0.0", "--port", "30000"].map(String::from)));
    let r = &find(&docs, "Deployment", "peak-chat-eu-router")["spec"]["template"]["spec"]["containers"][0];
    let ra = strings(&r["args"]);
    assert!(ra.windows(2).any(|w| w == ["--policy", "power_of_two"]), "{ra:?}");
    assert!(ra.windows(2).any(|w| w == ["--selector", "app=peak-chat-eu"]), "{ra:?}");
    // The namespace comes from the pod (Kubernetes expands $(POD_NAMESPACE) from env).
    assert_eq!(r["env"][0]["name"].as_str(), Some("POD_NAMESPACE"));
    // least-outstanding has no SGLang-router equivalent: the Service alone, and said so.
    let d = Deployment::of(&scenario("sglang", "least-outstanding", 2, ""), &[3]);
    assert!(d.router.command.is_none());
    assert!(d.router.note.contains("least-outstanding has no equivalent in SGLang's router"), "{}", d.router.note);
    let m = d.manifest("t").unwrap();
    assert!(m.contains("# Router: the Service alone"), "{m}");
    assert_eq!(docs_len(&m), 2);
}

fn docs_len(m: &str) -> usize {
    docs(m).len()
}

#[test]
fn an_instance_beyond_one_node_gets_no_manifest_and_is_told_why() {
    let s = scenario("vllm", "round-robin", 8, "");
    assert!(Deployment::of(&s, &[2]).manifest("t").is_some());
    let mut s = s;
    s.groups[0].layout.pp = 2;
    let d = Deployment::of(&s, &[2]);
    assert_eq!(d.servers[0].gpus_per_replica, 16);
    assert!(d.manifest("t").is_none());
    assert!(d.no_manifest.as_deref().unwrap().starts_with("an instance holds 16 GPUs, more than one node's 8"));
    assert!(d.servers[0].command.line().contains("--pipeline-parallel-size 2"));
}

#[test]
fn names_become_dns_labels() {
    assert_eq!(dns_label("Peak Chat (EU)"), "peak-chat-eu");
    assert_eq!(dns_label("--"), "servesim");
    assert_eq!(dns_label(&"a".repeat(80)).len(), 50);
    assert_eq!(dns_label(&format!("{}-b", "a".repeat(49))), "a".repeat(49));
}

#[test]
fn strings_that_look_like_yaml_stay_strings() {
    // A model name YAML would read as a number, a bool or a mapping is quoted.
    let mut s = scenario("vllm", "round-robin", 4, "");
    s.model.name = "1e3: yes # no".into();
    let d = Deployment::of(&s, &[1]);
    let docs = docs(&d.manifest("t").unwrap());
    let c = &find(&docs, "Deployment", "peak-chat-eu")["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(strings(&c["args"])[0], "1e3: yes # no");
}

#[test]
fn dynamos_frontend_is_offered_where_its_router_mode_is_the_simulated_policy() {
    // Round-robin and random are modes of Dynamo's router; the launch line says which.
    let d = Deployment::of(&scenario("vllm", "round-robin", 2, ""), &[3]);
    let dynamo = d.router.dynamo.as_ref().expect("round-robin is a Dynamo router mode");
    assert_eq!(dynamo.line(), "python3 -m dynamo.frontend --router-mode round-robin --http-port 8000");
    assert!(d
        .lines()
        .last()
        .unwrap()
        .starts_with("or with NVIDIA Dynamo: python3 -m dynamo.frontend --router-mode round-robin"));
    let d = Deployment::of(&scenario("sglang", "random", 2, ""), &[3]);
    assert!(d.router.dynamo.as_ref().unwrap().args.windows(2).any(|w| w == ["--router-mode", "random"]));
    // A policy Dynamo's router has no mode for: none offered.
    assert!(Deployment::of(&scenario("vllm", "least-outstanding", 2, ""), &[3]).router.dynamo.is_none());
}

#[test]
fn llm_ds_endpoint_picker_is_configured_where_its_plugins_are_the_simulated_policy() {
    // least-outstanding: llm-d's active-request-scorer (the fewest requests in flight) under
    // its max-score-picker, one scheduling profile naming both (llm-d-inference-scheduler
    // 520af478, plugins/scheduling/scorer/activerequest, picker/maxscore).
    let d = Deployment::of(&scenario("vllm", "least-outstanding", 2, ""), &[3]);
    let l = d.router.llm_d.as_ref().expect("least-outstanding is llm-d's active-request-scorer");
    assert_eq!(l.plugins, ["active-request-scorer", "max-score-picker"]);
    let epp = &docs(&l.config)[0];
    assert_eq!(epp["kind"].as_str(), Some("EndpointPickerConfig"));
    assert_eq!(epp["apiVersion"].as_str(), Some("inference.networking.x-k8s.io/v1alpha1"));
    let types: Vec<&str> = epp["plugins"].as_vec().unwrap().iter().map(|p| p["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["active-request-scorer", "max-score-picker"]);
    let profile = &epp["schedulingProfiles"][0];
    assert_eq!(profile["name"].as_str(), Some("default"));
    let refs: Vec<&str> =
        profile["plugins"].as_vec().unwrap().iter().map(|p| p["pluginRef"].as_str().unwrap()).collect();
    assert_eq!(refs, types);
    assert!(d.lines().last().unwrap().ends_with("its endpoint picker with active-request-scorer + max-score-picker"));
    // The Helm values select the manifest's engine pods on their port and carry the config.
    let values = &docs(&d.llm_d_values("a test").unwrap())[0];
    let pool = &values["inferencePool"];
    assert_eq!(pool["modelServers"]["matchLabels"]["app"].as_str(), Some("peak-chat-eu"));
    assert_eq!(pool["targetPorts"][0]["number"].as_i64(), Some(8000));
    assert_eq!(pool["modelServerType"].as_str(), Some("vllm"));
    let ext = &values["inferenceExtension"];
    let file = ext["pluginsConfigFile"].as_str().unwrap();
    assert_eq!(ext["pluginsCustomConfig"][file].as_str(), Some(l.config.as_str()));
    let manifest = docs(&d.manifest("t").unwrap());
    assert_eq!(
        find(&manifest, "Deployment", "peak-chat-eu")["spec"]["template"]["metadata"]["labels"]["app"].as_str(),
        Some("peak-chat-eu")
    );
    // random: its random-picker alone; SGLang's pods on SGLang's port.
    let d = Deployment::of(&scenario("sglang", "random", 2, ""), &[3]);
    assert_eq!(d.router.llm_d.as_ref().unwrap().plugins, ["random-picker"]);
    let values = &docs(&d.llm_d_values("a test").unwrap())[0];
    assert_eq!(
        (
            values["inferencePool"]["targetPorts"][0]["number"].as_i64(),
            values["inferencePool"]["modelServerType"].as_str()
        ),
        (Some(30000), Some("sglang"))
    );
    // Policies llm-d has no plugin for (round-robin) or reads another signal for (its KV
    // scorer reads scraped blocks in use): none offered, and no values.
    for kind in ["round-robin", "least-kv-usage", "power-of-two"] {
        let d = Deployment::of(&scenario("vllm", kind, 2, ""), &[3]);
        assert!(d.router.llm_d.is_none() && d.llm_d_values("t").is_none(), "{kind}");
    }
}
