//! Every .cu source compiles to an sm_90 CUBIN with NVRTC, and the CUBIN defines the kernels the
//! launchers look up. Runs without a GPU: NVRTC comes from the PyPI wheels (DEVELOPERS.md). A
//! machine without NVRTC skips with a message, unless SERVESIM_REQUIRE_NVRTC=1 (set by CI's
//! .ci/run), which turns the skip into a failure.

use servesim_kernels::{nvrtc, ENTRY_POINTS, SOURCES};

fn nvrtc_or_skip() -> bool {
    if nvrtc::nvrtc_present() {
        return true;
    }
    let msg = format!(
        "NVRTC (libnvrtc.so.{}) not found in {:?} or the loader's paths; install the wheels as DEVELOPERS.md says \
         (pip install --target DIR nvidia-cuda-nvrtc==13.0.* nvidia-cuda-runtime==13.0.*; export {}=DIR/nvidia/cu13)",
        nvrtc::CUDA_MAJOR,
        nvrtc::cuda_dirs(),
        nvrtc::CUDA_HOME_VAR
    );
    // Under CI (CI=true, or SERVESIM_REQUIRE_NVRTC=1) a missing NVRTC is a failure.
    if std::env::var("SERVESIM_REQUIRE_NVRTC").as_deref() == Ok("1") || std::env::var("CI").as_deref() == Ok("true") {
        panic!("{msg}");
    }
    // Written past the test harness's capture, so that `cargo test` shows the skip.
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "skipped: {msg}");
    false
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn every_cuda_source_compiles_to_an_sm90_cubin() {
    if !nvrtc_or_skip() {
        return;
    }
    let (major, minor) = nvrtc::version().unwrap();
    eprintln!("NVRTC {major}.{minor}, headers from {:?}", nvrtc::include_dir());
    assert_eq!(SOURCES.len(), ENTRY_POINTS.len());
    let on_disk: Vec<String> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/cuda"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".cu"))
        .collect();
    for f in &on_disk {
        assert!(SOURCES.iter().any(|(n, _)| n == f), "{f} is not embedded in SOURCES");
    }
    for (name, src) in SOURCES {
        // The attention kernels are compiled per head size: the shipped models' sizes, and 80
        // (a size that is not a multiple of 8, phi-2's).
        let variants: Vec<Vec<String>> = if matches!(*name, "prefill_attention.cu" | "decode_attention.cu") {
            vec![vec!["-DHEAD_DIM=64".into()], vec!["-DHEAD_DIM=128".into()], vec!["-DHEAD_DIM=80".into()]]
        } else {
            vec![vec![]]
        };
        for extra in variants {
            let cubin = nvrtc::compile(name, src, "sm_90", &extra).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(&cubin[..4], b"\x7fELF", "{name}: not an ELF CUBIN");
            let entries = ENTRY_POINTS.iter().find(|(n, _)| n == name).unwrap().1;
            for e in entries {
                assert!(contains(&cubin, e.as_bytes()), "{name}: CUBIN lacks kernel {e}");
            }
            eprintln!("{name} {extra:?}: {} bytes of sm_90 CUBIN", cubin.len());
        }
    }
}

#[test]
fn a_broken_source_reports_the_compiler_log() {
    if !nvrtc_or_skip() {
        return;
    }
    let e =
        nvrtc::compile("bad.cu", "extern \"C\" __global__ void k() { undeclared_thing(); }", "sm_90", &[]).unwrap_err();
    assert!(e.source_name == "bad.cu" && e.detail.contains("undeclared_thing"), "{e}");
    assert!(e.to_string().starts_with("bad.cu: "), "{e}");
}
