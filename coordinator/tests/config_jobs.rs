//! The `jobs:` config key: a job file the coordinator parses and registers itself (issue 8).
//! Every problem is a config error naming the key and the file.

use cronstable_coordinator::config::{self, JobFileFormat};

fn write(dir: &std::path::Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn a_system_crontab_named_in_the_config_is_loaded_with_its_annotations() {
    let dir = tempfile::tempdir().unwrap();
    let cron = write(
        dir.path(),
        "app",
        "# cronstable: name=charge-cards clusterPolicy=Leader\n\
         0 * * * * app cronstable-gate charge-cards -- ./charge.sh\n",
    );
    let text = format!("jobs:\n  systemCrontab: {cron}\n");
    let loaded = config::parse(&text, "c.yaml").unwrap_or_else(|e| panic!("{e}"));
    let jobs = loaded.config.jobs.expect("jobs: loaded");
    assert_eq!(jobs.format, JobFileFormat::SystemCrontab);
    assert_eq!(jobs.executor_id(), format!("config:{cron}"));
    assert_eq!(jobs.specs.len(), 1);
    assert_eq!(jobs.specs[0].name, "charge-cards");
}

#[test]
fn a_job_file_that_does_not_parse_is_an_error_naming_the_key_and_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let cron = write(
        dir.path(),
        "app",
        "0 * * * * /bin/true\n99 * * * * /bin/true\n",
    );
    let text = format!("api:\n  listen: 127.0.0.1:7400\njobs:\n  crontab: {cron}\n");
    let errors = config::parse(&text, "c.yaml").unwrap_err().to_string();
    assert!(errors.contains("c.yaml:4"), "{errors}");
    assert!(errors.contains("jobs.crontab"), "{errors}");
    assert!(errors.contains(&format!("{cron}:2")), "{errors}");
    // validate-config reports the same thing and says invalid.
    let cfg = write(dir.path(), "c.yaml", &text);
    let (ok, report) = config::validate_report(std::path::Path::new(&cfg));
    assert!(!ok && report.contains("jobs.crontab"), "{report}");
}

#[test]
fn a_missing_job_file_or_a_wrong_number_of_keys_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.yaml").display().to_string();
    let errors = config::parse(&format!("jobs:\n  jobFile: {missing}\n"), "c.yaml")
        .unwrap_err()
        .to_string();
    assert!(
        errors.contains("jobs.jobFile") && errors.contains("cannot read the job file"),
        "{errors}"
    );
    let errors = config::parse("jobs: {}\n", "c.yaml")
        .unwrap_err()
        .to_string();
    assert!(
        errors.contains("one of crontab, systemCrontab or jobFile"),
        "{errors}"
    );
    let cron = write(dir.path(), "app", "0 * * * * /bin/true\n");
    let both = format!("jobs:\n  crontab: {cron}\n  jobFile: {cron}\n");
    let errors = config::parse(&both, "c.yaml").unwrap_err().to_string();
    assert!(errors.contains("only one of"), "{errors}");
    let errors = config::parse("jobs:\n  crontabs: x\n", "c.yaml")
        .unwrap_err()
        .to_string();
    assert!(errors.contains("jobs.crontabs"), "{errors}");
}

#[test]
fn a_job_that_can_never_fire_is_a_warning_naming_the_key_and_its_line_and_still_loads() {
    let dir = tempfile::tempdir().unwrap();
    let cron = write(
        dir.path(),
        "app",
        "0 * * * * app /bin/true\n# cronstable: name=parked\n0 0 31 2 * app /bin/true\n",
    );
    let text = format!("api:\n  listen: 127.0.0.1:7400\njobs:\n  systemCrontab: {cron}\n");
    let loaded = config::parse(&text, "c.yaml").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(loaded.config.jobs.expect("jobs: loaded").specs.len(), 2);
    let [warning] = &loaded.warnings[..] else {
        panic!("one warning: {:?}", loaded.warnings)
    };
    assert!(
        warning.contains("c.yaml:4")
            && warning.contains("jobs.systemCrontab")
            && warning.contains(&format!("{cron}:3: job \"parked\""))
            && warning.contains("never fires"),
        "{warning}"
    );
}
