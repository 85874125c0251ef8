#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    servesim_sim::fuzz::scenario(data);
});
