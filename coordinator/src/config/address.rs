//! Listen and peer addresses: `host:port`, and `unix:/path` for `api.listen`.
//!
//! The rules are the load-time address checks of the config (inventory §1.2, §1.8 rule 1):
//!
//! - `host:port` with a port in 1–65535, written in decimal digits only;
//! - an IPv6 literal must be bracketed (`[2001:db8::1]:8443`). A bare one (`::1:8443`) is an
//!   error, never split at the last colon: `2001:db8::1:8443` could be `[2001:db8::1]:8443` or
//!   `[2001:db8::1:8443]` missing its port, and guessing would fail later and opaquely, at
//!   connect time;
//! - the host is an IPv4 literal, a bracketed IPv6 literal, or a DNS name (letters, digits,
//!   `-`, `_` and `.`); it may not be empty (write `0.0.0.0:8443` to listen everywhere).
//!
//! [`HostPort`]'s `Display` is the canonical form (`[::1]:7400`); parsing it gives the same
//! value back.

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};
use std::path::PathBuf;
use std::str::FromStr;

/// A `host:port` address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostPort {
    /// The host: a DNS name, an IPv4 literal, or an IPv6 literal *without* its brackets.
    pub host: String,
    /// The port, 1–65535.
    pub port: u16,
}

/// Why an address was refused. The message says what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// No `:port` at all.
    #[error("{0:?} is not host:port (for example 127.0.0.1:7400 or [::1]:7400)")]
    NotHostPort(String),
    /// An IPv6 literal without brackets.
    #[error(
        "{0:?} looks like a bare IPv6 address: write it bracketed, as [addr]:port (for example \
         [2001:db8::1]:8443)"
    )]
    BareIpv6(String),
    /// The part before `:port` is empty.
    #[error("{0:?} has no host (write 0.0.0.0:PORT or [::]:PORT to listen on all interfaces)")]
    EmptyHost(String),
    /// The host is not a name or an IP literal.
    #[error("{0:?}: the host {1:?} is not a DNS name, an IPv4 address or a bracketed IPv6 address")]
    BadHost(String, String),
    /// The port is not a number in 1–65535.
    #[error("{0:?}: the port must be a number from 1 to 65535")]
    BadPort(String),
    /// `unix:` with no path after it.
    #[error("{0:?}: a unix socket address needs a path, as unix:/run/cronstable.sock")]
    EmptyUnixPath(String),
}

