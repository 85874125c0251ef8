//! servesim's integration tests, in one binary: each file is a module (linking the whole crate
//! once instead of once per file). Run one file's tests with `cargo test --test it plan::`.

mod common;

mod aic;
mod calibrate;
mod calibrate_fit;
mod cluster;
mod compare;
mod deploy;
mod disaggregation;
mod emulation;
mod fidelity_vidur;
mod files;
mod fleet;
mod fuzz_corpus;
mod hand_computed;
mod hostile;
mod hostile_inputs;
mod invariants;
mod malformed;
mod models;
mod pipeline;
mod plan;
mod policies;
mod queueing;
mod registries;
mod reliability;
mod report;
mod routers;
mod swarm;
mod tidy;
mod tune;
mod validate;
mod vidur_import;
mod workload_traces;
