//! `api.authToken` with real processes: a coordinator whose gRPC API needs a bearer token
//! refuses a call without it or with another one (`UNAUTHENTICATED`, a readable reason, a
//! counter), takes a rotated token at a reload, and serves the shim and `cronstable-gate` that
//! send it (`--api-token-file`, `CRONSTABLE_API_TOKEN`).
//!
//! Each test fails on the code before the token: `api.authToken` was an unknown key, so the
//! coordinator refused the config, and nothing checked a call.

use std::path::{Path, PathBuf};
use std::process::Command;

use cronstable_proto::v1 as pb;
use cronstable_tests::{
    Coordinator, binary, free_port, http, lines, register_jobs, start_shim, wait_for,
};

/// SIGHUP, SIGTERM.
const HUP: i32 = 1;
const TERM: i32 = 15;

/// A coordinator whose API needs the token in `dir/token` (which holds `first-token`), with
/// `extra` config appended.
fn guarded(dir: &Path, extra: &str) -> (Coordinator, PathBuf) {
    let token = dir.join("token");
    std::fs::write(&token, "first-token\n").unwrap();
    let (api, web) = (free_port(), free_port());
    let config = dir.join("coordinator.yaml");
    std::fs::write(
        &config,
        format!(
            "api:\n  listen: 127.0.0.1:{api}\n  authToken:\n    fromFile: {}\nweb:\n  listen: \
             127.0.0.1:{web}\n{extra}",
            token.display()
        ),
    )
    .unwrap();
    let c = Coordinator::start_with(
        config,
        format!("http://127.0.0.1:{api}"),
        ([127, 0, 0, 1], web).into(),
    );
    (c, token)
}

/// A `RegisterJobs` call with `token` (none: no metadata).
fn register(
    rt: &tokio::runtime::Runtime,
    api: &str,
    token: Option<&str>,
) -> Result<(), tonic::Status> {
    let charge = pb::JobDefinition {
        name: "charge".into(),
        schedule: "0 3 * * *".into(),
        command: "true".into(),
        ..Default::default()
    };
    rt.block_on(register_jobs(api, "billing", vec![charge], token))
}

#[test]
fn a_guarded_api_refuses_calls_without_its_token_and_a_reload_rotates_it() {
    let dir = tempfile::tempdir().unwrap();
    let (c, token) = guarded(dir.path(), "");
    let rt = tokio::runtime::Runtime::new().unwrap();

    let missing = register(&rt, &c.api, None).unwrap_err();
    assert_eq!(missing.code(), tonic::Code::Unauthenticated, "{missing:?}");
    assert!(
        missing.message().contains("needs api.authToken")
            && missing.message().contains("authorization: Bearer"),
        "{missing:?}"
    );
    let wrong = register(&rt, &c.api, Some("guess")).unwrap_err();
    assert_eq!(wrong.code(), tonic::Code::Unauthenticated, "{wrong:?}");
    assert!(
        wrong
            .message()
            .contains("not this coordinator's api.authToken"),
        "{wrong:?}"
    );
    register(&rt, &c.api, Some("first-token")).expect("the token is accepted");
    let metrics = http(c.web, "GET", "/metrics").unwrap().body;
    assert!(
        metrics.contains("cronstable_api_unauthenticated_total{api=\"grpc\"} 2"),
        "{metrics}"
    );

    // Only the file's bytes change; the reload reads the token again.
    std::fs::write(&token, "second-token\n").unwrap();
    c.proc.signal(HUP);
    wait_for("the reload to apply the new api.authToken", || {
        c.proc
            .log()
            .lines()
            .any(|l| l.contains("config reloaded") && l.contains("api.authToken"))
            .then_some(())
    });
    let old = register(&rt, &c.api, Some("first-token")).unwrap_err();
    assert_eq!(old.code(), tonic::Code::Unauthenticated, "the old token");
    register(&rt, &c.api, Some("second-token")).expect("the new token");
}

