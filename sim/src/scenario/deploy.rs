//! What a team deploys for a sized configuration: each server's launch command and replica
//! count, the router in front of them, and a Kubernetes manifest of it all.
//!
//! ```text
//!   Scenario (the candidate) + instance count(s) ──of()──► Deployment
//!        servers: [LaunchCommand × replicas, GPUs each]   (one per pool when disaggregated)
//!        router:  the engine ecosystem's router with the simulated policy's equivalent, or
//!                 the Service alone, with why
//!   Deployment ──manifest()──► Deployment + Service per server, router Deployment + RBAC
//! ```
//! Routers: SGLang's `sglang_router.launch_router` (`--policy` random | round_robin |
//! cache_aware | power_of_two; Kubernetes discovery by `--service-discovery --selector`:
//! sgl-project/sglang `sgl-router/py_src/sglang_router/router_args.py` at e46dcd87), vLLM's
//! production-stack router (`--routing-logic` roundrobin | session; `--service-discovery k8s
//! --k8s-label-selector`: vllm-project/production-stack `src/vllm_router/parsers/parser.py`).
//! A simulated router with no equivalent there is deployed as the Service alone, and said so.

use serde::{Deserialize, Serialize};

use super::launch::LaunchCommand;
use super::{Scenario, ServingEngine};
use crate::instance::Role;

/// One kind of server: its launch command, how many replicas, and the GPUs of each.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Server {
    /// `prefill` or `decode` in a disaggregated deployment; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    pub replicas: u32,
    pub gpus_per_replica: u64,
    pub command: LaunchCommand,
}

/// The router in front of the replicas.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RouterDeploy {
    /// The router servesim simulated (`cluster.router` kind).
    pub simulated: String,
    /// The engine ecosystem's router set to the same policy, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<LaunchCommand>,
    /// What runs in front of the replicas, in words.
    pub note: String,
    /// NVIDIA Dynamo's frontend set to the same policy, where its router has it (an
    /// alternative to the engine's router, for an aggregated deployment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamo: Option<LaunchCommand>,
    /// llm-d's inference scheduler set to the same policy, where its plugins have it (an
    /// alternative to the engine's router, for an aggregated deployment on Kubernetes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_d: Option<LlmD>,
}

/// llm-d's endpoint picker (llm-d/llm-d-inference-scheduler) configured as the simulated router.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LlmD {
    /// The EndpointPickerConfig's plugins, in its one scheduling profile.
    pub plugins: Vec<String>,
    /// The EndpointPickerConfig (YAML).
    pub config: String,
    /// What differs from the simulated router, in words.
    pub note: String,
}

/// What to deploy for a sized configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Deployment {
    /// The name its Kubernetes objects take (the scenario's, as a DNS label).
    pub name: String,
    pub engine: String,
    pub servers: Vec<Server>,
    pub router: RouterDeploy,
    /// Why no Kubernetes manifest is written for it, when none is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_manifest: Option<String>,
}

/// The engine's port: vLLM's and `trtllm-serve`'s default 8000, SGLang's 30000.
fn port(engine: ServingEngine) -> u16 {
    match engine {
        ServingEngine::Sglang => 30000,
        _ => 8000,
    }
}

/// What a group's launch command cannot carry of TensorRT-LLM's scheduling it was simulated
/// with: `trtllm-serve` reads the attention-DP balancing (`cluster.attention_dp_config`, with DP
/// ranks) and the batch waiting (`scheduler.batch_wait`, without) from its YAML options file only,
/// and the other engines have neither.
fn trtllm_notes(s: &Scenario, g: &crate::instance::InstanceGroup, engine: ServingEngine) -> Vec<String> {
    let mut yaml = Vec::new();
    let c = s.attention_dp;
    if c.enable_balance && g.layout.dp_attention > 1 {
        yaml.push(format!(
            "attention_dp_config: {{enable_balance: true, timeout_iters: {}, batching_wait_iters: {}}}",
            c.timeout_iters, c.batching_wait_iters
        ));
    }
    let w = g.scheduler.batch_wait;
    if w.is_on() && g.layout.dp_attention <= 1 {
        yaml.push(format!(
            "batch_wait_timeout_iters: {}, batch_wait_max_tokens_ratio: {}",
            w.timeout_iters, w.max_tokens_ratio
        ));
    }
    yaml.into_iter()
        .map(|y| match engine {
            ServingEngine::Trtllm => format!("{y} in the --extra_llm_api_options file, as simulated"),
            _ => format!("simulated with TensorRT-LLM's {y}, which {} does not have", engine.name()),
        })
        .collect()
}

