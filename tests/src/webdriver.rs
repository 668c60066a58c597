//! A tiny blocking W3C WebDriver client for the dashboard's browser tests: it starts Debian's
//! `chromedriver` on a free loopback port, opens one headless Chromium session, and speaks
//! JSON over HTTP/1.1 with no dependencies beyond serde_json.
//!
//! Only one session runs at a time in a test process (a process-wide lock, held for the
//! session's life): Chromium is heavy, and these tests share two cores with everything else.

// Real processes run on the real clock: std's Instant is the right one here.
#![allow(clippy::disallowed_types)]

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{PATIENCE, Proc, free_port, wait_for};

/// Where Debian's `chromium` package puts the browser.
pub const CHROMIUM: &str = "/usr/bin/chromium";
/// Where Debian's `chromium-driver` package puts the driver.
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// The W3C key under which an element reference travels.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// How long one WebDriver command may take: a navigation or a new session on a loaded
/// two-core machine can take many seconds.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(90);

static ONE_BROWSER_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A WebDriver error response, or a transport failure.
#[derive(Debug)]
pub struct WebDriverError {
    /// The HTTP status (0 for a transport failure).
    pub status: u16,
    /// The W3C error code, such as `no such element`.
    pub error: String,
    /// The driver's message.
    pub message: String,
}

impl std::fmt::Display for WebDriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.error, self.status, self.message)
    }
}

/// One headless Chromium session, and the chromedriver process behind it.
pub struct Session {
    driver_addr: SocketAddr,
    id: String,
    // Dropped after the session is deleted (fields drop in order): kills chromedriver.
    driver: Proc,
    _turn: MutexGuard<'static, ()>,
}

/// A reference to an element on the page.
#[derive(Debug, Clone)]
pub struct Element(String);

