//! `[cost]`: which cost model gives iteration times, chosen by `kind` (default `"roofline"`,
//! so files written before there was a choice keep working).

use serde::{Deserialize, Serialize};

use super::de;
use super::file::CostSection;
use super::ScenarioError;
use crate::cost::LinearCost;

/// The cost model of an instance group.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[allow(clippy::large_enum_variant)] // one per instance group
pub enum CostSpec {
    /// The analytic roofline (`cost::Roofline`), the default.
    Roofline(CostSection),
    /// `base_us + per_token_us × tokens + per_seq_us × sequences` (`cost::LinearCost`).
    Linear(LinearCost),
}

impl CostSpec {
    pub const KINDS: &'static [&'static str] = &["roofline", "linear"];

    pub fn validate(&self, path: &str) -> Result<(), ScenarioError> {
        match self {
            CostSpec::Roofline(c) => c.validate(path),
            CostSpec::Linear(l) => l.validate(path),
        }
    }
}

impl Default for CostSpec {
    fn default() -> Self {
        CostSpec::Roofline(CostSection::default())
    }
}

impl<'de> Deserialize<'de> for CostSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut table = <toml::Table as Deserialize>::deserialize(d)?;
        if !table.contains_key("kind") {
            table.insert("kind".into(), toml::Value::String("roofline".into()));
        }
        let kind = de::take_kind::<D::Error>(&mut table, CostSpec::KINDS)?;
        match kind.as_str() {
            "roofline" => de::variant::<CostSection, D::Error>(table).map(CostSpec::Roofline),
            "linear" => de::variant::<LinearCost, D::Error>(table).map(CostSpec::Linear),
            _ => unreachable!("take_kind accepts only listed kinds"),
        }
    }
}
