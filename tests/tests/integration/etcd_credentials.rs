//! etcd credentials that heal (issue 29, item 3): the password file and the TLS files are read
//! again on every preparation retry and every new connection, so a node started before its
//! secrets were mounted (a Kubernetes secret that arrives late, a certificate issued after
//! boot) elects once they are there, with no restart. A real coordinator against a real etcd
//! with TLS and auth.

use std::path::Path;

use cronstable_tests::etcd::Etcd;
use cronstable_tests::{Coordinator, http, wait_for_state};

fn start(dir: &Path, endpoint: &str, ca: &Path, password: &Path) -> Coordinator {
    Coordinator::start_named(
        dir,
        "coordinator",
        &format!(
            "cluster:\n  nodeName: a\n  backend: etcd\n  etcd:\n    endpoints: [\"{endpoint}\"]\n    \
             ttl: 3\n    username: root\n    password:\n      fromFile: {}\n    tls:\n      \
             ca: {}\n",
            password.display(),
            ca.display()
        ),
    )
}

#[test]
fn a_password_file_and_a_ca_that_appear_after_the_start_are_used_without_a_restart() {
    let server = Etcd::start_secure("s3cret");
    let dir = tempfile::tempdir().unwrap();
    let secrets = dir.path().join("secrets");
    let (ca, password) = (secrets.join("ca.pem"), secrets.join("password"));
    let c = start(dir.path(), &server.endpoint(), &ca, &password);
    let v = wait_for_state("the missing secrets to be reported", || {
        let v = http(c.web, "GET", "/cluster")
            .map_err(|e| e.to_string())?
            .json();
        if v["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("cannot start"))
        {
            Ok(v)
        } else {
            Err(v.to_string())
        }
    });
    assert_eq!(v["is_leader"], false, "{v}");

    // The secrets arrive (a volume mounted late, a certificate issued after boot).
    std::fs::create_dir(&secrets).unwrap();
    std::fs::copy(server.ca(), &ca).unwrap();
    std::fs::write(&password, "s3cret\n").unwrap();
    wait_for_state("the node to lead with the new secrets", || {
        let v = http(c.web, "GET", "/cluster")
            .map_err(|e| e.to_string())?
            .json();
        if v["is_leader"] == true {
            Ok(())
        } else {
            Err(v.to_string())
        }
    });
    c.proc.wait_log("store can be used now");
}

/// Copies `files` (CA, certificate, key) over the coordinator's copies in `to`: a renewal
/// written in place, as a certificate manager or a projected secret does.
fn renew(files: &[std::path::PathBuf; 3], to: &Path) {
    for (from, name) in files.iter().zip(["ca.pem", "client.pem", "client.key"]) {
        let tmp = to.join(format!("{name}.tmp"));
        std::fs::copy(from, &tmp).unwrap();
        std::fs::rename(&tmp, to.join(name)).unwrap();
    }
}

/// A per-second Leader job that appends to `dir/out`, in `dir/crontab`.
fn ticking(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let out = dir.join("out");
    let crontab = dir.join("crontab");
    std::fs::write(
        &crontab,
        format!(
            "# cronstable: name=tick clusterPolicy=Leader seconds=true\n* * * * * * echo tick >> {}\n",
            out.display()
        ),
    )
    .unwrap();
    (crontab, out)
}

/// Waits until `c` leads a quorate view.
fn leads(c: &Coordinator, what: &str) {
    wait_for_state(what, || {
        let v = http(c.web, "GET", "/cluster")
            .map_err(|e| e.to_string())?
            .json();
        (v["is_leader"] == true && v["quorate"] == true)
            .then_some(())
            .ok_or(format!("/cluster {v}"))
    });
}

/// Node a's run-ledger prefix in etcd (`state.store: etcd`).
const LEDGER: &str = "cronstable/leader/ledger/a/";

/// Waits until the job ran twice more than `runs` times and two more ledger records than
/// `keys` reached etcd; returns both counts.
fn grown(server: &Etcd, out: &Path, what: &str, runs: usize, keys: usize) -> (usize, usize) {
    wait_for_state(what, || {
        let (r, k) = (
            cronstable_tests::lines(out).len(),
            server.count_keys(LEDGER),
        );
        (r >= runs + 2 && k >= keys + 2)
            .then_some((r, k))
            .ok_or(format!("{r} runs, {k} ledger keys"))
    })
}

#[test]
fn client_certificates_rotated_in_place_are_used_by_every_etcd_client_without_a_restart() {
    let server = Etcd::start_mtls();
    let dir = tempfile::tempdir().unwrap();
    let secrets = dir.path().join("secrets");
    std::fs::create_dir(&secrets).unwrap();
    renew(&server.client_files(), &secrets);
    let (crontab, out) = ticking(dir.path());
    let c = Coordinator::start_named(
        dir.path(),
        "coordinator",
        &format!(
            "cluster:\n  nodeName: a\n  backend: etcd\n  etcd:\n    endpoints: [\"{}\"]\n    \
             ttl: 3\n    tls:\n      ca: {s}/ca.pem\n      cert: {s}/client.pem\n      key: \
             {s}/client.key\nstate:\n  store: etcd\n",
            server.endpoint(),
            s = secrets.display()
        ),
    );
    leads(&c, "the node leads through the first certificates");
    let mut shim = cronstable_tests::start_shim(&crontab, &c.api, &[]);
    let (runs, _) = grown(
        &server,
        &out,
        "the Leader job runs and its records reach etcd",
        0,
        0,
    );

    // Renewal: new CA, server and client certificates; etcd now refuses the old client
    // certificate. The files are renewed in place; nothing is restarted but etcd.
    server.rotate_certificates();
    renew(&server.client_files(), &secrets);
    leads(&c, "the node leads again through the renewed certificates");
    let keys = server.count_keys(LEDGER);
    grown(
        &server,
        &out,
        "runs go on and new ledger records reach etcd",
        runs,
        keys,
    );
    shim.signal(15);
    shim.wait_exit();
}

#[test]
fn a_password_rotated_in_place_is_used_by_the_ledger_and_the_election() {
    let mut server = Etcd::start_secure("first-password");
    let dir = tempfile::tempdir().unwrap();
    let secrets = dir.path().join("secrets");
    std::fs::create_dir(&secrets).unwrap();
    std::fs::copy(server.ca(), secrets.join("ca.pem")).unwrap();
    let password = secrets.join("password");
    std::fs::write(&password, "first-password\n").unwrap();
    let (crontab, out) = ticking(dir.path());
    let c = Coordinator::start_named(
        dir.path(),
        "coordinator",
        &format!(
            "cluster:\n  nodeName: a\n  backend: etcd\n  etcd:\n    endpoints: [\"{}\"]\n    \
             ttl: 3\n    username: root\n    password:\n      fromFile: {}\n    tls:\n      \
             ca: {}\nstate:\n  store: etcd\n",
            server.endpoint(),
            password.display(),
            secrets.join("ca.pem").display()
        ),
    );
    leads(&c, "the node leads with the first password");
    let mut shim = cronstable_tests::start_shim(&crontab, &c.api, &[]);
    let (runs, _) = grown(
        &server,
        &out,
        "the Leader job runs and its records reach etcd",
        0,
        0,
    );

    // The password is rotated in etcd and in the file; etcd's 2 s auth tokens expire, so every
    // client must authenticate again, with the new password.
    server.change_root_password("second-password");
    std::fs::write(&password, "second-password\n").unwrap();
    let keys = server.count_keys(LEDGER);
    grown(
        &server,
        &out,
        "runs go on and new ledger records reach etcd",
        runs,
        keys,
    );
    leads(&c, "the node still leads with the second password");
    shim.signal(15);
    shim.wait_exit();
}
