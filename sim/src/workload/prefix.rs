//! Prefix structure of prompts: shared system prompts, retrieved documents and multi-turn
//! history, so that a prefix cache has something to find.
//!
//! ```text
//!   prompt = [system prompt of group g] [document d₁ … dₙ] [earlier turns: prompt, output] [new user tokens]
//!             └ G groups, Zipf(skew)     └ corpus, Zipf(skew) └ sessions of T turns          └ workload.prompt_tokens
//! ```
//! Each part is a [`Segment`] with an identity (hash), so two requests that share the first k
//! segments share those tokens. The new user tokens get a unique identity; the output of a
//! request is identified by [`output_hash`] of its prompt, which is how the next turn of a
//! session names the previous answer (greedy decoding makes the answer a function of the prompt).
//!
//! `workload.prompt_tokens` is the length of the new user tokens only; the system prompt,
//! documents and history come on top.

use std::collections::HashMap;

use crate::rng::SimRng;
use rand::RngExt;
use serde::{Deserialize, Serialize};

use super::{LengthDist, Segment};
use crate::config::{check, ConfigError};
use crate::rng::{substream, Stream};

/// `[workload.prefix]`: which shared structure prompts have. Every part is optional.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrefixSpec {
    /// Shared system prompts: each request starts with the prompt of one of `groups` groups.
    pub(crate) system: Option<SystemPrompts>,
    /// Retrieved documents from a Zipf-popular corpus, after the system prompt.
    pub(crate) rag: Option<RagDocuments>,
    /// Multi-turn sessions: each turn's prompt is the previous turn's prompt and answer plus
    /// new user tokens.
    pub sessions: Option<Sessions>,
}

/// `[workload.prefix.system]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SystemPrompts {
    /// Number of distinct system prompts.
    pub(crate) groups: u32,
    /// Length of each group's system prompt, drawn once per group.
    pub(crate) tokens: LengthDist,
    /// Zipf exponent of group popularity: group g (from 0) is chosen with weight 1/(g+1)^skew.
    /// 0 = uniform. Default 0.
    #[serde(default)]
    pub(crate) skew: f64,
}

/// `[workload.prefix.rag]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RagDocuments {
    /// Documents in the corpus.
    pub(crate) documents: u32,
    /// Length of each document, drawn once per document.
    pub(crate) tokens: LengthDist,
    /// Zipf exponent of document popularity. Default 1.
    #[serde(default = "one")]
    pub(crate) skew: f64,
    /// Documents per request (drawn independently, in retrieval order). Default 1.
    #[serde(default = "one_u32")]
    pub(crate) per_request: u32,
}

/// `[workload.prefix.sessions]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sessions {
    /// Turns per session.
    pub(crate) turns: LengthDist,
    /// Mean think time between a turn's last token and the next turn, seconds (exponential).
    /// Default 0.
    #[serde(default)]
    pub(crate) think_time_s: f64,
}

fn one() -> f64 {
    1.0
}

fn one_u32() -> u32 {
    1
}

impl PrefixSpec {
    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        if let Some(s) = &self.system {
            let p = format!("{path}.system");
            check(s.groups >= 1 && s.groups <= 10_000_000, &p, "groups", "must be in [1, 10000000]", s.groups)?;
            s.tokens.validate(&format!("{p}.tokens"))?;
            check(s.skew.is_finite() && (0.0..=10.0).contains(&s.skew), &p, "skew", "must be in [0, 10]", s.skew)?;
        }
        if let Some(r) = &self.rag {
            let p = format!("{path}.rag");
            check(
                r.documents >= 1 && r.documents <= 10_000_000,
                &p,
                "documents",
                "must be in [1, 10000000]",
                r.documents,
            )?;
            r.tokens.validate(&format!("{p}.tokens"))?;
            check(r.skew.is_finite() && (0.0..=10.0).contains(&r.skew), &p, "skew", "must be in [0, 10]", r.skew)?;
            check(r.per_request <= 64, &p, "per_request", "must be in [0, 64]", r.per_request)?;
        }
        if let Some(s) = &self.sessions {
            let p = format!("{path}.sessions");
            s.turns.validate(&format!("{p}.turns"))?;
            check(
                s.think_time_s.is_finite() && s.think_time_s >= 0.0,
                &p,
                "think_time_s",
                "must be ≥ 0",
                s.think_time_s,
            )?;
        }
        Ok(())
    }
}

