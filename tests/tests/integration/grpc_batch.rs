//! `ShouldRunBatch` against a real coordinator over gRPC: each slot is decided and recorded as
//! ShouldRun would decide it, a slot ShouldRun would refuse carries that error and its readable
//! reason without failing the others (MN-10), and an oversized batch is refused as a whole. A
//! real shim, which batches the questions of firings due at the same instant, runs 200 jobs due
//! in the same second once each.

use cronstable_proto::v1 as pb;
use cronstable_tests::{Coordinator, http, lines, start_shim, wait_for};

fn ask(job: &str, kind: i32) -> pb::ShouldRunRequest {
    pb::ShouldRunRequest {
        executor_id: "t".into(),
        job: job.into(),
        // A firing of this minute: a question minutes late is skipped (its start deadline).
        scheduled_at_ms: cronstable_tests::now_ms() / 60_000 * 60_000,
        kind,
        attempt: 1,
        ..Default::default()
    }
}

#[test]
fn each_slot_of_a_batch_is_answered_or_refused_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let coordinator = Coordinator::start(dir.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let scheduled = pb::FiringKind::Scheduled as i32;
    rt.block_on(async {
        let mut client = pb::executor_client::ExecutorClient::connect(coordinator.api.clone())
            .await
            .unwrap();
        let job = |name: &str| pb::JobDefinition {
            name: name.into(),
            schedule: "0 3 * * *".into(),
            command: "true".into(),
            ..Default::default()
        };
        client
            .register_jobs(pb::RegisterJobsRequest {
                executor_id: "t".into(),
                jobs: vec![job("alpha"), job("beta")],
                ..Default::default()
            })
            .await
            .unwrap();
        let answers = client
            .should_run_batch(pb::ShouldRunBatchRequest {
                requests: vec![
                    ask("alpha", scheduled),
                    ask("ghost", scheduled),
                    ask("beta", 0),
                    ask("beta", scheduled),
                ],
            })
            .await
            .unwrap()
            .into_inner()
            .answers;
        assert_eq!(answers.len(), 4);
        use pb::should_run_batch_answer::Result as Slot;
        let answer = |i: usize| match &answers[i].result {
            Some(Slot::Answer(a)) => a.clone(),
            other => panic!("slot {i}: {other:?}"),
        };
        let error = |i: usize| match &answers[i].result {
            Some(Slot::Error(e)) => e.clone(),
            other => panic!("slot {i}: {other:?}"),
        };
        // Election is off: both registered jobs run, each with its own firing ID.
        let (a, b) = (answer(0), answer(3));
        assert_eq!(a.verdict, pb::Verdict::Run as i32);
        assert_eq!(b.verdict, pb::Verdict::Run as i32);
        assert_ne!(a.firing_id, b.firing_id);
        let ghost = error(1);
        assert_eq!(ghost.code, tonic::Code::NotFound as i32);
        assert!(ghost.message.contains("\"ghost\""), "{}", ghost.message);
        let bad_kind = error(2);
        assert_eq!(bad_kind.code, tonic::Code::InvalidArgument as i32);
        assert!(
            bad_kind.message.starts_with("kind:"),
            "{}",
            bad_kind.message
        );

        let too_many = client
            .should_run_batch(pb::ShouldRunBatchRequest {
                requests: vec![ask("alpha", scheduled); 10_001],
            })
            .await
            .unwrap_err();
        assert_eq!(too_many.code(), tonic::Code::InvalidArgument);
        assert!(
            too_many.message().contains("at most 10000"),
            "{}",
            too_many.message()
        );
    });
    // Recorded like single questions: one decision each, none for the refused batch.
    for job in ["alpha", "beta"] {
        let body = http(coordinator.web, "GET", &format!("/jobs/{job}"))
            .unwrap()
            .json();
        let decided: Vec<_> = body["history"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["event"] == "decided")
            .collect();
        assert_eq!(decided.len(), 1, "{job}: {body}");
        assert_eq!(decided[0]["verdict"], "run");
    }
}

#[test]
fn a_shim_runs_two_hundred_jobs_due_in_the_same_second_once_each() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("runs");
    let crontab = dir.path().join("crontab");
    // Every job fires every fifth second; 200 questions land at once.
    let jobs: String = (0..200)
        .map(|i| {
            format!(
                "# cronstable: name=job-{i:03} seconds=true\n*/5 * * * * * echo \
                 \"$CRONSTABLE_JOB $CRONSTABLE_SCHEDULED_AT\" >> {}\n",
                out.display()
            )
        })
        .collect();
    std::fs::write(&crontab, jobs).unwrap();
    let coordinator = Coordinator::start(dir.path());
    let shim = start_shim(&crontab, &coordinator.api, &[]);
    // The first instant may race the shim's start on a loaded machine (its questions can go out
    // before the registration lands, and run late or be decided locally). What this test is
    // about is the steady state: once one instant has had all its runs, the next instant's 200
    // questions are all answered in time, and each job runs once.
    let full_instant = |after: Option<&str>| {
        let l = lines(&out);
        let mut instants: Vec<String> = l
            .iter()
            .filter_map(|x| x.split(' ').nth(1).map(str::to_owned))
            .collect();
        instants.dedup();
        instants
            .into_iter()
            .filter(|i| after.is_none_or(|a| i.as_str() > a))
            .find_map(|instant| {
                let of_it: Vec<String> = l
                    .iter()
                    .filter(|x| x.ends_with(&instant))
                    .cloned()
                    .collect();
                (of_it.len() >= 200).then_some((instant, of_it))
            })
    };
    let (settled, _) = wait_for("an instant with 200 runs", || full_instant(None));
    let log_from = shim.log().len();
    let (_, first) = wait_for("the next instant's 200 runs", || {
        full_instant(Some(&settled))
    });
    let mut names: Vec<&str> = first.iter().map(|l| l.split(' ').next().unwrap()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 200, "each job once: {first:?}");
    assert_eq!(first.len(), 200, "no job twice");
    let since = &shim.log()[log_from..];
    assert!(!since.contains("no answer from the coordinator"), "{since}");
}
