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
