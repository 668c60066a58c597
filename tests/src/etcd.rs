//! The one test etcd: a single-member etcd (Debian's `etcd-server`) on free loopback ports with
//! a temporary data directory, killed when dropped, plus the `EtcdConfig` the store tests point
//! at it. Optionally it serves clients over TLS with auth enabled. A missing `etcd` binary
//! panics with how to install it: the etcd tests are never optional.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant as StdInstant};

pub use cronstable_coordinator::lease::conformance::etcd_config;

use crate::free_port;

/// A single-member etcd on loopback.
pub struct Etcd {
    dir: tempfile::TempDir,
    port: u16,
    peer: u16,
    child: Mutex<Option<Child>>,
    /// Serve clients over TLS with the certificates in `dir`, and check auth with this root
    /// password.
    secure: Option<String>,
    /// Serve clients over TLS and require a client certificate signed by the CA in `dir`.
    client_certs: bool,
}

impl Etcd {
    /// Starts a fresh etcd and waits until `etcdctl endpoint health` passes.
    pub fn start() -> Etcd {
        let e = Self::planned();
        e.launch();
        e
    }

    /// Its ports and data directory, not started yet: coordinators can be pointed at
    /// [`Self::endpoint`] before etcd is up, then [`Self::launch`] starts it.
    pub fn planned() -> Etcd {
        Self::unstarted(None)
    }

    fn unstarted(secure: Option<String>) -> Etcd {
        Etcd {
            dir: tempfile::tempdir().unwrap(),
            port: free_port(),
            peer: free_port(),
            child: Mutex::new(None),
            secure,
            client_certs: false,
        }
    }

    /// Starts an etcd that serves clients over TLS and admits only clients with a certificate
    /// from its CA (`--client-cert-auth`); no password auth. The client's files are
    /// [`Self::client_files`].
    pub fn start_mtls() -> Etcd {
        let mut e = Self::unstarted(None);
        e.client_certs = true;
        make_certs(e.dir.path());
        e.launch();
        e
    }

    /// The CA, client certificate and client key a client of [`Self::start_mtls`] presents.
    pub fn client_files(&self) -> [PathBuf; 3] {
        let d = self.dir.path();
        [d.join("ca.pem"), d.join("client.pem"), d.join("client.key")]
    }

    /// Rotates every certificate: a new CA, server and client certificate, and a restart that
    /// trusts only the new CA, so a client still holding the old files is refused from then
    /// on (as after a revocation or an expiry).
    pub fn rotate_certificates(&self) {
        self.stop();
        make_certs(self.dir.path());
        self.launch();
    }

    /// Changes the root password of a [`Self::start_secure`] etcd (a rotation).
    pub fn change_root_password(&mut self, new: &str) {
        use std::io::Write;
        let mut child = self
            .etcdctl(true)
            .args(["user", "passwd", "root", "--interactive=false"])
            .stdin(Stdio::piped())
            .spawn()
            .expect("etcdctl user passwd");
        writeln!(child.stdin.take().expect("stdin"), "{new}").unwrap();
        assert!(
            child.wait().unwrap().success(),
            "etcdctl user passwd root failed"
        );
        self.secure = Some(new.to_owned());
    }

    /// How many keys start with `prefix`.
    pub fn count_keys(&self, prefix: &str) -> usize {
        let out = self
            .etcdctl(true)
            .args(["get", prefix, "--prefix", "--keys-only"])
            .stdout(Stdio::piped())
            .output()
            .expect("etcdctl get");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .count()
    }

    /// Starts an etcd that serves clients over TLS (a CA and a server certificate for
    /// 127.0.0.1 made with openssl) with auth enabled for `root` / `root_password`, and a
    /// 2-second auth token TTL so tests see tokens expire.
    pub fn start_secure(root_password: &str) -> Etcd {
        let e = Self::unstarted(Some(root_password.to_owned()));
        make_certs(e.dir.path());
        e.launch();
        for args in [
            vec!["user", "add", &format!("root:{root_password}")],
            vec!["user", "grant-role", "root", "root"],
            vec!["auth", "enable"],
        ] {
            let ok = e.etcdctl(false).args(&args).status().unwrap().success();
            assert!(ok, "etcdctl {args:?} failed");
        }
        e
    }