impl Session {
    /// Starts chromedriver and opens a session, or panics saying what is missing.
    pub fn new() -> Session {
        for (path, package) in [(CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")] {
            assert!(
                Path::new(path).exists(),
                "{path} is missing: the browser tests need Debian's {package} package \
                 (apt-get install -y chromium chromium-driver; tests/run.sh installs them as root)"
            );
        }
        let turn = ONE_BROWSER_AT_A_TIME
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let port = free_port();
        let mut cmd = Command::new(CHROMEDRIVER);
        cmd.arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1");
        let driver = Proc::spawn("chromedriver", cmd);
        let driver_addr: SocketAddr = ([127, 0, 0, 1], port).into();
        wait_for("chromedriver to answer /status", || {
            request(driver_addr, "GET", "/status", None)
                .ok()
                .filter(|v| v["ready"] == true)
        });
        let capabilities = json!({
            "capabilities": { "alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {
                    "binary": CHROMIUM,
                    "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                             "--window-size=1400,1000", "--disable-dev-shm-usage",
                             "--no-first-run", "--disable-extensions"],
                },
                "goog:loggingPrefs": { "browser": "ALL" },
            }}
        });
        let created =
            request(driver_addr, "POST", "/session", Some(&capabilities)).unwrap_or_else(|e| {
                panic!(
                    "chromedriver could not start {CHROMIUM}: {e}\nchromedriver log:\n{}",
                    driver.log()
                )
            });
        let id = created["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no sessionId in {created}"))
            .to_owned();
        Session {
            driver_addr,
            id,
            driver,
            _turn: turn,
        }
    }

    /// Sends a command to this session: `path` is relative to `/session/{id}`.
    pub fn command(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, WebDriverError> {
        let full = format!("/session/{}{path}", self.id);
        request(self.driver_addr, method, &full, body)
    }

    fn expect(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        self.command(method, path, body)
            .unwrap_or_else(|e| panic!("WebDriver {method} {path}: {e}"))
    }

    /// Navigates to `url` and waits for the page load.
    pub fn goto(&self, url: &str) {
        self.expect("POST", "/url", Some(&json!({ "url": url })));
    }

    /// The first element matching `css`, if any.
    pub fn try_find(&self, css: &str) -> Option<Element> {
        let body = json!({ "using": "css selector", "value": css });
        match self.command("POST", "/element", Some(&body)) {
            Ok(v) => Some(Element(v[ELEMENT_KEY].as_str()?.to_owned())),
            Err(e) if e.error == "no such element" => None,
            Err(e) => panic!("finding {css}: {e}"),
        }
    }

    /// The first element matching `css`, waiting for it to appear.
    pub fn find(&self, css: &str) -> Element {
        wait_for(&format!("an element matching {css}"), || self.try_find(css))
    }

    /// Every element matching `css` now.
    pub fn find_all(&self, css: &str) -> Vec<Element> {
        let body = json!({ "using": "css selector", "value": css });
        let v = self.expect("POST", "/elements", Some(&body));
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| Some(Element(e[ELEMENT_KEY].as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Clicks `element`.
    pub fn click(&self, element: &Element) {
        self.expect(
            "POST",
            &format!("/element/{}/click", element.0),
            Some(&json!({})),
        );
    }

    /// Clicks the first element matching `css`, waiting for it; when the page re-renders it
    /// between the find and the click (the dashboard rebuilds its tables on every refresh),
    /// finds it again rather than failing on a stale reference.
    pub fn click_css(&self, css: &str) {
        wait_for(&format!("a clickable element matching {css}"), || {
            let element = self.try_find(css)?;
            let path = format!("/element/{}/click", element.0);
            match self.command("POST", &path, Some(&json!({}))) {
                Ok(_) => Some(()),
                Err(e) if e.error == "stale element reference" => None,
                Err(e) => panic!("clicking {css}: {e}"),
            }
        });
    }

    /// Types `text` into `element`.
    pub fn send_keys(&self, element: &Element, text: &str) {
        self.expect(
            "POST",
            &format!("/element/{}/value", element.0),
            Some(&json!({ "text": text })),
        );
    }

    /// The rendered text of `element`, or `None` when it has left the page meanwhile (the
    /// dashboard re-renders its lists on every refresh).
    pub fn text_of(&self, element: &Element) -> Option<String> {
        match self.command("GET", &format!("/element/{}/text", element.0), None) {
            Ok(v) => v.as_str().map(str::to_owned),
            Err(e) if e.error == "stale element reference" => None,
            Err(e) => panic!("reading text: {e}"),
        }
    }

    /// The rendered text of the first element matching `css` (empty when there is none).
    pub fn text(&self, css: &str) -> String {
        self.try_find(css)
            .and_then(|e| self.text_of(&e))
            .unwrap_or_default()
    }

    /// Waits until the text of the first element matching `css` contains `needle`, and
    /// returns that text; on timeout, fails showing the last text seen.
    pub fn wait_for_text(&self, css: &str, needle: &str) -> String {
        let start = Instant::now();
        loop {
            let text = self.text(css);
            if text.contains(needle) {
                return text;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "timed out waiting for {css} to show {needle:?}; it shows {text:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the page, returning its
    /// result.
    pub fn execute(&self, script: &str, args: Value) -> Value {
        self.expect(
            "POST",
            "/execute/sync",
            Some(&json!({ "script": script, "args": args })),
        )
    }

    /// Saves a PNG of the viewport to `path`.
    pub fn screenshot(&self, path: &Path) {
        let v = self.expect("GET", "/screenshot", None);
        let png = base64_decode(v.as_str().expect("the screenshot is a base64 string"));
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(path, png).unwrap();
    }

    /// The browser's console entries since the last call (chromedriver's legacy
    /// `POST /session/{id}/se/log`, which drains the buffer): objects with `level` (`SEVERE`,
    /// `WARNING`, `INFO`, ...), `message`, `source` and `timestamp`.
    pub fn browser_log(&self) -> Vec<Value> {
        let v = self.expect("POST", "/se/log", Some(&json!({ "type": "browser" })));
        v.as_array().cloned().unwrap_or_default()
    }

    /// chromedriver's own log, for failure messages.
    pub fn driver_log(&self) -> String {
        self.driver.log()
    }
}

impl Default for Session {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Closes Chromium; the driver process is killed when `driver` drops right after.
        let _ = request(
            self.driver_addr,
            "DELETE",
            &format!("/session/{}", self.id),
            None,
        );
    }
}

/// Where the tests crate keeps its artifacts: `<workspace>/target/test-artifacts/`.
pub fn artifact_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join("target/test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One WebDriver HTTP exchange: a JSON body out, the response's `value` back.
fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> Result<Value, WebDriverError> {
    let transport = |e: std::io::Error| WebDriverError {
        status: 0,
        error: "transport".into(),
        message: format!("{method} {path}: {e}"),
    };
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(transport)?;
    s.set_read_timeout(Some(COMMAND_TIMEOUT))
        .map_err(transport)?;
    let payload = body.map(Value::to_string).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{payload}",
        payload.len()
    )
    .map_err(transport)?;
    // chromedriver says `Connection: close` but keeps the socket open, so reading to EOF
    // would hang until the read timeout: read the head, then exactly the framed body.
    let (status, body) = read_response(&mut BufReader::new(s)).map_err(transport)?;
    let json: Value = serde_json::from_str(&body).map_err(|e| WebDriverError {
        status,
        error: "bad response".into(),
        message: format!("{method} {path}: not JSON ({e}): {body}"),
    })?;
    let value = json.get("value").cloned().unwrap_or(Value::Null);
    if (200..300).contains(&status) {
        return Ok(value);
    }
    Err(WebDriverError {
        status,
        error: value["error"].as_str().unwrap_or("unknown").to_owned(),
        message: value["message"].as_str().unwrap_or_default().to_owned(),
    })
}

/// Reads one HTTP/1.1 response: the status line and headers, then a body framed by
/// `Content-Length` or chunked transfer encoding. Never reads past the body.
fn read_response(reader: &mut impl BufRead) -> std::io::Result<(u16, String)> {
    let bad = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
    let mut status_line = String::new();
    reader.read_line(&mut status_line)?;
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| bad(format!("bad status line {status_line:?}")))?;
    let (mut length, mut chunked) = (None, false);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Err(bad("the connection closed inside the headers".into()));
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
            if name == "content-length" {
                length = Some(
                    value
                        .parse::<usize>()
                        .map_err(|_| bad(format!("bad Content-Length {value:?}")))?,
                );
            } else if name == "transfer-encoding" && value.eq_ignore_ascii_case("chunked") {
                chunked = true;
            }
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let size = size.split(';').next().unwrap_or("").trim();
            let n = usize::from_str_radix(size, 16)
                .map_err(|_| bad(format!("bad chunk size {size:?}")))?;
            if n == 0 {
                // The (empty) trailer section ends with a blank line.
                let mut end = String::new();
                reader.read_line(&mut end)?;
                break;
            }
            let start = body.len();
            body.resize(start + n, 0);
            reader.read_exact(&mut body[start..])?;
            let mut crlf = [0u8; 2];
            reader.read_exact(&mut crlf)?;
        }
    } else if let Some(n) = length {
        body.resize(n, 0);
        reader.read_exact(&mut body)?;
    } else {
        // Neither framing: the body ends when the server closes.
        reader.read_to_end(&mut body)?;
    }
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

/// Standard base64 (the screenshot's encoding), ignoring padding and whitespace.
fn base64_decode(text: &str) -> Vec<u8> {
    let sextet = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for v in text.bytes().filter_map(sextet) {
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{base64_decode, read_response};

    #[test]
    fn decodes_base64() {
        assert_eq!(base64_decode("aGVsbG8="), b"hello");
        assert_eq!(base64_decode("aGVsbG8gd29ybGQ="), b"hello world");
        assert_eq!(base64_decode("AAEC/w=="), [0, 1, 2, 255]);
    }

    #[test]
    fn reads_exactly_the_framed_body_and_no_further() {
        // What follows the body must stay unread: chromedriver keeps the socket open.
        let mut sized: &[u8] =
            b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\nConnection: close\r\n\r\n{\"value\":1}NEXT";
        assert_eq!(
            read_response(&mut sized).unwrap(),
            (200, "{\"value\":1}".into())
        );
        assert_eq!(sized, b"NEXT");
        let mut chunked: &[u8] =
            b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\nNEXT";
        assert_eq!(
            read_response(&mut chunked).unwrap(),
            (404, "{\"a\":1}".into())
        );
        assert_eq!(chunked, b"NEXT");
    }
}
