//! The coordinator's config loader (`--config`, `validate-config`): any text. It never panics,
//! and a refused file lists at least one error, each naming what was wrong.
#![no_main]

use cronstable_coordinator::config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // A `jobs:` key would read the file it names: keep the fuzzer to the config itself.
    if text.contains("jobs") {
        return;
    }
    match config::parse(text, "fuzz.yaml") {
        Ok(loaded) => {
            for w in &loaded.warnings {
                assert!(!w.trim().is_empty(), "an empty warning");
            }
        }
        Err(errors) => {
            let report = errors.to_string();
            assert!(!report.trim().is_empty(), "a refusal without a reason");
        }
    }
});
