//! Helpers for the lease-backend process tests: coordinators on the filesystem or etcd backend,
//! a real etcd on free loopback ports, and reading leadership off `GET /cluster`.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant as StdInstant};

use crate::{Coordinator, free_port, http};

/// Which store the coordinators elect through.
#[derive(Debug, Clone)]
pub enum Store {
    /// `cluster.filesystem.path`.
    Filesystem(std::path::PathBuf),
    /// `cluster.etcd.endpoints`.
    Etcd(String),
}

/// Starts a coordinator named `name` in `dir` on `store` with lease `ttl` seconds.
pub fn start_lease_node(dir: &Path, name: &str, store: &Store, ttl: u64) -> Coordinator {
    let (api_port, web_port) = (free_port(), free_port());
    let backend = match store {
        Store::Filesystem(path) => format!(
            "  backend: filesystem\n  filesystem:\n    path: {}\n    ttl: {ttl}\n",
            path.display()
        ),
        Store::Etcd(endpoint) => {
            format!("  backend: etcd\n  etcd:\n    endpoints: [\"{endpoint}\"]\n    ttl: {ttl}\n")
        }
    };
    let config = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &config,
        format!(
            "api:\n  listen: 127.0.0.1:{api_port}\nweb:\n  listen: 127.0.0.1:{web_port}\n\
             cluster:\n  nodeName: {name}\n{backend}"
        ),
    )
    .unwrap();
    Coordinator::start_with(
        config,
        format!("http://127.0.0.1:{api_port}"),
        ([127, 0, 0, 1], web_port).into(),
    )
}

/// `is_leader` from the node's `GET /cluster`; `None` when it does not answer.
pub fn is_leader(web: SocketAddr) -> Option<bool> {
    let body = http(web, "GET", "/cluster").ok()?.json();
    body["is_leader"].as_bool()
}

/// The indexes of the nodes that say they lead.
pub fn leaders(webs: &[SocketAddr]) -> Vec<usize> {
    (0..webs.len())
        .filter(|&i| is_leader(webs[i]) == Some(true))
        .collect()
}

/// Polls every 20 ms until exactly one of `webs` leads; returns it and how long it took, or
/// `None` after `limit`. Also fails if two ever lead at once.
pub fn wait_one_leader(webs: &[SocketAddr], limit: Duration) -> Option<(usize, Duration)> {
    let start = StdInstant::now();
    while start.elapsed() < limit {
        let l = leaders(webs);
        assert!(l.len() <= 1, "two leaders at once: {l:?}");
        if let [one] = l[..] {
            return Some((one, start.elapsed()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// A single-member etcd on free loopback ports with a temporary data directory, killed when
/// dropped. A missing `etcd` binary panics with how to install it.
pub struct Etcd {
    dir: tempfile::TempDir,
    port: u16,
    peer: u16,
    child: Option<Child>,
}

impl Etcd {
    /// Starts it and waits until `etcdctl endpoint health` passes.
    pub fn start() -> Etcd {
        let mut e = Self::planned();
        e.launch();
        e
    }

    /// Its ports and data directory, not started yet: coordinators can be pointed at
    /// [`Self::endpoint`] before etcd is up, then [`Self::launch`] starts it.
    pub fn planned() -> Etcd {
        Etcd {
            dir: tempfile::tempdir().unwrap(),
            port: free_port(),
            peer: free_port(),
            child: None,
        }
    }

    /// Starts a planned etcd and waits until `etcdctl endpoint health` passes.
    pub fn launch(&mut self) {
        assert!(self.child.is_none(), "etcd is already running");
        let e = self;
        let peer = format!("http://127.0.0.1:{}", e.peer);
        let child = Command::new("etcd")
            .args(["--name", "t", "--data-dir"])
            .arg(e.dir.path().join("data"))
            .args(["--listen-client-urls", &e.endpoint()])
            .args(["--advertise-client-urls", &e.endpoint()])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("t={peer}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|err| {
                panic!("cannot start etcd ({err}): apt-get install -y etcd-server etcd-client")
            });
        e.child = Some(child);
        let start = StdInstant::now();
        loop {
            let healthy = Command::new("etcdctl")
                .env("ETCDCTL_API", "3")
                .args(["--endpoints", &e.endpoint(), "endpoint", "health"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if healthy {
                return;
            }
            assert!(
                start.elapsed() < crate::PATIENCE,
                "etcd did not become healthy"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Its client URL.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Freezes it (SIGSTOP): its socket stays open but nothing answers, a client's worst case.
    pub fn freeze(&self) {
        let pid = self.child.as_ref().expect("etcd runs").id();
        assert!(crate::send_signal(pid, 19), "kill -STOP etcd");
    }

    /// Resumes a frozen etcd (SIGCONT).
    pub fn thaw(&self) {
        let pid = self.child.as_ref().expect("etcd runs").id();
        assert!(crate::send_signal(pid, 18), "kill -CONT etcd");
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