impl HostPort {
    /// A `host:port` value. The host is taken as given (not validated).
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        Self {
            host: host.into(),
            port,
        }
    }

    /// The form `std`/tokio `bind` and `connect` resolve: `host:port`, IPv6 bracketed.
    pub fn to_socket_addr_string(&self) -> String {
        self.to_string()
    }

    /// True when the host is a loopback literal (`127.0.0.0/8`, `::1`) or `localhost`.
    pub fn is_loopback(&self) -> bool {
        match self.host.parse::<IpAddr>() {
            Ok(ip) => ip.is_loopback(),
            Err(_) => {
                let name = self.host.trim_end_matches('.');
                name.eq_ignore_ascii_case("localhost")
                    || name.to_ascii_lowercase().ends_with(".localhost")
            }
        }
    }

    /// True when the host is the IPv4 or IPv6 wildcard (`0.0.0.0`, `::`): listen everywhere.
    pub fn is_unspecified(&self) -> bool {
        self.host
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_unspecified())
    }

    /// True when a listener bound to this address would accept a connection made to `peer`
    /// over loopback, on this machine: the same port, and either the very loopback address
    /// (`localhost` standing for 127.0.0.1 and ::1), or a wildcard that covers it (`0.0.0.0`
    /// every IPv4 loopback address, `::` every one). `127.0.0.11` does not accept a connection
    /// to `127.0.0.12`: three nodes on distinct loopback addresses and one port are three nodes.
    pub fn accepts_loopback(&self, peer: &HostPort) -> bool {
        if self.port != peer.port {
            return false;
        }
        let peer_ips = peer.loopback_ips();
        match self.host.parse::<IpAddr>() {
            Ok(IpAddr::V4(ip)) if ip.is_unspecified() => peer_ips.iter().any(IpAddr::is_ipv4),
            Ok(IpAddr::V6(ip)) if ip.is_unspecified() => !peer_ips.is_empty(),
            _ => {
                let mine = self.loopback_ips();
                peer_ips.iter().any(|ip| mine.contains(ip))
            }
        }
    }

    /// The loopback addresses this host names: itself for a loopback literal, 127.0.0.1 and
    /// ::1 for `localhost` (and `*.localhost`), none otherwise.
    fn loopback_ips(&self) -> Vec<IpAddr> {
        match self.host.parse::<IpAddr>() {
            Ok(ip) if ip.is_loopback() => vec![ip],
            Ok(_) => Vec::new(),
            Err(_) if self.is_loopback() => {
                vec![
                    IpAddr::from([127, 0, 0, 1]),
                    IpAddr::V6(Ipv6Addr::LOCALHOST),
                ]
            }
            Err(_) => Vec::new(),
        }
    }
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl FromStr for HostPort {
    type Err = AddressError;

    fn from_str(s: &str) -> Result<Self, AddressError> {
        let (host, port) = if let Some(rest) = s.strip_prefix('[') {
            let Some((inside, after)) = rest.split_once(']') else {
                return Err(AddressError::NotHostPort(s.to_owned()));
            };
            let Some(port) = after.strip_prefix(':') else {
                return Err(AddressError::NotHostPort(s.to_owned()));
            };
            if inside.parse::<Ipv6Addr>().is_err() {
                return Err(AddressError::BadHost(s.to_owned(), format!("[{inside}]")));
            }
            (inside, port)
        } else {
            match s.matches(':').count() {
                0 => return Err(AddressError::NotHostPort(s.to_owned())),
                1 => s.split_once(':').unwrap_or((s, "")),
                // A URL is not an address either, and is no IPv6 literal.
                _ if s.contains("://") => return Err(AddressError::NotHostPort(s.to_owned())),
                _ => return Err(AddressError::BareIpv6(s.to_owned())),
            }
        };
        if host.is_empty() {
            return Err(AddressError::EmptyHost(s.to_owned()));
        }
        if !s.starts_with('[') && !is_host_name(host) {
            return Err(AddressError::BadHost(s.to_owned(), host.to_owned()));
        }
        let port = parse_port(port).ok_or_else(|| AddressError::BadPort(s.to_owned()))?;
        Ok(Self::new(host, port))
    }
}

fn parse_port(text: &str) -> Option<u16> {
    // u16::from_str would accept "+80"; only plain digits are a port here.
    if text.is_empty() || text.len() > 5 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<u16>().ok().filter(|p| *p != 0)
}

/// A DNS name or an IPv4 literal (which is a name by these rules too), optionally fully
/// qualified with a trailing dot. Underscores are allowed: some internal resolvers hand them out.
fn is_host_name(host: &str) -> bool {
    let name = host.strip_suffix('.').unwrap_or(host);
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// Where `api.listen` listens: TCP (`host:port`) or a unix socket (`unix:/path`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ListenAddr {
    /// A TCP address.
    Tcp(HostPort),
    /// A unix socket path.
    Unix(PathBuf),
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Tcp(hp) => hp.fmt(f),
            Self::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

impl ListenAddr {
    /// Only this host can reach it: a unix socket, `localhost` or a loopback address.
    pub fn is_local(&self) -> bool {
        match self {
            Self::Unix(_) => true,
            Self::Tcp(hp) => {
                hp.host.eq_ignore_ascii_case("localhost")
                    || hp
                        .host
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback())
            }
        }
    }
}

impl FromStr for ListenAddr {
    type Err = AddressError;

