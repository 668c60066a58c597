//! One coordinator and one shim on one machine, as real processes over real sockets: the
//! foundation's end-to-end behaviour (issue "Foundation"; inventory OVR-01, POL-02, MAP-05,
//! MN-05, MN-08, MN-10).

use std::path::Path;

use cronstable_tests::{Coordinator, http, lines, start_shim, wait_for};

/// A job line that appends its firing's identity to `out`.
fn recorder(name: &str, policy: &str, schedule: &str, out: &Path) -> String {
    format!(
        "# cronstable: name={name} clusterPolicy={policy} seconds=true\n\
         {schedule} echo \"$CRONSTABLE_JOB $CRONSTABLE_SCHEDULED_AT $CRONSTABLE_ATTEMPT $CRONSTABLE_FIRING_ID\" >> {}\n",
        out.display()
    )
}

#[test]
fn jobs_fire_through_the_coordinators_gate_with_their_firing_identity() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("runs");
    let crontab = dir.path().join("crontab");
    std::fs::write(
        &crontab,
        recorder("every-second", "Leader", "* * * * * *", &out),
    )
    .unwrap();
    let coordinator = Coordinator::start(dir.path());
    let shim = start_shim(&crontab, &coordinator.api, &[]);

    let runs = wait_for("three runs", || Some(lines(&out)).filter(|l| l.len() >= 3));
    for run in &runs {
        let fields: Vec<&str> = run.split(' ').collect();
        assert_eq!(fields.len(), 4, "{run}");
        assert_eq!(fields[0], "every-second");
        let at = chrono::DateTime::parse_from_rfc3339(fields[1]).expect("RFC 3339 scheduled time");
        assert_eq!(
            at.timestamp_subsec_millis(),
            0,
            "nominal instants are whole seconds: {run}"
        );
        assert!(fields[1].ends_with('Z'), "UTC: {run}");
        assert_eq!(fields[2], "1", "first attempt: {run}");
        let id = fields[3]
            .strip_prefix("v1:")
            .expect("firing id is versioned");
        assert!(
            id.len() == 32 && id.chars().all(|c| c.is_ascii_hexdigit()),
            "firing id: {run}"
        );
    }
    let mut ids: Vec<&str> = runs.iter().map(|r| r.split(' ').nth(3).unwrap()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(
        ids.len(),
        runs.len(),
        "each firing has its own id: {runs:?}"
    );
    // One run per instant, and consecutive instants: none fired twice, none skipped between.
    let instants: Vec<i64> = runs
        .iter()
        .map(|r| {
            chrono::DateTime::parse_from_rfc3339(r.split(' ').nth(1).unwrap())
                .unwrap()
                .timestamp()
        })
        .collect();
    for pair in instants.windows(2) {
        assert_eq!(
            pair[1] - pair[0],
            1,
            "consecutive seconds, each once: {runs:?}"
        );
    }

    // The coordinator decided each firing (election off: every node runs everything).
    coordinator.proc.wait_log("reason=\"election_off\"");
    let id = http(coordinator.web, "GET", "/job-set-id").unwrap().json();
    assert!(
        id["job_set_id"].as_str().unwrap().starts_with("v1:"),
        "{id}"
    );
    assert_eq!(id["jobs"], 1);
    drop(shim);
}

#[test]
fn without_a_coordinator_leader_jobs_skip_and_the_others_still_run() {
    let dir = tempfile::tempdir().unwrap();
    let (leader, prefer, every) = (
        dir.path().join("leader"),
        dir.path().join("prefer"),
        dir.path().join("every"),
    );
    let crontab = dir.path().join("crontab");
    let text = [
        recorder("leader-job", "Leader", "* * * * * *", &leader),
        recorder("prefer-job", "PreferLeader", "* * * * * *", &prefer),
        recorder("every-job", "EveryNode", "* * * * * *", &every),
    ]
    .concat();
    std::fs::write(&crontab, text).unwrap();
    // Nothing listens on this port: the seed's "no manager" row applies in the shim itself.
    let port = cronstable_tests::free_port();
    let shim = start_shim(
        &crontab,
        &format!("http://127.0.0.1:{port}"),
        &["--ask-timeout", "300ms"],
    );
    wait_for("PreferLeader and EveryNode runs", || {
        (lines(&prefer).len() >= 2 && lines(&every).len() >= 2).then_some(())
    });
    shim.wait_log("applying the no-manager rule");
    assert!(
        lines(&leader).is_empty(),
        "a Leader job ran without a manager: {:?}",
        lines(&leader)
    );
    assert!(
        shim.log().contains("coordinator_unreachable"),
        "skips are logged with their reason"
    );
}

