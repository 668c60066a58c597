//! The house rules over the workspace's own source: each test fails naming what broke them.

use cronstable_house::{imports, workspace_root};

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
