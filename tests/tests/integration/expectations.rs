//! Expectations with real processes: a coordinator and a shim on one node (election off, so
//! the node judges its own runs). A job whose every run fails is reported `missed` once per
//! firing, on the webhook with its firing ID, in the metric and on `GET /jobs`; a job that
//! hangs is `too_long` while it still runs; a job that meets its expectation is never
//! reported. The cluster judges (who owns, the peers' reports, the store's run records) are
//! in the coordinator's unit tests (`observe::expectations::tests`).

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use cronstable_tests::{Coordinator, http, start_shim, wait_for, webhook_receiver};
use serde_json::Value;

fn crontab(dir: &Path, body: &str) -> std::path::PathBuf {
    let path = dir.join("crontab");
    std::fs::write(&path, body).unwrap();
    path
}

/// The webhook's `job_expectation` events, in order of arrival; one job's events are taken
/// without losing another's.
struct Breaches {
    rx: mpsc::Receiver<Value>,
    held: Vec<Value>,
}

impl Breaches {
    /// The next event for `job`, within a minute.
    fn next(&mut self, job: &str) -> Value {
        if let Some(i) = self.held.iter().position(|v| v["job"] == job) {
            return self.held.remove(i);
        }
        let deadline = Duration::from_secs(60);
        loop {
            let v = self
                .rx
                .recv_timeout(deadline)
                .unwrap_or_else(|_| panic!("no job_expectation for {job} within {deadline:?}"));
            if v["event"] != "job_expectation" {
                continue;
            }
            if v["job"] == job {
                return v;
            }
            self.held.push(v);
        }
    }

    /// Every event received so far, held ones included.
    fn all(mut self) -> Vec<Value> {
        self.held.extend(self.rx.try_iter());
        self.held
    }
}

/// `cronstable_job_expectation_breaches_total{job,breach}` on `/metrics`.
fn breaches(web: std::net::SocketAddr, job: &str, breach: &str) -> Option<u64> {
    let body = http(web, "GET", "/metrics").ok()?.body;
    let series =
        format!("cronstable_job_expectation_breaches_total{{breach=\"{breach}\",job=\"{job}\"}} ");
    body.lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|v| v.trim().parse().ok())
}

#[test]
fn a_failing_job_is_missed_a_hanging_one_too_long_and_a_good_one_never_reported() {
    let (url, rx) = webhook_receiver(0);
    let mut events = Breaches {
        rx,
        held: Vec::new(),
    };
    let dir = tempfile::tempdir().unwrap();
    let tab = crontab(
        dir.path(),
        "# cronstable: name=broken seconds=true expect.completeWithin=2s\n\
         */4 * * * * * exit 3\n\
         # cronstable: name=hangs seconds=true concurrencyPolicy=Forbid expect.maxDuration=2s\n\
         */4 * * * * * sleep 30\n\
         # cronstable: name=fine seconds=true expect.completeWithin=3s expect.maxDuration=3s\n\
         */4 * * * * * true\n",
    );
    let coordinator = Coordinator::start_extra(
        dir.path(),
        &format!(
            "notify:\n  webhook:\n    url: {url}\n    events: [job_expectation]\n    timeout: 2s\n"
        ),
    );
    let _shim = start_shim(&tab, &coordinator.api, &[]);

    let missed = events.next("broken");
    assert_eq!(missed["breach"], "missed", "{missed}");
    let id = missed["firing_id"].as_str().unwrap();
    assert!(!id.is_empty(), "{missed}");
    assert!(
        missed["message"]
            .as_str()
            .unwrap()
            .contains("no run succeeded"),
        "{missed}"
    );
    let long = events.next("hangs");
    assert_eq!(long["breach"], "too_long", "{long}");
    assert!(
        long["message"]
            .as_str()
            .unwrap()
            .contains("is still running"),
        "reported while it hangs: {long}"
    );
    // Every firing of `broken` is its own breach: a second one comes, with another ID.
    let again = events.next("broken");
    assert_ne!(again["firing_id"], missed["firing_id"]);

    let counted = wait_for("two missed firings counted", || {
        breaches(coordinator.web, "broken", "missed").filter(|n| *n >= 2)
    });
    assert!(counted >= 2);
    let fine = http(coordinator.web, "GET", "/jobs/fine").unwrap().body;
    assert_eq!(
        breaches(coordinator.web, "fine", "missed"),
        Some(0),
        "{fine}"
    );
    assert_eq!(
        breaches(coordinator.web, "fine", "too_long"),
        Some(0),
        "{fine}"
    );
    assert_eq!(breaches(coordinator.web, "broken", "duplicated"), Some(0));

    let jobs = http(coordinator.web, "GET", "/jobs").unwrap().json();
    let row = |name: &str| {
        jobs["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["name"] == name)
            .cloned()
            .unwrap()
    };
    let broken = row("broken");
    assert_eq!(broken["expect"]["completeWithinMs"], 2000, "{broken}");
    assert_eq!(broken["breaches"][0]["breach"], "missed", "{broken}");
    assert!(row("fine").get("breaches").is_none(), "{}", row("fine"));
    assert!(
        events.all().iter().all(|v| v["job"] != "fine"),
        "the job that meets its expectation is never reported"
    );
}