#[test]
fn a_manual_start_runs_a_job_ungated_and_an_unknown_job_is_a_readable_404() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("manual");
    let crontab = dir.path().join("crontab");
    std::fs::write(
        &crontab,
        format!(
            "# cronstable: name=yearly-report clusterPolicy=Leader\n\
             @yearly echo \"$CRONSTABLE_JOB manual\" >> {}\n",
            out.display()
        ),
    )
    .unwrap();
    let coordinator = Coordinator::start(dir.path());
    let shim = start_shim(&crontab, &coordinator.api, &[]);
    shim.wait_log("coordinator connected");
    let started = wait_for("the manual start to be accepted", || {
        http(coordinator.web, "POST", "/jobs/yearly-report/start")
            .ok()
            .filter(|r| r.status == 202)
    });
    assert!(
        started.json()["request_id"]
            .as_str()
            .unwrap()
            .starts_with("manual-")
    );
    wait_for("the manual run", || lines(&out).first().cloned());
    assert_eq!(lines(&out), ["yearly-report manual"]);

    // The same through gRPC (a manual run): never gated, delivered over Watch, readable errors.
    {
        use cronstable_proto::v1 as pb;
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let mut client = pb::executor_client::ExecutorClient::connect(coordinator.api.clone())
                .await
                .unwrap();
            let started = client
                .start_job(pb::StartJobRequest {
                    job: "yearly-report".into(),
                })
                .await
                .unwrap()
                .into_inner();
            assert!(started.request_id.starts_with("manual-"), "{started:?}");
            let unknown = client
                .start_job(pb::StartJobRequest {
                    job: "no-such-job".into(),
                })
                .await
                .unwrap_err();
            assert_eq!(unknown.code(), tonic::Code::NotFound);
            assert!(unknown.message().contains("no-such-job"), "{unknown:?}");
            let blank = client
                .start_job(pb::StartJobRequest { job: String::new() })
                .await
                .unwrap_err();
            assert_eq!(blank.code(), tonic::Code::InvalidArgument);
        });
    }
    wait_for("the gRPC manual run", || {
        Some(()).filter(|()| lines(&out).len() == 2)
    });
    assert_eq!(
        lines(&out),
        ["yearly-report manual", "yearly-report manual"]
    );

    let missing = http(coordinator.web, "POST", "/jobs/no-such-job/start").unwrap();
    assert_eq!(missing.status, 404);
    let body = missing.json();
    assert!(
        body["error"].as_str().unwrap().contains("no-such-job"),
        "{body}"
    );
    let wrong_method = http(coordinator.web, "GET", "/jobs/yearly-report/start").unwrap();
    assert_eq!(wrong_method.status, 405);
    assert!(
        wrong_method.json()["error"]
            .as_str()
            .unwrap()
            .contains("GET"),
        "{}",
        wrong_method.body
    );
    let endpoint = http(coordinator.web, "GET", "/nope").unwrap();
    assert_eq!(endpoint.status, 404);
    assert!(endpoint.json()["error"].as_str().unwrap().contains("/nope"));
}