#[test]
fn the_shim_and_the_gate_send_the_token_they_are_given() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = dir.path().join("app.cron");
    std::fs::write(
        &jobs,
        "# cronstable: name=report clusterPolicy=Leader\n* * * * * root cronstable-gate report -- true\n",
    )
    .unwrap();
    let (c, token) = guarded(
        dir.path(),
        &format!("jobs:\n  systemCrontab: {}\n", jobs.display()),
    );

    // A shim without the token is refused: it registers nothing and runs no Leader job.
    let out = dir.path().join("out");
    let crontab = dir.path().join("crontab");
    std::fs::write(
        &crontab,
        format!(
            "# cronstable: name=tick clusterPolicy=Leader seconds=true\n* * * * * * echo tick >> {}\n",
            out.display()
        ),
    )
    .unwrap();
    let mut refused = start_shim(&crontab, &c.api, &[]);
    refused.wait_log("api.authToken");
    refused.wait_log("the coordinator refused the question");
    assert!(lines(&out).is_empty(), "a refused shim ran the Leader job");
    refused.signal(TERM);
    refused.wait_exit();

    // The same shim with the token file registers and runs it.
    let mut shim = start_shim(
        &crontab,
        &c.api,
        &["--api-token-file", token.to_str().unwrap()],
    );
    wait_for("the shim's Leader job to run", || {
        (lines(&out).len() >= 2).then_some(())
    });

    // The gate: refused without the token (the no-manager rule skips a Leader job and says
    // why), run with it.
    let gate = |token: Option<&str>| {
        let mut cmd = Command::new(binary("cronstable-gate"));
        cmd.arg("--coordinator").arg(&c.api).args([
            "-v",
            "report",
            "--",
            "/bin/sh",
            "-c",
            "echo gated",
        ]);
        cmd.env_remove("CRONSTABLE_API_TOKEN");
        if let Some(t) = token {
            cmd.env("CRONSTABLE_API_TOKEN", t);
        }
        cmd.output().unwrap()
    };
    let without = gate(None);
    let stderr = String::from_utf8_lossy(&without.stderr);
    assert!(
        !String::from_utf8_lossy(&without.stdout).contains("gated"),
        "ran without the token; stderr: {stderr}"
    );
    assert!(stderr.contains("api.authToken"), "{stderr}");
    let with = gate(Some("first-token"));
    assert_eq!(
        String::from_utf8_lossy(&with.stdout).trim(),
        "gated",
        "stderr: {}",
        String::from_utf8_lossy(&with.stderr)
    );
    shim.signal(TERM);
    shim.wait_exit();
}

/// Red on the code before the reload table: the reload kept the running `api` section, so a
/// token added to the file (or a new value, or another file) was logged as reloaded and never
/// checked.
#[test]
fn a_token_added_or_changed_at_a_reload_is_checked_from_the_next_call() {
    let dir = tempfile::tempdir().unwrap();
    let (api, web) = (free_port(), free_port());
    let config = dir.path().join("coordinator.yaml");
    let open = format!("api:\n  listen: 127.0.0.1:{api}\nweb:\n  listen: 127.0.0.1:{web}\n");
    std::fs::write(&config, &open).unwrap();
    let c = Coordinator::start_with(
        config.clone(),
        format!("http://127.0.0.1:{api}"),
        ([127, 0, 0, 1], web).into(),
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    register(&rt, &c.api, None).expect("an open API serves a call without a token");

    let reloaded = |c: &Coordinator, n: usize| {
        wait_for("the reload to finish", || {
            (c.proc.log().matches("config reloaded").count() >= n).then_some(())
        })
    };
    // Added as a value.
    let with_value = open.replace(
        &format!("127.0.0.1:{api}\n"),
        &format!("127.0.0.1:{api}\n  authToken:\n    value: added\n"),
    );
    std::fs::write(&config, &with_value).unwrap();
    c.proc.signal(HUP);
    reloaded(&c, 1);
    let refused = register(&rt, &c.api, None).unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");
    register(&rt, &c.api, Some("added")).expect("the added token");

    // Another value, then another source (a file).
    std::fs::write(&config, with_value.replace("added", "changed")).unwrap();
    c.proc.signal(HUP);
    reloaded(&c, 2);
    assert_eq!(
        register(&rt, &c.api, Some("added")).unwrap_err().code(),
        tonic::Code::Unauthenticated
    );
    register(&rt, &c.api, Some("changed")).expect("the changed token");
    let file = dir.path().join("token");
    std::fs::write(&file, "from-file\n").unwrap();
    std::fs::write(
        &config,
        with_value.replace("value: added", &format!("fromFile: {}", file.display())),
    )
    .unwrap();
    c.proc.signal(HUP);
    reloaded(&c, 3);
    assert_eq!(
        register(&rt, &c.api, Some("changed")).unwrap_err().code(),
        tonic::Code::Unauthenticated
    );
    register(&rt, &c.api, Some("from-file")).expect("the token from the new file");
}
