//! A [`Deployment`] as a Kubernetes manifest (YAML): per server a Deployment of the engine's
//! official container and a Service; the router's Deployment, Service and the RBAC its pod
//! discovery needs.
//!
//! Assumptions, written into the manifest's head: the images' `latest` tags (pin the version you
//! validated), the namespace `default` in the router's RoleBinding, the router's image.

use super::{Deployment, ServingEngine};

/// A YAML value, written in block style; strings double-quoted (JSON's escapes are YAML's).
enum Y {
    S(String),
    N(u64),
    L(Vec<Y>),
    M(Vec<(&'static str, Y)>),
}

fn s(v: impl Into<String>) -> Y {
    Y::S(v.into())
}

fn strs(v: &[String]) -> Y {
    Y::L(v.iter().map(|w| s(w.clone())).collect())
}

impl Y {
    fn scalar(&self) -> Option<String> {
        match self {
            Y::S(v) => Some(serde_json::to_string(v).expect("a string serialises")),
            Y::N(n) => Some(n.to_string()),
            Y::L(v) if v.is_empty() => Some("[]".into()),
            Y::M(v) if v.is_empty() => Some("{}".into()),
            _ => None,
        }
    }

    fn write(&self, indent: usize, out: &mut String) {
        let pad = " ".repeat(indent);
        match self {
            Y::M(entries) => {
                for (k, v) in entries {
                    match v.scalar() {
                        Some(sc) => out.push_str(&format!("{pad}{k}: {sc}\n")),
                        None => {
                            out.push_str(&format!("{pad}{k}:\n"));
                            v.write(indent + 2, out);
                        }
                    }
                }
            }
            Y::L(items) => {
                for item in items {
                    match item.scalar() {
                        Some(sc) => out.push_str(&format!("{pad}- {sc}\n")),
                        None => {
                            // The item's first line starts after "- ", the rest align with it.
                            let mut inner = String::new();
                            item.write(indent + 2, &mut inner);
                            out.push_str(&format!("{pad}- {}", &inner[indent + 2..]));
                        }
                    }
                }
            }
            _ => out.push_str(&format!("{pad}{}\n", self.scalar().expect("a scalar"))),
        }
    }
}

/// The engine's official container image and the program its container runs.
fn image(engine: &str) -> &'static str {
    match engine {
        "sglang" => "lmsysorg/sglang:latest",
        "trtllm" => "nvcr.io/nvidia/tensorrt-llm/release:latest",
        _ => "vllm/vllm-openai:latest",
    }
}

fn engine_of(name: &str) -> ServingEngine {
    match name {
        "sglang" => ServingEngine::Sglang,
        "trtllm" => ServingEngine::Trtllm,
        _ => ServingEngine::Vllm,
    }
}

fn meta(name: &str, labels: Y) -> Y {
    Y::M(vec![("name", s(name)), ("labels", labels)])
}

fn app(name: &str) -> Y {
    Y::M(vec![("app", s(name))])
}

/// A Deployment of `replicas` pods of one container.
fn deployment(name: &str, replicas: u32, container: Y, pod_extra: Vec<(&'static str, Y)>) -> Y {
    let mut pod = vec![("containers", Y::L(vec![container]))];
    pod.extend(pod_extra);
    Y::M(vec![
        ("apiVersion", s("apps/v1")),
        ("kind", s("Deployment")),
        ("metadata", meta(name, app(name))),
        (
            "spec",
            Y::M(vec![
                ("replicas", Y::N(replicas as u64)),
                ("selector", Y::M(vec![("matchLabels", app(name))])),
                ("template", Y::M(vec![("metadata", Y::M(vec![("labels", app(name))])), ("spec", Y::M(pod))])),
            ]),
        ),
    ])
}

fn service(name: &str, port: u16) -> Y {
    Y::M(vec![
        ("apiVersion", s("v1")),
        ("kind", s("Service")),
        ("metadata", meta(name, app(name))),
        (
            "spec",
            Y::M(vec![
                ("selector", app(name)),
                (
                    "ports",
                    Y::L(vec![Y::M(vec![
                        ("name", s("http")),
                        ("port", Y::N(port as u64)),
                        ("targetPort", Y::N(port as u64)),
                    ])]),
                ),
            ]),
        ),
    ])
}

/// The file name the llm-d Helm values give the EndpointPickerConfig.
const LLM_D_PLUGINS_FILE: &str = "servesim-plugins.yaml";

/// An EndpointPickerConfig (llm-d/llm-d-inference-scheduler `apix/config/v1alpha1`, at
/// 520af478) of `plugins`, every one in its `default` scheduling profile; the loader adds the
/// metrics data source and the in-flight load producer by default.
pub(super) fn endpoint_picker_config(plugins: &[String]) -> String {
    let list = |key: &'static str| Y::L(plugins.iter().map(|p| Y::M(vec![(key, s(p.clone()))])).collect());
    let y = Y::M(vec![
        ("apiVersion", s("inference.networking.x-k8s.io/v1alpha1")),
        ("kind", s("EndpointPickerConfig")),
        ("plugins", list("type")),
        ("schedulingProfiles", Y::L(vec![Y::M(vec![("name", s("default")), ("plugins", list("pluginRef"))])])),
    ]);
    let mut out = String::new();
    y.write(0, &mut out);
    out
}

impl Deployment {
    /// Helm values for llm-d's `inferencepool` chart (llm-d/llm-d-inference-scheduler
    /// `config/charts/inferencepool`, 520af478): the pool selects the engine's pods of the
    /// manifest, and the endpoint picker runs [`super::LlmD::config`]. `None` without an llm-d
    /// configuration or without a manifest.
    pub fn llm_d_values(&self, made_by: &str) -> Option<String> {
        let l = self.router.llm_d.as_ref()?;
        if self.no_manifest.is_some() {
            return None;
        }
        let engine = engine_of(&self.engine);
        let server_type = match engine {
            ServingEngine::Sglang => "sglang",
            ServingEngine::Trtllm => "trtllm-serve",
            ServingEngine::Vllm => "vllm",
        };
        let y = Y::M(vec![
            (
                "inferencePool",
                Y::M(vec![
                    ("modelServers", Y::M(vec![("matchLabels", app(&self.name))])),
                    ("targetPorts", Y::L(vec![Y::M(vec![("number", Y::N(super::port(engine) as u64))])])),
                    ("modelServerType", s(server_type)),
                ]),
            ),
            (
                "inferenceExtension",
                Y::M(vec![
                    ("pluginsConfigFile", s(LLM_D_PLUGINS_FILE)),
                    ("pluginsCustomConfig", Y::M(vec![(LLM_D_PLUGINS_FILE, s(l.config.clone()))])),
                ]),
            ),
        ]);
        let mut out = format!(
            "# {made_by}\n\
             # Helm values for llm-d's inferencepool chart (github.com/llm-d/llm-d-inference-scheduler,\n\
             # config/charts/inferencepool): helm install {} <the chart> -f <this file>, beside the manifest's\n\
             # engine Deployment; requests reach the pool through a Gateway with the inference extension.\n\
             # Endpoint picker: {} ({}).\n",
            self.name,
            l.plugins.join(" + "),
            l.note
        );
        y.write(0, &mut out);
        Some(out)
    }

    /// The Kubernetes manifest, headed by `made_by` (what wrote it) and its assumptions; `None`
    /// when [`Deployment::no_manifest`] says why there is none.
    pub fn manifest(&self, made_by: &str) -> Option<String> {
        if self.no_manifest.is_some() {
            return None;
        }
        let engine = engine_of(&self.engine);
        let port = super::port(engine);
        let mut docs = vec![];
        for v in &self.servers {
            let name = match &v.role {
                Some(r) => format!("{}-{r}", self.name),
                None => self.name.clone(),
            };
            let mut args = v.command.args.clone();
            args.extend(["--host".into(), "0.0.0.0".into(), "--port".into(), port.to_string()]);
            let container = Y::M(vec![
                ("name", s("engine")),
                ("image", s(image(&self.engine))),
                ("command", strs(&v.command.program)),
                ("args", strs(&args)),
                ("ports", Y::L(vec![Y::M(vec![("containerPort", Y::N(port as u64))])])),
                ("resources", Y::M(vec![("limits", Y::M(vec![("nvidia.com/gpu", Y::N(v.gpus_per_replica))]))])),
                (
                    "readinessProbe",
                    Y::M(vec![
                        ("httpGet", Y::M(vec![("path", s("/health")), ("port", Y::N(port as u64))])),
                        ("periodSeconds", Y::N(10)),
                    ]),
                ),
                ("volumeMounts", Y::L(vec![Y::M(vec![("name", s("dshm")), ("mountPath", s("/dev/shm"))])])),
            ]);
            let shm = Y::L(vec![Y::M(vec![("name", s("dshm")), ("emptyDir", Y::M(vec![("medium", s("Memory"))]))])]);
            docs.push(deployment(&name, v.replicas, container, vec![("volumes", shm)]));
            docs.push(service(&name, port));
        }
        if let Some(c) = &self.router.command {
            docs.extend(self.router_docs(c, port));
        }
        let mut out = format!(
            "# {made_by}\n\
             # Assumptions: the images' `latest` tags (pin the engine version you validated); the router's\n\
             # RoleBinding names the namespace \"default\" (edit it to the one you apply this to).\n\
             # Router: {}\n",
            self.router.note
        );
        for d in docs {
            out.push_str("---\n");
            d.write(0, &mut out);
        }
        Some(out)
    }

    /// The router's ServiceAccount, Role and RoleBinding (its pod discovery lists pods), its
    /// Deployment and its Service.
    fn router_docs(&self, c: &super::LaunchCommand, port: u16) -> Vec<Y> {
        let name = format!("{}-router", self.name);
        let image = match self.engine.as_str() {
            "sglang" => "lmsysorg/sglang:latest",
            _ => "lmcache/lmstack-router:latest",
        };
        let namespace_env = Y::L(vec![Y::M(vec![
            ("name", s("POD_NAMESPACE")),
            ("valueFrom", Y::M(vec![("fieldRef", Y::M(vec![("fieldPath", s("metadata.namespace"))]))])),
        ])]);
        let container = Y::M(vec![
            ("name", s("router")),
            ("image", s(image)),
            ("command", strs(&c.program)),
            ("args", strs(&c.args)),
            ("env", namespace_env),
            ("ports", Y::L(vec![Y::M(vec![("containerPort", Y::N(port as u64))])])),
        ]);
        let rbac = |kind: &str, spec: Vec<(&'static str, Y)>| {
            let mut m = vec![
                ("apiVersion", s(if kind == "ServiceAccount" { "v1" } else { "rbac.authorization.k8s.io/v1" })),
                ("kind", s(kind)),
                ("metadata", meta(&name, app(&name))),
            ];
            m.extend(spec);
            Y::M(m)
        };
        let rule = Y::M(vec![
            ("apiGroups", strs(&["".into()])),
            ("resources", strs(&["pods".into()])),
            ("verbs", strs(&["get".into(), "list".into(), "watch".into()])),
        ]);
        vec![
            rbac("ServiceAccount", vec![]),
            rbac("Role", vec![("rules", Y::L(vec![rule]))]),
            rbac(
                "RoleBinding",
                vec![
                    (
                        "subjects",
                        Y::L(vec![Y::M(vec![
                            ("kind", s("ServiceAccount")),
                            ("name", s(name.clone())),
                            ("namespace", s("default")),
                        ])]),
                    ),
                    (
                        "roleRef",
                        Y::M(vec![
                            ("apiGroup", s("rbac.authorization.k8s.io")),
                            ("kind", s("Role")),
                            ("name", s(name.clone())),
                        ]),
                    ),
                ],
            ),
            deployment(&name, 1, container, vec![("serviceAccountName", s(name.clone()))]),
            service(&name, port),
        ]
    }
}