#[test]
fn an_invalid_line_names_file_and_line_and_the_valid_lines_still_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("runs");
    let crontab = dir.path().join("crontab");
    let text = format!(
        "# a broken line first\n61 * * * * echo never\n{}",
        recorder("still-runs", "EveryNode", "* * * * * *", &out)
    );
    std::fs::write(&crontab, text).unwrap();
    let coordinator = Coordinator::start(dir.path());
    let shim = start_shim(&crontab, &coordinator.api, &[]);
    wait_for("the valid job", || lines(&out).first().cloned());
    let log = shim.log();
    assert!(
        log.contains(&format!("{}:2:", crontab.display())),
        "error names file:line:\n{log}"
    );
}

#[test]
fn editing_the_crontab_reloads_it_and_re_registers_the_job_set() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    let crontab = dir.path().join("crontab");
    std::fs::write(&crontab, recorder("first", "Leader", "* * * * * *", &first)).unwrap();
    let coordinator = Coordinator::start(dir.path());
    let shim = start_shim(&crontab, &coordinator.api, &[]);
    wait_for("the first job", || lines(&first).first().cloned());
    let before = http(coordinator.web, "GET", "/job-set-id").unwrap().json()["job_set_id"].clone();

    std::fs::write(
        &crontab,
        recorder("second", "Leader", "* * * * * *", &second),
    )
    .unwrap();
    wait_for("the new job", || lines(&second).first().cloned());
    shim.wait_log("job file reloaded");
    let after = wait_for("the new job-set ID", || {
        let id = http(coordinator.web, "GET", "/job-set-id").ok()?.json()["job_set_id"].clone();
        (id != before).then_some(id)
    });
    assert_ne!(before, after);
    // Once the new job has run three more times, the removed one ran at most once more (a
    // firing already in flight when the reload landed).
    let settled = lines(&first).len();
    let seen = lines(&second).len();
    wait_for("three more runs of the new job", || {
        (lines(&second).len() >= seen + 3).then_some(())
    });
    assert!(
        lines(&first).len() <= settled + 1,
        "the removed job kept running"
    );
}

#[test]
fn a_failing_job_is_retried_with_each_attempt_re_asking_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("attempts");
    let crontab = dir.path().join("crontab");
    std::fs::write(
        &crontab,
        format!(
            "# cronstable: name=flaky clusterPolicy=Leader retries=2 retryBackoff=1s\n\
             @reboot echo \"$CRONSTABLE_ATTEMPT\" >> {}; exit 1\n",
            out.display()
        ),
    )
    .unwrap();
    let coordinator = Coordinator::start(dir.path());
    let _shim = start_shim(&crontab, &coordinator.api, &[]);
    wait_for("three attempts", || {
        Some(lines(&out)).filter(|l| l.len() >= 3)
    });
    assert_eq!(lines(&out), ["1", "2", "3"]);
    // The relaunches were asked as RETRY firings with their attempt numbers.
    coordinator.proc.wait_log("attempt=3");
}

#[test]
fn sigterm_stops_the_shim_and_forwards_sigterm_to_running_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("terminated");
    let started = dir.path().join("started");
    let crontab = dir.path().join("crontab");
    std::fs::write(
        &crontab,
        format!(
            "# cronstable: name=long-runner clusterPolicy=EveryNode\n\
             @reboot trap 'echo term >> {m}; exit 0' TERM; echo go >> {s}; while true; do sleep 0.1; done\n",
            m = marker.display(),
            s = started.display()
        ),
    )
    .unwrap();
    let coordinator = Coordinator::start(dir.path());
    let mut shim = start_shim(&crontab, &coordinator.api, &["--grace", "5s"]);
    wait_for("the job to start", || lines(&started).first().cloned());
    shim.signal(15);
    assert_eq!(shim.wait_exit(), Some(0), "shim log:\n{}", shim.log());
    assert_eq!(lines(&marker), ["term"], "the job saw SIGTERM");
}

