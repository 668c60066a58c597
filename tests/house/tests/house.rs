//! The house rules over the workspace's own source: each test fails naming what broke them.

use cronstable_house::{functions, imports, requirements, rust_files, scan, workspace_root};

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

/// The longest a function may be, per crate, test code aside: past this a function is a state
/// machine or a pipeline waiting to be named.
const FUNCTION_BOUNDS: [(&str, usize); 2] = [("executor-shim/src", 80), ("coordinator/src", 120)];

/// Functions allowed over their bound, each with the length it may not grow past. Empty since
/// the last long function was split; a row here needs a reason beside it, and the list only
/// shrinks.
const LONG_FUNCTIONS: &[(&str, &str, usize)] = &[];

#[test]
fn no_function_over_its_bound() {
    let root = workspace_root();
    let mut problems = Vec::new();
    let mut seen = Vec::new();
    for (dir, bound) in FUNCTION_BOUNDS {
        let files = rust_files(&root.join(dir));
        assert!(files.len() > 10, "{dir}: no source found");
        for rel in files {
            let file = format!("{dir}/{}", rel.display());
            let src = std::fs::read_to_string(root.join(&file)).expect("readable source");
            let code = scan::without_tests(&scan::code_only(&src));
            for f in functions::functions(&code)
                .into_iter()
                .filter(|f| f.lines > bound)
            {
                let known = LONG_FUNCTIONS
                    .iter()
                    .find(|(p, name, _)| *p == file && *name == f.name);
                match known {
                    Some(&(_, _, allowed)) if f.lines <= allowed => {
                        seen.push((file.clone(), f.name.clone()));
                    }
                    Some(&(_, _, allowed)) => problems.push(format!(
                        "{file}:{} {} grew to {} lines (listed at {allowed}; the bound is \
                         {bound}): split it",
                        f.line, f.name, f.lines
                    )),
                    None => problems.push(format!(
                        "{file}:{} {} is {} lines, over the bound of {bound}: name its steps",
                        f.line, f.name, f.lines
                    )),
                }
            }
        }
    }
    for (file, name, _) in LONG_FUNCTIONS {
        if !seen.iter().any(|(f, n)| f == file && n == name) {
            problems.push(format!(
                "{file} {name} is listed in LONG_FUNCTIONS but is within its bound now (or gone): \
                 take its row out"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