/// Mixes two 64-bit values into one (splitmix64's finaliser over a combination): the building
/// block of every content identity. Deterministic on every platform.
pub(crate) fn mix(a: u64, b: u64) -> u64 {
    let mut z = a.rotate_left(23) ^ b.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

const OUTPUT_TAG: u64 = 0x6f75_7470_7574; // "output"
const SYSTEM_TAG: u64 = 0x7379_7374_656d; // "system"
const DOC_TAG: u64 = 0x0064_6f63; // "doc"
const USER_TAG: u64 = 0x7573_6572; // "user"

/// The identity of the answer to a prompt whose content is `content` (which must cover the
/// whole prompt): the next turn of a session names the previous answer with it, and the prefix
/// cache names the blocks of generated tokens with it.
pub(crate) fn output_hash(content: &[Segment]) -> u64 {
    let mut h = OUTPUT_TAG;
    for s in content {
        h = mix(mix(h, s.hash), s.tokens as u64);
    }
    mix(h, OUTPUT_TAG)
}

/// Identity of the unique user tokens of the request with generation index `index`.
pub(crate) fn user_hash(index: u64) -> u64 {
    mix(USER_TAG, index)
}

/// Cumulative Zipf weights over `n` items: item i has weight 1/(i+1)^skew.
fn zipf_cdf(n: u32, skew: f64) -> Vec<f64> {
    let mut acc = 0.0;
    let mut cdf: Vec<f64> = (0..n)
        .map(|i| {
            acc += 1.0 / ((i + 1) as f64).powf(skew);
            acc
        })
        .collect();
    for c in &mut cdf {
        *c /= acc;
    }
    cdf
}

fn pick(cdf: &[f64], rng: &mut SimRng) -> usize {
    let u: f64 = rng.random();
    cdf.partition_point(|&c| c <= u).min(cdf.len() - 1)
}

/// Clients at or above this number are open-loop session slots, not closed-loop users.
pub(crate) const SESSION_CLIENT_BASE: u32 = 1 << 31;

/// A session in progress.
#[derive(Clone, Debug)]
struct Session {
    id: u64,
    /// Turns still to send.
    turns_left: u32,
    /// Turns sent so far.
    sent: u32,
    /// The context so far: every earlier turn's prompt and answer.
    content: Vec<Segment>,
    tokens: u64,
}

/// What a request's prompt is made of.
pub(crate) struct Composed {
    pub(crate) prompt_tokens: u64,
    pub(crate) content: Vec<Segment>,
    pub(crate) session: Option<u64>,
}

/// Generates the prefix structure of requests.
pub(crate) struct PrefixGen {
    spec: PrefixSpec,
    system_tokens: Vec<u32>,
    system_cdf: Vec<f64>,
    doc_tokens: Vec<u32>,
    doc_cdf: Vec<f64>,
    rng: SimRng,
    turns_rng: SimRng,
    think_rng: SimRng,
    sessions: HashMap<u32, Session>,
    next_session: u64,
    next_slot: u32,
}

impl PrefixGen {
    pub(crate) fn new(spec: PrefixSpec, seed: u64) -> PrefixGen {
        // Index 0 draws the corpus once, index 1 the per-request choices, 2 and 3 the sessions.
        let mut corpus = substream(seed, Stream::Prefix, 0);
        let (system_tokens, system_cdf) = match &spec.system {
            Some(s) => (
                (0..s.groups).map(|_| s.tokens.sample(&mut corpus).min(u32::MAX as u64) as u32).collect(),
                zipf_cdf(s.groups, s.skew),
            ),
            None => (Vec::new(), Vec::new()),
        };
        let (doc_tokens, doc_cdf) = match &spec.rag {
            Some(r) => (
                (0..r.documents).map(|_| r.tokens.sample(&mut corpus).min(u32::MAX as u64) as u32).collect(),
                zipf_cdf(r.documents, r.skew),
            ),
            None => (Vec::new(), Vec::new()),
        };
        PrefixGen {
            spec,
            system_tokens,
            system_cdf,
            doc_tokens,
            doc_cdf,
            rng: substream(seed, Stream::Prefix, 1),
            turns_rng: substream(seed, Stream::Prefix, 2),
            think_rng: substream(seed, Stream::Prefix, 3),
            sessions: HashMap::new(),
            next_session: 0,
            next_slot: SESSION_CLIENT_BASE,
        }
    }

    pub(crate) fn has_sessions(&self) -> bool {
        self.spec.sessions.is_some()
    }

    /// The shared head of a fresh prompt: a system prompt and retrieved documents.
    fn head(&mut self, content: &mut Vec<Segment>) -> u64 {
        let mut tokens = 0u64;
        if !self.system_cdf.is_empty() {
            let g = pick(&self.system_cdf, &mut self.rng);
            content.push(Segment { hash: mix(SYSTEM_TAG, g as u64), tokens: self.system_tokens[g] });
            tokens += self.system_tokens[g] as u64;
        }
        if let Some(r) = &self.spec.rag {
            for _ in 0..r.per_request {
                let d = pick(&self.doc_cdf, &mut self.rng);
                content.push(Segment { hash: mix(DOC_TAG, d as u64), tokens: self.doc_tokens[d] });
                tokens += self.doc_tokens[d] as u64;
            }
        }
        tokens
    }

    /// A new open-loop session's slot (its client number).
    pub(crate) fn new_slot(&mut self) -> u32 {
        let s = self.next_slot;
        self.next_slot = self.next_slot.checked_add(1).unwrap_or(SESSION_CLIENT_BASE);
        s
    }

    /// Composes the prompt of request `index` with `user` new tokens and `output` answer
    /// tokens, sent by `client` (a closed-loop user or a session slot).
    pub(crate) fn compose(&mut self, index: u64, client: u32, user: u64, output: u64) -> Composed {
        let user_seg = Segment { hash: user_hash(index), tokens: user.min(u32::MAX as u64) as u32 };
        let Some(sessions) = self.spec.sessions.clone() else {
            let mut content = Vec::new();
            let head = self.head(&mut content);
            content.push(user_seg);
            return Composed { prompt_tokens: head + user, content, session: None };
        };
        let fresh = self.sessions.get(&client).is_none_or(|s| s.turns_left == 0);
        if fresh {
            let mut content = Vec::new();
            let tokens = self.head(&mut content);
            let turns = sessions.turns.sample(&mut self.turns_rng).clamp(1, u32::MAX as u64) as u32;
            let id = self.next_session;
            self.next_session += 1;
            self.sessions.insert(client, Session { id, turns_left: turns, sent: 0, content, tokens });
        }
        let s = self.sessions.get_mut(&client).expect("inserted above");
        let mut content = s.content.clone();
        content.push(user_seg);
        let prompt_tokens = s.tokens + user;
        // The next turn's context: this prompt and its answer.
        s.content.push(user_seg);
        s.content.push(Segment { hash: output_hash(&content), tokens: output.min(u32::MAX as u64) as u32 });
        s.tokens = prompt_tokens + output;
        s.turns_left -= 1;
        s.sent += 1;
        Composed { prompt_tokens, content, session: Some(s.id) }
    }

    /// Whether `client`'s session has turns left; ends (forgets) it otherwise.
    pub(crate) fn continues(&mut self, client: u32) -> bool {
        match self.sessions.get(&client) {
            Some(s) if s.turns_left > 0 => true,
            Some(_) => {
                self.sessions.remove(&client);
                false
            }
            None => false,
        }
    }

    /// Forgets a session that will send no more turns (the workload ended).
    pub(crate) fn end(&mut self, client: u32) {
        self.sessions.remove(&client);
    }

    /// Whether the request just sent by `client` was the first turn of its session.
    pub(crate) fn first_turn(&self, client: u32) -> bool {
        self.sessions.get(&client).is_some_and(|s| s.sent == 1)
    }

    /// Think time before a session's next turn, seconds.
    pub(crate) fn think_s(&mut self) -> f64 {
        let mean = self.spec.sessions.as_ref().map_or(0.0, |s| s.think_time_s);
        if mean > 0.0 {
            crate::rng::exponential(&mut self.think_rng, 1.0 / mean)
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(src: &str) -> PrefixSpec {
        let s: PrefixSpec = toml::from_str(src).unwrap();
        s.validate("p").unwrap();
        s
    }

    #[test]
    fn system_prompt_popularity_follows_zipf() {
        let mut g =
            PrefixGen::new(spec("system = { groups = 4, tokens = { kind = 'fixed', value = 100 }, skew = 1.0 }"), 3);
        let mut counts = HashMap::new();
        let n = 100_000;
        for i in 0..n {
            let c = g.compose(i, u32::MAX, 10, 5);
            assert_eq!(c.prompt_tokens, 110);
            assert_eq!(c.content.len(), 2);
            *counts.entry(c.content[0].hash).or_insert(0u64) += 1;
        }
        // Weights 1, 1/2, 1/3, 1/4 over H = 25/12.
        let mut freq: Vec<f64> = counts.values().map(|&c| c as f64 / n as f64).collect();
        freq.sort_by(|a, b| b.total_cmp(a));
        let h = 25.0 / 12.0;
        for (i, f) in freq.iter().enumerate() {
            let want = 1.0 / (i as f64 + 1.0) / h;
            assert!((f - want).abs() < 0.01, "group {i}: {f} vs {want}");
        }
    }

    #[test]
    fn each_turn_extends_the_previous_context() {
        let mut g = PrefixGen::new(
            spec(
                "system = { groups = 1, tokens = { kind = 'fixed', value = 50 } }\n\
                 sessions = { turns = { kind = 'fixed', value = 3 } }",
            ),
            1,
        );
        let t1 = g.compose(0, 7, 10, 20);
        assert!(g.continues(7));
        let t2 = g.compose(1, 7, 30, 40);
        let t3 = g.compose(2, 7, 5, 6);
        assert!(!g.continues(7), "three turns, then the session ends");
        assert_eq!((t1.prompt_tokens, t2.prompt_tokens, t3.prompt_tokens), (60, 60 + 20 + 30, 110 + 40 + 5));
        // Turn 2 = turn 1's prompt, turn 1's answer, new tokens.
        assert_eq!(&t2.content[..t1.content.len()], &t1.content[..]);
        assert_eq!(t2.content[t1.content.len()], Segment { hash: output_hash(&t1.content), tokens: 20 });
        assert_eq!(&t3.content[..t2.content.len()], &t2.content[..]);
        assert_eq!(t1.session, t3.session);
        // Content always covers the whole prompt.
        for t in [&t1, &t2, &t3] {
            assert_eq!(t.content.iter().map(|s| s.tokens as u64).sum::<u64>(), t.prompt_tokens);
        }
        // A new session on the same client starts over.
        let t4 = g.compose(3, 7, 10, 20);
        assert_eq!(t4.prompt_tokens, 60);
        assert_ne!(t4.session, t1.session);
    }
}