#[test]
fn grpc_errors_carry_a_status_and_a_readable_reason() {
    use cronstable_proto::v1 as pb;
    let dir = tempfile::tempdir().unwrap();
    let coordinator = Coordinator::start(dir.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut client = pb::executor_client::ExecutorClient::connect(coordinator.api.clone())
            .await
            .unwrap();
        let unknown = client
            .should_run(pb::ShouldRunRequest {
                executor_id: "t".into(),
                job: "ghost".into(),
                scheduled_at_ms: 1,
                kind: pb::FiringKind::Scheduled as i32,
                attempt: 1,
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(unknown.code(), tonic::Code::NotFound);
        assert!(
            unknown.message().contains("\"ghost\""),
            "{}",
            unknown.message()
        );

        let bad_kind = client
            .should_run(pb::ShouldRunRequest {
                executor_id: "t".into(),
                job: "ghost".into(),
                scheduled_at_ms: 1,
                kind: 0,
                attempt: 1,
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(bad_kind.code(), tonic::Code::InvalidArgument);
        assert!(
            bad_kind.message().starts_with("kind:"),
            "{}",
            bad_kind.message()
        );

        let bad_job = client
            .register_jobs(pb::RegisterJobsRequest {
                executor_id: "t".into(),
                jobs: vec![pb::JobDefinition {
                    name: "x".into(),
                    schedule: "not a schedule".into(),
                    command: "true".into(),
                    ..Default::default()
                }],
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(bad_job.code(), tonic::Code::InvalidArgument);
        assert!(
            bad_job.message().starts_with("jobs[0].schedule:"),
            "{}",
            bad_job.message()
        );
    });
}

#[test]
fn a_yaml_job_file_runs_like_a_crontab_and_a_bad_job_does_not_stop_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("runs");
    let jobs = dir.path().join("jobs.yaml");
    std::fs::write(
        &jobs,
        format!(
            "jobs:\n\
             \x20 - name: from-yaml\n\
             \x20   command: echo \"$CRONSTABLE_JOB $GREETING\" >> {}\n\
             \x20   schedule: \"* * * * * *\"\n\
             \x20   clusterPolicy: PreferLeader\n\
             \x20   environment: {{GREETING: hi}}\n\
             \x20 - name: broken\n\
             \x20   command: \"true\"\n\
             \x20   schedule: \"not a schedule\"\n",
            out.display()
        ),
    )
    .unwrap();
    let coordinator = Coordinator::start(dir.path());
    let mut cmd = std::process::Command::new(cronstable_tests::binary("cronstable-shim"));
    cmd.arg("--jobs")
        .arg(&jobs)
        .arg("--coordinator")
        .arg(&coordinator.api);
    let shim = cronstable_tests::Proc::spawn("shim", cmd);
    wait_for("the YAML job", || lines(&out).first().cloned());
    assert_eq!(lines(&out)[0], "from-yaml hi");
    let log = shim.log();
    assert!(
        log.contains("jobs.yaml:9:") && log.contains("jobs[1].schedule"),
        "{log}"
    );
}

#[test]
fn a_leader_reboot_job_waits_for_a_coordinator_that_starts_after_the_shim() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("boot");
    let crontab = dir.path().join("crontab");
    std::fs::write(
        &crontab,
        format!(
            "# cronstable: name=migrate clusterPolicy=Leader\n@reboot echo ran >> {}\n",
            out.display()
        ),
    )
    .unwrap();
    let (api, web) = (cronstable_tests::free_port(), cronstable_tests::free_port());
    let config = dir.path().join("c.yaml");
    std::fs::write(
        &config,
        format!("api:\n  listen: 127.0.0.1:{api}\nweb:\n  listen: 127.0.0.1:{web}\n"),
    )
    .unwrap();
    let api_url = format!("http://127.0.0.1:{api}");
    // The sidecar is not up yet: the shim's registration goes unanswered, and the one-shot
    // waits for it (an @reboot job asks only once its job set is registered).
    let shim = start_shim(&crontab, &api_url, &["--ask-timeout", "300ms"]);
    shim.wait_log("cannot register with the coordinator");
    assert!(lines(&out).is_empty());
    let _coordinator = Coordinator::start_with(config, api_url, ([127, 0, 0, 1], web).into());
    wait_for("the @reboot job once the coordinator is up", || {
        lines(&out).first().cloned()
    });
    assert_eq!(lines(&out), ["ran"]);
}