impl Deployment {
    /// The deployment of `s` (a candidate's scenario) with `counts[i]` instances of its group
    /// `i`; `engine` at the scenario's top level, vLLM when it names none.
    pub fn of(s: &Scenario, counts: &[u32]) -> Deployment {
        let engine = s.resolved.engine.unwrap_or(ServingEngine::Vllm);
        let servers: Vec<Server> =
            s.groups
                .iter()
                .zip(counts)
                .map(|(g, &n)| {
                    let mut cmd = LaunchCommand::of(engine, g, &g.scheduler.kv_cache.model(&s.model));
                    cmd.notes.extend(trtllm_notes(s, g, engine));
                    let role = (g.role != Role::Mixed).then(|| g.role.as_str());
                    let cmd = match (role, engine) {
                        (None, _) => cmd,
                        (Some(r), ServingEngine::Sglang) => cmd.with(&["--disaggregation-mode", r]),
                        (Some(_), _) => cmd
                            .with(&["--kv-transfer-config", r#"{"kv_connector":"NixlConnector","kv_role":"kv_both"}"#]),
                    };
                    Server { role: role.map(str::to_string), replicas: n, gpus_per_replica: g.gpus(), command: cmd }
                })
                .collect();
        let disaggregated = servers.iter().any(|v| v.role.is_some());
        let name = dns_label(&s.name);
        let mut router = router(engine, s.router.kind(), &name, disaggregated);
        router.dynamo = dynamo(s.router.kind(), disaggregated);
        router.llm_d = llm_d(s.router.kind(), disaggregated);
        let node = s.groups.iter().map(|g| g.gpu.gpus_per_node()).min().unwrap_or(8);
        let no_manifest = if let Some(v) = servers.iter().find(|v| v.gpus_per_replica > node) {
            Some(format!(
                "an instance holds {} GPUs, more than one node's {node}: a Deployment's pod cannot span nodes \
                 (a LeaderWorkerSet can; servesim does not write one)",
                v.gpus_per_replica
            ))
        } else if disaggregated && engine != ServingEngine::Sglang {
            Some(format!(
                "a disaggregated {} deployment needs a prefill/decode proxy that servesim does not write; the \
                 launch commands above are each pool's",
                engine.name()
            ))
        } else {
            None
        };
        Deployment { name, engine: engine.name().to_string(), servers, router, no_manifest }
    }

    /// The replicas' and router's launch lines, for a terminal: "N × command" per server.
    pub fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .servers
            .iter()
            .map(|v| {
                let role = v.role.as_deref().map_or(String::new(), |r| format!("{r}: "));
                let gpus = match v.gpus_per_replica {
                    1 => "1 GPU".to_string(),
                    n => format!("{n} GPUs"),
                };
                format!("{role}{} × {} ({gpus} each)", v.replicas, v.command.line())
            })
            .collect();
        out.push(match &self.router.command {
            Some(c) => format!("router: {}", c.line()),
            None => format!("router: {}", self.router.note),
        });
        if let Some(d) = &self.router.dynamo {
            out.push(format!("or with NVIDIA Dynamo: {}", d.line()));
        }
        if let Some(l) = &self.router.llm_d {
            out.push(format!(
                "or with llm-d's inference scheduler: its endpoint picker with {}",
                l.plugins.join(" + ")
            ));
        }
        out
    }
}

/// llm-d's endpoint picker with the simulated router's policy, where its plugins have it
/// (llm-d/llm-d-inference-scheduler at 520af478, `pkg/epp/framework/plugins/scheduling/`):
/// `random-picker` picks uniformly, ignoring scores; `active-request-scorer` (defaults:
/// `idleThreshold` 0, `maxBusyScore` 1) scores a pod with no request in flight 1 and a busy one
/// (max − count) / max over the requests the picker has in flight, so `max-score-picker` takes
/// the pod with the fewest. Its KV-utilization and queue scorers read the pods' scraped
/// metrics (blocks in use, waiting requests), not the simulated least-kv-usage's committed
/// blocks, so no configuration is offered for those.
fn llm_d(kind: &str, disaggregated: bool) -> Option<LlmD> {
    let (plugins, note): (&[&str], &str) = match kind {
        "random" => (&["random-picker"], "uniform at random, as simulated"),
        "least-outstanding" => (
            &["active-request-scorer", "max-score-picker"],
            "the fewest requests in flight; ties broken at random, where servesim takes the next instance in turn",
        ),
        _ => return None,
    };
    let plugins: Vec<String> = plugins.iter().map(|p| p.to_string()).collect();
    (!disaggregated).then(|| LlmD {
        config: manifest::endpoint_picker_config(&plugins),
        plugins,
        note: note.to_string(),
    })
}

/// NVIDIA Dynamo's frontend with the simulated router's policy, where its `--router-mode` has it:
/// `round-robin` (its default) or `random` (docs.nvidia.com/dynamo, Router Guide: "Frontend +
/// Round-Robin", "Frontend + Random"; on Kubernetes `DYN_ROUTER_MODE` on the Frontend). Its
/// `kv` mode weighs each worker's cached prefix, which no simulated router does.
fn dynamo(kind: &str, disaggregated: bool) -> Option<LaunchCommand> {
    let mode = match kind {
        "round-robin" => "round-robin",
        "random" => "random",
        _ => return None,
    };
    (!disaggregated).then(|| LaunchCommand {
        program: ["python3", "-m", "dynamo.frontend"].map(String::from).to_vec(),
        args: ["--router-mode", mode, "--http-port", "8000"].map(String::from).to_vec(),
        notes: vec![format!(
            "Dynamo's workers register with its frontend (on Kubernetes set DYN_ROUTER_MODE={mode} on the Frontend)"
        )],
    })
}

/// The engine ecosystem's router for simulated router `kind` (see the module docs).
fn router(engine: ServingEngine, kind: &str, name: &str, disaggregated: bool) -> RouterDeploy {
    let simulated = kind.to_string();
    let (program, policy): (&[&str], Option<&str>) = match engine {
        ServingEngine::Sglang => (
            &["python3", "-m", "sglang_router.launch_router"],
            match kind {
                "round-robin" => Some("round_robin"),
                "random" => Some("random"),
                "power-of-two" => Some("power_of_two"),
                _ => None,
            },
        ),
        ServingEngine::Vllm => (
            &["vllm-router"],
            match kind {
                "round-robin" => Some("roundrobin"),
                "session-affinity" => Some("session"),
                _ => None,
            },
        ),
        ServingEngine::Trtllm => (&[], None),
    };
    let words = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let policy = match policy {
        Some(p) if !disaggregated || engine == ServingEngine::Sglang => p,
        _ => {
            let router_name = match engine {
                ServingEngine::Sglang => "SGLang's router (random, round_robin, cache_aware, power_of_two)",
                ServingEngine::Vllm => "vLLM's production-stack router (roundrobin, session)",
                ServingEngine::Trtllm => "TensorRT-LLM (no router of its own)",
            };
            return RouterDeploy {
                simulated: simulated.clone(),
                command: None,
                note: format!(
                    "the Service alone (kube-proxy spreads connections at random): the simulated router \
                     {simulated} has no equivalent in {router_name}; `servesim compare --vary cluster.router=random` \
                     shows what that changes"
                ),
                dynamo: None,
                llm_d: None,
            };
        }
    };
    let args = router_args(engine, policy, name, disaggregated);
    let notes = if policy == "session" {
        vec!["clients name their session in the x-session-id header".to_string()]
    } else {
        vec![]
    };
    RouterDeploy {
        simulated,
        command: Some(LaunchCommand { program: words(program), args, notes }),
        note: format!("the engine's router, policy {policy}"),
        dynamo: None,
        llm_d: None,
    }
}

/// The arguments of the engine's router set to `policy`, discovering the pods of deployment
/// `name` (each pool's, when `disaggregated`) in its own namespace.
fn router_args(engine: ServingEngine, policy: &str, name: &str, disaggregated: bool) -> Vec<String> {
    let words = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    match engine {
        ServingEngine::Sglang => {
            let mut a = words(&["--host", "0.0.0.0", "--port", "30000", "--policy", policy, "--service-discovery"]);
            a.extend(if disaggregated {
                let (p, d) = (format!("app={name}-prefill"), format!("app={name}-decode"));
                words(&["--pd-disaggregation", "--prefill-selector", &p, "--decode-selector", &d])
            } else {
                words(&["--selector", &format!("app={name}")])
            });
            a.extend(words(&[
                "--service-discovery-port",
                "30000",
                "--service-discovery-namespace",
                "$(POD_NAMESPACE)",
            ]));
            a
        }
        _ => {
            let mut a = words(&[
                "--host",
                "0.0.0.0",
                "--port",
                "8000",
                "--service-discovery",
                "k8s",
                "--k8s-namespace",
                "$(POD_NAMESPACE)",
                "--k8s-label-selector",
                &format!("app={name}"),
                "--k8s-port",
                "8000",
                "--routing-logic",
                policy,
            ]);
            if policy == "session" {
                a.extend(words(&["--session-key", "x-session-id"]));
            }
            a
        }
    }
}

/// `name` as a Kubernetes object name (an RFC 1123 label, leaving room for a `-prefill`
/// suffix): lowercase letters, digits and `-`, at most 50 characters; "servesim" when nothing
/// is left.
pub(crate) fn dns_label(name: &str) -> String {
    let mapped: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    let mut out = String::new();
    for part in mapped.split('-').filter(|p| !p.is_empty()) {
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(part);
    }
    out.truncate(50);
    let out = out.trim_end_matches('-').to_string();
    if out.is_empty() {
        "servesim".to_string()
    } else {
        out
    }
}

#[path = "manifest.rs"]
mod manifest;

#[cfg(test)]
#[path = "deploy_tests.rs"]
pub(super) mod tests;
