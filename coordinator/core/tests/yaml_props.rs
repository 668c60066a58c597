//! Property tests: the YAML helpers and the job file parser never panic, whatever the input.

use std::collections::BTreeMap;

use cronstable_core::{jobfile, yaml};
use proptest::prelude::*;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code)] // Only deserialized, never read: the property is "does not panic".
struct Doc {
    cluster: Option<BTreeMap<String, String>>,
    jobs: Option<Vec<BTreeMap<String, u32>>>,
}

/// Text built from YAML's structural characters, so the parser is pushed into odd states
/// far more often than by uniform random text.
fn yamlish() -> impl Strategy<Value = String> {
    let atom = prop_oneof![
        Just("jobs:".to_owned()),
        Just("- ".to_owned()),
        Just("name: a".to_owned()),
        Just("schedule: \"@daily\"".to_owned()),
        Just("command: x".to_owned()),
        Just("&a ".to_owned()),
        Just("*a".to_owned()),
        Just("<<: ".to_owned()),
        Just("? ".to_owned()),
        Just("[".to_owned()),
        Just("]".to_owned()),
        Just("{".to_owned()),
        Just("}".to_owned()),
        Just(", ".to_owned()),
        Just("\"".to_owned()),
        Just("'".to_owned()),
        Just("|".to_owned()),
        Just("---".to_owned()),
        Just("!!binary ".to_owned()),
        Just("#".to_owned()),
        Just("\n".to_owned()),
        Just("  ".to_owned()),
        "[a-z0-9:]{0,4}",
    ];
    prop::collection::vec(atom, 0..40).prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_text_never_panics(text in any::<String>()) {
        let _ = yaml::parse::<Doc>(&text, "p.yaml");
        let lines = yaml::KeyLines::new(&text);
        let _ = lines.nearest("jobs[0].name");
        let _ = jobfile::parse(&text, "p.yaml");
    }

    #[test]
    fn yamlish_text_never_panics(text in yamlish()) {
        let _ = yaml::parse::<Doc>(&text, "p.yaml");
        let _ = yaml::KeyLines::new(&text).nearest("jobs[1]");
        let parsed = jobfile::parse(&text, "p.yaml");
        for e in &parsed.errors {
            // Every error names the file.
            prop_assert!(e.to_string().starts_with("p.yaml"));
        }
    }
}
