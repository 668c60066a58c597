//! One live executor per job per node (issue 28, item 1): a second shim started with the same
//! job file, and so the same executor id, is refused at registration, naming the process that
//! holds the jobs, runs nothing while that process lives, and takes over once it is gone. Real
//! coordinator and shim processes on loopback; each run records its instant and the shim that
//! launched it (`$PPID`, the shim the job's `sh -c` is a child of).

use std::collections::BTreeMap;
use std::path::Path;

use cronstable_tests::{Coordinator, lines, start_shim, wait_for, wait_for_state};

/// Each recorded run as (scheduled instant, pid of the shim that ran it).
fn runs(out: &Path) -> Vec<(String, u32)> {
    lines(out)
        .iter()
        .filter_map(|l| {
            let (at, pid) = l.split_once(' ')?;
            Some((at.to_owned(), pid.parse().ok()?))
        })
        .collect()
}

/// Every instant that ran more than once, with the shims that ran it.
fn doubled(out: &Path) -> BTreeMap<String, Vec<u32>> {
    let mut by_instant: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for (at, pid) in runs(out) {
        by_instant.entry(at).or_default().push(pid);
    }
    by_instant.retain(|_, pids| pids.len() > 1);
    by_instant
}

#[test]
fn a_second_shim_for_the_same_jobs_is_refused_and_takes_over_when_the_first_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("runs");
    let crontab = dir.path().join("crontab");
    std::fs::write(
        &crontab,
        format!(
            "# cronstable: name=tick clusterPolicy=Leader seconds=true\n\
             * * * * * * echo \"$CRONSTABLE_SCHEDULED_AT $PPID\" >> {}\n",
            out.display()
        ),
    )
    .unwrap();
    let coordinator = Coordinator::start(dir.path());
    let first = start_shim(&crontab, &coordinator.api, &[]);
    wait_for("the first shim's runs", || {
        Some(()).filter(|()| runs(&out).iter().any(|(_, pid)| *pid == first.pid()))
    });

    // Same job file, same default executor id: the coordinator answers its registration.
    let mut second = start_shim(&crontab, &coordinator.api, &[]);
    wait_for("the second shim's registration to be answered", || {
        let log = second.log();
        Some(()).filter(|()| {
            log.contains("registered with the coordinator") || log.contains("already running")
        })
    });
    let seen = runs(&out).len();
    wait_for("six more runs with both shims up", || {
        Some(()).filter(|()| runs(&out).len() >= seen + 6)
    });
    assert_eq!(
        doubled(&out),
        BTreeMap::new(),
        "with two shims of one executor on one node, instants ran twice (first shim pid {}, second {})",
        first.pid(),
        second.pid()
    );
    assert!(
        runs(&out).iter().all(|(_, pid)| *pid == first.pid()),
        "only the first shim runs while it lives: {:?}",
        runs(&out)
    );
    // The refusal names the process that holds the jobs.
    let log = second.log();
    assert!(
        log.contains(&format!("pid {}", first.pid())),
        "the second shim's log names the first shim's pid {}:\n{log}",
        first.pid()
    );
    coordinator.proc.wait_log("refused a second instance");

    // The first one dies: its Watch stream closes and the second takes over.
    let mut first = first;
    first.signal(9);
    first.wait_exit();
    wait_for_state("the second shim to run the job", || {
        let r = runs(&out);
        if r.iter().filter(|(_, pid)| *pid == second.pid()).count() >= 3 {
            Ok(())
        } else {
            Err(format!("{} runs, last {:?}", r.len(), r.last()))
        }
    });
    second.wait_log("runs this executor's jobs now");
    coordinator.proc.wait_log("takes over executor");
    assert_eq!(doubled(&out), BTreeMap::new(), "no instant ran twice");
    second.signal(15);
    second.wait_exit();
}

#[test]
fn the_grpc_api_decides_a_job_only_for_its_executors_live_instance() {
    use cronstable_proto::v1 as pb;
    let dir = tempfile::tempdir().unwrap();
    let coordinator = Coordinator::start(dir.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut client = pb::executor_client::ExecutorClient::connect(coordinator.api.clone())
            .await
            .unwrap();
        let register = |instance: &str, pid: u32| pb::RegisterJobsRequest {
            executor_id: "billing".into(),
            jobs: vec![pb::JobDefinition {
                name: "charge".into(),
                schedule: "0 3 * * *".into(),
                command: "true".into(),
                ..Default::default()
            }],
            instance_id: instance.into(),
            pid,
        };
        let ask = |executor: &str, instance: &str| pb::ShouldRunRequest {
            executor_id: executor.into(),
            job: "charge".into(),
            scheduled_at_ms: 60_000,
            kind: pb::FiringKind::Scheduled as i32,
            attempt: 1,
            instance_id: instance.into(),
        };
        client.register_jobs(register("first", 4101)).await.unwrap();
        client.should_run(ask("billing", "first")).await.unwrap();

        let second = client
            .register_jobs(register("second", 4102))
            .await
            .unwrap_err();
        assert_eq!(second.code(), tonic::Code::FailedPrecondition);
        assert!(
            second.message().contains("first (pid 4101)"),
            "{}",
            second.message()
        );
        let asked = client
            .should_run(ask("billing", "second"))
            .await
            .unwrap_err();
        assert_eq!(asked.code(), tonic::Code::FailedPrecondition, "{asked:?}");
        let watched = client
            .watch(pb::WatchRequest {
                executor_id: "billing".into(),
                instance_id: "second".into(),
            })
            .await
            .unwrap_err();
        assert_eq!(watched.code(), tonic::Code::FailedPrecondition);

        let other = client.should_run(ask("payroll", "x")).await.unwrap_err();
        assert_eq!(other.code(), tonic::Code::FailedPrecondition);
        assert!(
            other
                .message()
                .contains("registered on this node by executor \"billing\""),
            "{}",
            other.message()
        );
        // The holder still gets its answers.
        client.should_run(ask("billing", "first")).await.unwrap();
    });
}
