//! The watch's HTTP endpoint: plain HTTP/1.1 on one thread of its own.
//!
//! One request per connection (`Connection: close`), GET and HEAD only,
//! request heads up to 8 KiB (a longer one is read, up to 1 MiB, and refused), a 2-second read and write timeout per
//! connection: enough for Prometheus, a browser and curl, and nothing a
//! client can use to hold the run (the observer never waits on the server;
//! the server only reads the watch under its short lock).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use super::{Watch, page};

const HEAD_LIMIT: usize = 8 * 1024;
/// Bytes of an oversized head read (and dropped) before answering 431.
const DRAIN_LIMIT: usize = 1 << 20;
const TIMEOUT: Duration = Duration::from_secs(2);

/// A running endpoint; dropping it stops the server.
pub struct WatchServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl WatchServer {
    pub(super) fn start(watch: Watch, addr: SocketAddr) -> io::Result<WatchServer> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("rayorch-watch".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if stopping.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(conn) = conn {
                        // A client that misbehaves loses its own connection only.
                        let _ = answer(&watch, conn);
                    }
                }
            })?;
        Ok(WatchServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// Where it listens (the port chosen when asked for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The live page's URL.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

impl Drop for WatchServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, TIMEOUT);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Read one request head, write one response.
fn answer(watch: &Watch, mut conn: TcpStream) -> io::Result<()> {
    conn.set_read_timeout(Some(TIMEOUT))?;
    conn.set_write_timeout(Some(TIMEOUT))?;
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    let mut read = 0usize;
    loop {
        let n = conn.read(&mut buf)?;
        if n == 0 {
            break;
        }
        read += n;
        head.extend_from_slice(&buf[..n]);
        if head.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
        if read > HEAD_LIMIT {
            // Too long: read the rest of the head (bounded), keeping only
            // its last bytes, so that the answer is not lost to a reset
            // when the connection closes with bytes unread.
            head = head.split_off(head.len().saturating_sub(3));
            if read > DRAIN_LIMIT {
                break;
            }
        }
    }
    if read > HEAD_LIMIT {
        return respond(
            &mut conn,
            "431 Request Header Fields Too Large",
            "text/plain",
            b"request head too large\n",
            true,
        );
    }
    let line = head
        .split(|&b| b == b'\r' || b == b'\n')
        .next()
        .unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let body_wanted = method == "GET";
    if method != "GET" && method != "HEAD" {
        return respond(
            &mut conn,
            "405 Method Not Allowed",
            "text/plain",
            b"only GET and HEAD\n",
            true,
        );
    }
    let path = target.split('?').next().unwrap_or("");
    match path {
        "/metrics" => {
            let text = watch.metrics_text();
            respond(
                &mut conn,
                "200 OK",
                "text/plain; version=0.0.4; charset=utf-8",
                text.as_bytes(),
                body_wanted,
            )
        }
        "/api/state" => {
            let json = watch.state_json().to_string();
            respond(
                &mut conn,
                "200 OK",
                "application/json",
                json.as_bytes(),
                body_wanted,
            )
        }
        "/" | "/index.html" => respond(
            &mut conn,
            "200 OK",
            "text/html; charset=utf-8",
            page::HTML.as_bytes(),
            body_wanted,
        ),
        _ => respond(
            &mut conn,
            "404 Not Found",
            "text/plain",
            b"not found: try /, /metrics or /api/state\n",
            body_wanted,
        ),
    }
}

fn respond(conn: &mut TcpStream, status: &str, kind: &str, body: &[u8], with_body: bool) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes())?;
    if with_body {
        conn.write_all(body)?;
    }
    conn.flush()
}
