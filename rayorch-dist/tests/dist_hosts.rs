//! Hosts that are not loopback: the broker, the owner and each worker in a
//! network namespace of its own, joined by veth pairs to a bridge the test
//! makes (addresses 10.X.0.0/24 of its own; no traffic leaves the machine),
//! every connection to the broker through a TCP proxy in the broker's
//! namespace that delays each direction by half the round trip (`tc netem`
//! is not available; the proxy is). The broker is secured (TLS with its own
//! CA, the job's NKeys), as `--serve-nats` runs it.
//!
//! The namespaces need root (CAP_NET_ADMIN) and iproute2's `ip`: where
//! either is missing the test fails naming it; it never passes without
//! having run. Each process is this test binary re-executed under
//! `ip netns exec` (its ignored `host_process` test, role in the
//! environment); the owner writes its outputs to a file the test checks:
//! every root exactly once, with its exact value.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{HUNG, Workers, codecs, config};
use futures::StreamExt;
use rayorch_dist::Owner;
use rayorch_dist::server::{JobAccess, Secrets};
use rayorch_runtime::{Call, Outcome, Output, Plan, expand, reduce};

rayorch_runtime::domain!(Doc);
rayorch_runtime::domain!(Page: Doc);

const JOB: &str = "hosts";

/// Doc `k` has `1 + k % 7` pages `"k/i"`; ocr appends each page's length.
fn plan() -> (Plan, Output<Vec<String>>) {
    let render = Call::map("render", |d: String| {
        let k: u64 = d.parse().unwrap_or(0);
        (0..1 + k % 7)
            .map(|i| format!("{k}/{i}"))
            .collect::<Vec<String>>()
    });
    let ocr = Call::batch("ocr", |pages: Vec<String>| {
        let ms = std::env::var("RAYORCH_HOSTS_OCR_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(5);
        std::thread::sleep(Duration::from_millis(ms));
        Ok(pages
            .into_iter()
            .map(|p| Outcome::Ok(format!("{p}#{}", p.len())))
            .collect())
    })
    .batch_size(4);
    Plan::build(|b| {
        let docs = b.source::<Doc, String>();
        let page = expand::<Page, _, _>(render.apply(docs));
        b.output(reduce(ocr.apply(page)))
    })
    .unwrap()
}

fn expected(k: u64) -> Vec<String> {
    (0..1 + k % 7)
        .map(|i| {
            let p = format!("{k}/{i}");
            format!("{p}#{}", p.len())
        })
        .collect()
}

/// The processes' side: a worker, the owner or the delay proxy, as the
/// environment says. Runs only when this binary is re-executed by the test.
#[test]
#[ignore = "a host process: run by this binary's test under `ip netns exec` with its role in the environment"]
fn host_process() {
    let Ok(role) = std::env::var("RAYORCH_HOSTS_ROLE") else {
        return;
    };
    let env = |k: &str| std::env::var(k).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    if role == "proxy" {
        let listen: SocketAddr = env("RAYORCH_HOSTS_LISTEN").parse().unwrap();
        let target: SocketAddr = env("RAYORCH_HOSTS_TARGET").parse().unwrap();
        let one_way = Duration::from_micros(env("RAYORCH_HOSTS_ONE_WAY_US").parse().unwrap());
        rt.block_on(async {
            let l = tokio::net::TcpListener::bind(listen).await.unwrap();
            rayorch_dist::server::delay_proxy(l, target, one_way).await;
        });
        return;
    }
    let secrets = Secrets::at(Path::new(&env("RAYORCH_HOSTS_SECRETS")));
    let mut cfg = config(&env("RAYORCH_HOSTS_URL"), JOB);
    cfg.security = secrets.security(JOB, if role == "owner" { "owner" } else { "worker" });
    // A worker registers before the owner's queues exist: wait for them.
    cfg.owner_wait = Duration::from_secs(60);
    let (plan, out) = plan();
    if role == "worker" {
        rt.block_on(rayorch_dist::worker(&plan, codecs(), cfg, "render:1,ocr:1"))
            .unwrap();
        return;
    }
    let mut owner = Owner::new(&plan, codecs(), cfg);
    let stats = owner.stats();
    let mut outputs: BTreeMap<u64, Option<Vec<String>>> = BTreeMap::new();
    let mut twice = Vec::new();
    let docs: u64 = env("RAYORCH_HOSTS_DOCS").parse().unwrap();
    let roots = futures::stream::iter((0..docs).map(|k| (k, k.to_string()))).boxed();
    let started = format!("{}.started", env("RAYORCH_HOSTS_OUT"));
    rt.block_on(owner.run(roots, |o| {
        if outputs.is_empty() {
            let _ = std::fs::write(&started, b"");
        }
        if outputs.insert(o.key, o.get(out).present()).is_some() {
            twice.push(o.key);
        }
    }))
    .unwrap();
    let taken_over = stats
        .redelivered_commits
        .load(std::sync::atomic::Ordering::Relaxed)
        + stats.lease_expired.load(std::sync::atomic::Ordering::Relaxed);
    let report = serde_json::json!({"outputs": outputs, "twice": twice, "taken_over": taken_over});
    std::fs::write(env("RAYORCH_HOSTS_OUT"), report.to_string()).unwrap();
}

/// Network namespaces joined by a bridge, removed on drop.
struct Net {
    bridge: String,
    names: Vec<String>,
    /// Each host's interface (inside its namespace).
    links: Vec<String>,
    subnet: u8,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("`ip` (iproute2) cannot run: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Net {
    /// One namespace per name, host `i` at 10.<subnet>.0.<i+1>.
    fn new(hosts: usize) -> Result<Net, String> {
        // Unique per test in this process and across processes.
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 10;
        let id = std::process::id() % 10_000 * 10 + n;
        let subnet = 20 + (id % 200) as u8;
        let mut net = Net {
            bridge: format!("rb{id}"),
            names: Vec::new(),
            links: Vec::new(),
            subnet,
        };
        ip(&["link", "add", &net.bridge, "type", "bridge"])?;
        ip(&["link", "set", &net.bridge, "up"])?;
        for i in 0..hosts {
            let ns = format!("rayorch-{id}-{i}");
            ip(&["netns", "add", &ns])?;
            net.names.push(ns.clone());
            let (inner, outer) = (format!("rv{id}x{i}a"), format!("rv{id}x{i}b"));
            ip(&["link", "add", &inner, "type", "veth", "peer", "name", &outer])?;
            ip(&["link", "set", &inner, "netns", &ns])?;
            ip(&["link", "set", &outer, "master", &net.bridge])?;
            ip(&["link", "set", &outer, "up"])?;
            let addr = format!("{}/24", net.addr(i));
            ip(&["-n", &ns, "addr", "add", &addr, "dev", &inner])?;
            ip(&["-n", &ns, "link", "set", &inner, "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            net.links.push(inner);
        }
        Ok(net)
    }

    /// Take host `i`'s link down (a partition: its connections stay open,
    /// nothing crosses) or bring it back.
    fn link(&self, i: usize, up: bool) {
        ip(&[
            "-n",
            &self.names[i],
            "link",
            "set",
            &self.links[i],
            if up { "up" } else { "down" },
        ])
        .unwrap();
    }

    fn addr(&self, i: usize) -> String {
        format!("10.{}.0.{}", self.subnet, i + 1)
    }

    /// `program args…` inside host `i`'s namespace.
    fn command(&self, i: usize, program: &Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.names[i]]).arg(program);
        c
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in &self.names {
            let _ = ip(&["netns", "del", ns]);
        }
        let _ = ip(&["link", "del", &self.bridge]);
    }
}

/// This test binary as a host process with `role`, in host `i`.
fn host(net: &Net, i: usize, role: &str, env: &[(&str, String)]) -> Child {
    net.command(i, &std::env::current_exe().unwrap())
        .args([
            "--exact",
            "host_process",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("RAYORCH_HOSTS_ROLE", role)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// Wait (bounded) until `addr` accepts TCP from inside host `i`.
fn wait_accepting(net: &Net, i: usize, addr: &str) {
    let start = Instant::now();
    loop {
        let ok = net
            .command(i, Path::new("python3"))
            .args([
                "-c",
                &format!(
                    "import socket; socket.create_connection(('{}', {}), 1)",
                    addr.split(':').next().unwrap(),
                    addr.rsplit(':').next().unwrap()
                ),
            ])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return;
        }
        assert!(start.elapsed() < HUNG, "{addr} never accepted from host {i}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What happens to the links while the job runs.
#[derive(Clone, Copy, PartialEq)]
enum Links {
    /// Nothing.
    Stay,
    /// Once the first root is out: the owner's link down for 2 s, then a
    /// worker's for 3 s (past the ack wait: its batches are redelivered to
    /// the other worker), each restored.
    Partition,
}

/// Host 0 the broker (nats-server on 127.0.0.1:4222, the delay proxy on its
/// address :4223), host 1 the owner, hosts 2 and 3 workers, the proxy
/// adding `rtt` per round trip: every root exactly once, exact values.
fn run_over_hosts(rtt: Duration, docs: u64, ocr_ms: u64, links: Links) {
    let net = Net::new(4).unwrap_or_else(|e| {
        panic!("this test needs network namespaces (root, CAP_NET_ADMIN, iproute2's `ip netns`) and they could not be made: {e}")
    });
    let dir = tempfile::tempdir().unwrap();
    let broker = net.addr(0);
    let secrets = Secrets::generate(
        &dir.path().join("secrets"),
        std::slice::from_ref(&broker),
        &[JobAccess::new(JOB, 2)],
    )
    .unwrap();
    let bin = rayorch_dist::server::binary().unwrap();
    let store = dir.path().join("store");
    let mut procs = Workers(vec![
        net.command(0, &bin)
            .args(["-js", "-a", "127.0.0.1", "-p", "4222", "-sd"])
            .arg(&store)
            .arg("-c")
            .arg(secrets.config())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    ]);
    let proxy = format!("{broker}:4223");
    procs.0.push(host(
        &net,
        0,
        "proxy",
        &[
            ("RAYORCH_HOSTS_LISTEN", proxy.clone()),
            ("RAYORCH_HOSTS_TARGET", "127.0.0.1:4222".into()),
            ("RAYORCH_HOSTS_ONE_WAY_US", (rtt.as_micros() / 2).to_string()),
        ],
    ));
    wait_accepting(&net, 1, &proxy);
    let out: PathBuf = dir.path().join("owner.json");
    let env = [
        ("RAYORCH_HOSTS_URL", format!("tls://{proxy}")),
        ("RAYORCH_HOSTS_SECRETS", secrets.dir().display().to_string()),
        ("RAYORCH_HOSTS_OUT", out.display().to_string()),
        ("RAYORCH_HOSTS_DOCS", docs.to_string()),
        ("RAYORCH_HOSTS_OCR_MS", ocr_ms.to_string()),
    ];
    procs.0.push(host(&net, 2, "worker", &env));
    procs.0.push(host(&net, 3, "worker", &env));
    let mut owner = Workers(vec![host(&net, 1, "owner", &env)]);
    if links == Links::Partition {
        let started = PathBuf::from(format!("{}.started", out.display()));
        let start = Instant::now();
        while !started.exists() {
            assert!(start.elapsed() < HUNG, "no root came out");
            std::thread::sleep(Duration::from_millis(20));
        }
        for (host, down) in [(1, Duration::from_secs(2)), (2, Duration::from_secs(3))] {
            net.link(host, false);
            std::thread::sleep(down);
            assert!(
                !out.exists(),
                "the run ended before host {host}'s partition was over: the test proved nothing"
            );
            net.link(host, true);
        }
    }
    let status = owner.exits().remove(0);
    assert!(status.success(), "the owner in its namespace failed: {status}");
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(report["twice"], serde_json::json!([]), "no root handed out twice");
    let outputs: BTreeMap<u64, Option<Vec<String>>> =
        serde_json::from_value(report["outputs"].clone()).unwrap();
    assert_eq!(outputs.len() as u64, docs, "every root once");
    for (k, v) in outputs {
        assert_eq!(v, Some(expected(k)), "doc {k}");
    }
    if links == Links::Partition {
        assert!(
            report["taken_over"].as_u64() >= Some(1),
            "the cut-off worker's batches were redelivered or re-leased: {report}"
        );
    }
}

#[test]
fn a_secured_job_over_namespaced_hosts_with_a_2ms_round_trip_commits_every_root_once() {
    run_over_hosts(Duration::from_millis(2), 24, 5, Links::Stay);
}

/// The owner's link, then a worker's, taken down mid-run and restored: the
/// run ends with every root once (the worker's batches redelivered to the
/// other worker; its late reports refused by the owner's fence).
#[test]
fn partitions_of_the_owner_and_a_worker_lose_nothing() {
    run_over_hosts(Duration::from_millis(2), 64, 150, Links::Partition);
}