    fn from_str(s: &str) -> Result<Self, AddressError> {
        match s.strip_prefix("unix:") {
            Some("") => Err(AddressError::EmptyUnixPath(s.to_owned())),
            Some(path) => Ok(Self::Unix(PathBuf::from(path))),
            None => s.parse().map(Self::Tcp),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hp(s: &str) -> Result<HostPort, AddressError> {
        s.parse()
    }

    #[test]
    fn only_sockets_and_loopback_are_local() {
        for local in [
            "127.0.0.1:7400",
            "127.0.0.2:1",
            "[::1]:7400",
            "localhost:7400",
            "unix:/s",
        ] {
            assert!(local.parse::<ListenAddr>().unwrap().is_local(), "{local}");
        }
        for open in [
            "0.0.0.0:7400",
            "[::]:7400",
            "10.0.0.5:7400",
            "cronstable-b:7400",
        ] {
            assert!(!open.parse::<ListenAddr>().unwrap().is_local(), "{open}");
        }
    }

    #[test]
    fn accepts_names_ipv4_and_bracketed_ipv6() {
        assert_eq!(hp("127.0.0.1:7400"), Ok(HostPort::new("127.0.0.1", 7400)));
        assert_eq!(
            hp("cronstable-b.internal:8443"),
            Ok(HostPort::new("cronstable-b.internal", 8443))
        );
        assert_eq!(hp("[::1]:7400"), Ok(HostPort::new("::1", 7400)));
        assert_eq!(
            hp("[2001:db8::1]:8443"),
            Ok(HostPort::new("2001:db8::1", 8443))
        );
        assert_eq!(hp("node_1.svc.:1"), Ok(HostPort::new("node_1.svc.", 1)));
        assert_eq!(hp("h:65535").map(|h| h.port), Ok(65535));
    }

    #[test]
    fn refuses_bare_ipv6_and_never_splits_at_the_last_colon() {
        for bare in ["::1:7400", "2001:db8::1:8443", "fe80::1"] {
            assert_eq!(
                hp(bare),
                Err(AddressError::BareIpv6(bare.to_owned())),
                "{bare}"
            );
        }
        let msg = hp("2001:db8::1:8443").unwrap_err().to_string();
        assert!(msg.contains("[2001:db8::1]:8443"), "{msg}");
    }

    #[test]
    fn refuses_bad_ports_hosts_and_shapes() {
        for (text, expected) in [
            ("host", AddressError::NotHostPort("host".into())),
            ("host:0", AddressError::BadPort("host:0".into())),
            ("host:65536", AddressError::BadPort("host:65536".into())),
            ("host:+80", AddressError::BadPort("host:+80".into())),
            ("host:", AddressError::BadPort("host:".into())),
            (":8443", AddressError::EmptyHost(":8443".into())),
            ("[]:1", AddressError::BadHost("[]:1".into(), "[]".into())),
            ("[::1]", AddressError::NotHostPort("[::1]".into())),
            ("[::1]8", AddressError::NotHostPort("[::1]8".into())),
            (
                "[zz]:1",
                AddressError::BadHost("[zz]:1".into(), "[zz]".into()),
            ),
            ("a b:1", AddressError::BadHost("a b:1".into(), "a b".into())),
            ("http://x:1", AddressError::NotHostPort("http://x:1".into())),
            ("a..:1", AddressError::BadHost("a..:1".into(), "a..".into())),
            ("-a:1", AddressError::BadHost("-a:1".into(), "-a".into())),
            (
                "a..b:1",
                AddressError::BadHost("a..b:1".into(), "a..b".into()),
            ),
        ] {
            assert_eq!(hp(text), Err(expected), "{text}");
        }
    }

    #[test]
    fn display_round_trips() {
        for text in [
            "127.0.0.1:7400",
            "[::1]:7400",
            "[2001:db8::1]:8443",
            "a.b:1",
        ] {
            let parsed = hp(text).unwrap();
            assert_eq!(parsed.to_string(), text);
            assert_eq!(parsed.to_socket_addr_string(), text);
            assert_eq!(hp(&parsed.to_string()), Ok(parsed));
        }
        for text in [
            "unix:/run/c.sock",
            "unix:rel.sock",
            "0.0.0.0:7400",
            "[::]:1",
        ] {
            let parsed: ListenAddr = text.parse().unwrap();
            assert_eq!(parsed.to_string(), text);
        }
        assert_eq!(
            "unix:".parse::<ListenAddr>(),
            Err(AddressError::EmptyUnixPath("unix:".into()))
        );
    }

    #[test]
    fn loopback_and_wildcard() {
        assert!(hp("127.0.0.1:1").unwrap().is_loopback());
        assert!(hp("127.3.2.1:1").unwrap().is_loopback());
        assert!(hp("[::1]:1").unwrap().is_loopback());
        assert!(hp("LocalHost:1").unwrap().is_loopback());
        assert!(!hp("10.0.0.1:1").unwrap().is_loopback());
        assert!(hp("0.0.0.0:1").unwrap().is_unspecified());
        assert!(hp("[::]:1").unwrap().is_unspecified());
        assert!(!hp("127.0.0.1:1").unwrap().is_unspecified());
    }
}
