//! `kind = "recompute"` (the default, and vLLM V1's and SGLang's only kind): a preempted
//! request's blocks are freed; it waits first in line and prefills its prompt and generated
//! tokens again.

use serde::{Deserialize, Serialize};

use super::PreemptionPolicy;

/// `kind = "recompute"`: no settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recompute {}

impl PreemptionPolicy for Recompute {}
