//! The house rules over the workspace's own source: each test fails naming what broke them.

use cronstable_house::{imports, requirements, workspace_root};

/// The source directories whose module graphs must have no circles.
const CRATES: [&str; 3] = [
    "coordinator/src",
    "coordinator/core/src",
    "executor-shim/src",
];

#[test]
fn no_import_circles() {
    let root = workspace_root();
    let mut report = String::new();
    for dir in CRATES {
        let g = imports::graph(&root.join(dir));
        assert!(g.modules.len() > 5, "{dir}: no modules found");
        for c in imports::circles(&g) {
            report.push_str(&format!("{dir}: {}", imports::describe(&g, &c)));
        }
    }
    assert!(
        report.is_empty(),
        "modules that import each other (move the shared piece down into a module both can \
         use, or pass it in):\n{report}"
    );
}

#[test]
fn every_cited_requirement_is_defined() {
    let root = workspace_root();
    let page = std::fs::read_to_string(root.join("docs/requirements.md"))
        .expect("docs/requirements.md, the requirement IDs' home");
    let defined = requirements::defined(&page);
    let cited = requirements::cited(&root);
    assert!(
        cited.len() > 50,
        "the scan found too few IDs: {}",
        cited.len()
    );
    let mut problems = Vec::new();
    for (id, places) in &cited {
        if !defined.contains_key(id) {
            let (file, line) = &places[0];
            problems.push(format!(
                "{id} (cited at {file}:{line}) has no row in docs/requirements.md"
            ));
        }
    }
    for (id, files) in &defined {
        let Some(places) = cited.get(id) else {
            problems.push(format!(
                "{id} has a row in docs/requirements.md but nothing cites it: drop the row"
            ));
            continue;
        };
        for f in files {
            if !places.iter().any(|(p, _)| p == f) {
                problems.push(format!(
                    "docs/requirements.md lists {f} for {id}, which does not cite it"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