    /// The CA file of a secure etcd.
    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// Its client URL, `http(s)://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        let scheme = if self.secure.is_some() || self.client_certs {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    fn etcdctl(&self, with_user: bool) -> Command {
        let mut c = Command::new("etcdctl");
        c.env("ETCDCTL_API", "3")
            .args(["--endpoints", &self.endpoint()])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(pw) = &self.secure {
            c.arg("--cacert").arg(self.ca());
            if with_user {
                c.args(["--user", &format!("root:{pw}")]);
            }
        }
        if self.client_certs {
            let [ca, cert, key] = self.client_files();
            c.arg("--cacert")
                .arg(ca)
                .arg("--cert")
                .arg(cert)
                .arg("--key")
                .arg(key);
        }
        c
    }

    /// Starts it (again, after [`Self::stop`]: same ports, same data) and waits until
    /// `etcdctl endpoint health` passes.
    pub fn launch(&self) {
        let mut slot = self.child.lock().unwrap();
        assert!(slot.is_none(), "etcd is already running");
        let peer = format!("http://127.0.0.1:{}", self.peer);
        let mut cmd = Command::new("etcd");
        if self.secure.is_some() || self.client_certs {
            let d = self.dir.path();
            cmd.arg("--cert-file")
                .arg(d.join("server.pem"))
                .arg("--key-file")
                .arg(d.join("server.key"));
        }
        if self.secure.is_some() {
            cmd.args(["--auth-token", "simple", "--auth-token-ttl", "2"]);
        }
        if self.client_certs {
            cmd.arg("--client-cert-auth")
                .arg("--trusted-ca-file")
                .arg(self.dir.path().join("ca.pem"));
        }
        let child = cmd
            .args(["--name", "t", "--data-dir"])
            .arg(self.dir.path().join("data"))
            .args(["--listen-client-urls", &self.endpoint()])
            .args(["--advertise-client-urls", &self.endpoint()])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("t={peer}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|err| {
                panic!(
                    "cannot start etcd ({err}): these tests need a real etcd; install it with \
                     `apt-get install -y etcd-server etcd-client` (tests/run.sh does)"
                )
            });
        *slot = Some(child);
        drop(slot);
        let start = StdInstant::now();
        loop {
            let healthy = self
                .etcdctl(true)
                .args(["endpoint", "health"])
                .status()
                .is_ok_and(|s| s.success());
            if healthy {
                return;
            }
            assert!(
                start.elapsed() < crate::PATIENCE,
                "etcd at {} did not become healthy",
                self.endpoint()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILLs it; the data directory stays for [`Self::launch`] or [`Self::restart`].
    pub fn stop(&self) {
        if let Some(mut c) = self.child.lock().unwrap().take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Stops it and starts it again on the same ports and data.
    pub fn restart(&self) {
        self.stop();
        self.launch();
    }

    fn pid(&self) -> u32 {
        self.child.lock().unwrap().as_ref().expect("etcd runs").id()
    }

    /// Freezes it (SIGSTOP): its socket stays open but nothing answers, a client's worst case.
    pub fn freeze(&self) {
        assert!(crate::send_signal(self.pid(), 19), "kill -STOP etcd");
    }

    /// Resumes a frozen etcd (SIGCONT).
    pub fn thaw(&self) {
        assert!(crate::send_signal(self.pid(), 18), "kill -CONT etcd");
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A throwaway CA, a server certificate for 127.0.0.1 and a client certificate, made with the
/// openssl CLI (again on every call: a rotation).
fn make_certs(dir: &std::path::Path) {
    let run = |args: &[&str]| {
        let ok = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap_or_else(|e| panic!("openssl is needed for the etcd TLS tests: {e}"))
            .success();
        assert!(ok, "openssl {args:?} failed");
    };
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
         keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "1",
        "-subj",
        "/CN=cronstable-test-ca",
    ]);
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "1",
        "-extfile",
        "ext.cnf",
    ]);
    std::fs::write(
        dir.join("client-ext.cnf"),
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n\
         extendedKeyUsage=clientAuth\n",
    )
    .unwrap();
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "client.key",
        "-out",
        "client.csr",
        "-subj",
        "/CN=cronstable",
    ]);
    run(&[
        "x509",
        "-req",
        "-in",
        "client.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "client.pem",
        "-days",
        "1",
        "-extfile",
        "client-ext.cnf",
    ]);
}
