//! The secrets of a broker that lets no one in: its own CA and server
//! certificate, and one NATS account per job whose users are NKeys with
//! subject permissions ([`Secrets`]). `--serve-nats` writes them into the
//! job's state folder; the tests write theirs into a temporary one.
//!
//! Invariants:
//! - **One account per job.** Subjects and streams of one account are
//!   invisible to every other, so two jobs on one broker never see each
//!   other's batches, reports or payloads, whatever their names.
//! - **The owner** may do anything inside its job's account (create its
//!   streams and payload bucket, publish batches, read reports).
//! - **A worker** may only: say hello and publish claims and reports on
//!   its job's control subjects; read the stream and consumer info of, pull
//!   from and ack the work queues of the Calls its credentials name; read
//!   and write the job's payload bucket; receive replies in its inbox and
//!   the end-of-run notice. It can neither publish a batch, nor create,
//!   delete or read a work-queue stream, nor subscribe to the control
//!   subject where claims travel.
//! - **The server holds no secret of a client**: users are NKey public
//!   keys; each seed is written once, readable by its owner only (0600),
//!   next to the CA key. A folder holding every file a request needs is
//!   reused as it is (credentials handed out stay valid across a broker
//!   restart); any other is written afresh.
//!
//! Generating secrets and connecting with an NKey need the crate's `nkeys`
//! feature (the job kit's `dist` turns it on); without it a process can
//! still start a broker from secrets another process wrote.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;
#[cfg(feature = "nkeys")]
use serde_json::json;

use crate::error::DistError;
use crate::security::{Credentials, Security};

/// One job's account: its name, how many Calls its plan has, and the
/// worker users to create besides the owner.
#[derive(Clone, Debug)]
pub struct JobAccess {
    /// The job name (`DistConfig::job`).
    pub job: String,
    /// Worker users: a name (the seed file is `<name>.nk`) and the Call
    /// indices whose work queues it may pull.
    pub workers: Vec<(String, Vec<usize>)>,
}

impl JobAccess {
    /// A job whose one worker user, `worker`, may pull every Call
    /// `0..calls`.
    pub fn new(job: impl Into<String>, calls: usize) -> JobAccess {
        JobAccess {
            job: job.into(),
            workers: vec![("worker".into(), (0..calls).collect())],
        }
    }
}

/// A broker's secrets in a folder (see the module note).
#[derive(Clone, Debug)]
pub struct Secrets {
    dir: PathBuf,
}

fn sec(what: &str, e: impl std::fmt::Display) -> DistError {
    DistError::Security(format!("writing the broker's secrets: {what}: {e}"))
}

/// Write `text` to `path`, readable by this user only when `private`.
fn write(path: &Path, text: &str, private: bool) -> Result<(), DistError> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| sec(&dir.display().to_string(), e))?;
    }
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(if private { 0o600 } else { 0o644 })
        .open(path)
        .map_err(|e| sec(&path.display().to_string(), e))?;
    f.write_all(text.as_bytes())
        .map_err(|e| sec(&path.display().to_string(), e))
}

impl Secrets {
    /// The secrets for `jobs` in `dir`, for a server reached at `hosts`
    /// (names or addresses its certificate must carry besides `localhost`,
    /// `127.0.0.1` and `::1`): reused when `dir` holds them all, else
    /// generated. Needs the `nkeys` feature.
    #[cfg(feature = "nkeys")]
    pub fn generate(dir: &Path, hosts: &[String], jobs: &[JobAccess]) -> Result<Secrets, DistError> {
        let s = Secrets {
            dir: dir.to_path_buf(),
        };
        let mut need = vec![s.ca(), s.dir.join("ca-key.pem"), s.cert(), s.key(), s.config()];
        for j in jobs {
            need.push(s.seed(&j.job, "owner"));
            need.extend(j.workers.iter().map(|(w, _)| s.seed(&j.job, w)));
        }
        let hosts_file = s.dir.join("hosts");
        let same_hosts = std::fs::read_to_string(&hosts_file).is_ok_and(|h| h == hosts.join("\n"));
        if same_hosts && need.iter().all(|p| p.is_file()) {
            return Ok(s);
        }
        s.write_all(hosts, jobs)?;
        write(&hosts_file, &hosts.join("\n"), false)?;
        Ok(s)
    }

    #[cfg(feature = "nkeys")]
    fn write_all(&self, hosts: &[String], jobs: &[JobAccess]) -> Result<(), DistError> {
        use rcgen::{CertificateParams, DnType, Issuer, KeyPair};
        let ca = ca_params()?;
        let ca_key = KeyPair::generate().map_err(|e| sec("CA key", e))?;
        let ca_cert = ca.self_signed(&ca_key).map_err(|e| sec("CA", e))?;
        let mut names: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
        names.extend(hosts.iter().filter(|h| !h.is_empty()).cloned());
        names.dedup();
        let mut server = CertificateParams::new(names).map_err(|e| sec("server certificate names", e))?;
        server
            .distinguished_name
            .push(DnType::CommonName, "rayorch broker");
        server.use_authority_key_identifier_extension = true;
        // Client auth too: in a cluster each node is the others' client.
        server.extended_key_usages = vec![
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let server_key = KeyPair::generate().map_err(|e| sec("server key", e))?;
        let issuer = Issuer::new(ca, ca_key);
        let server_cert = server
            .signed_by(&server_key, &issuer)
            .map_err(|e| sec("server certificate", e))?;
        write(&self.ca(), &ca_cert.pem(), false)?;
        write(&self.dir.join("ca-key.pem"), &issuer.key().serialize_pem(), true)?;
        write(&self.cert(), &server_cert.pem(), false)?;
        write(&self.key(), &server_key.serialize_pem(), true)?;
        let mut accounts = serde_json::Map::new();
        for j in jobs {
            let mut users = Vec::new();
            let owner = nkeys::KeyPair::new_user();
            write(&self.seed(&j.job, "owner"), &seed(&owner)?, true)?;
            users.push(json!({
                "nkey": owner.public_key(),
                "permissions": {"publish": {"allow": [">"]}, "subscribe": {"allow": [">"]}},
            }));
            for (name, calls) in &j.workers {
                let kp = nkeys::KeyPair::new_user();
                write(&self.seed(&j.job, name), &seed(&kp)?, true)?;
                users.push(json!({
                    "nkey": kp.public_key(),
                    "permissions": worker_permissions(&j.job, calls),
                }));
            }
            accounts.insert(
                format!("JOB_{}", j.job),
                json!({"jetstream": "enabled", "users": users}),
            );
        }
        let config = json!({
            "tls": {
                "cert_file": self.cert(),
                "key_file": self.key(),
                "ca_file": self.ca(),
                "timeout": 5,
            },
            "accounts": accounts,
        });
        let text = serde_json::to_string_pretty(&config).map_err(|e| sec("config", e))?;
        write(&self.config(), &text, false)
    }

    /// A client certificate named `name`, signed by this CA, and its key
    /// (`client-<name>.pem`, `client-<name>-key.pem`), for a broker that
    /// verifies clients ([`Secrets::verify_clients`]; `--nats-cert`,
    /// `--nats-key`). Needs the `nkeys` feature.
    #[cfg(feature = "nkeys")]
    pub fn client_cert(&self, name: &str) -> Result<(PathBuf, PathBuf), DistError> {
        use rcgen::{CertificateParams, DnType, Issuer, KeyPair};
        let pem = std::fs::read_to_string(self.dir.join("ca-key.pem")).map_err(|e| sec("CA key", e))?;
        let ca_key = KeyPair::from_pem(&pem).map_err(|e| sec("CA key", e))?;
        let issuer = Issuer::new(ca_params()?, ca_key);
        let mut params =
            CertificateParams::new(Vec::<String>::new()).map_err(|e| sec("client certificate", e))?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.use_authority_key_identifier_extension = true;
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().map_err(|e| sec("client key", e))?;
        let cert = params
            .signed_by(&key, &issuer)
            .map_err(|e| sec("client certificate", e))?;
        let (c, k) = (
            self.dir.join(format!("client-{name}.pem")),
            self.dir.join(format!("client-{name}-key.pem")),
        );
        write(&c, &cert.pem(), false)?;
        write(&k, &key.serialize_pem(), true)?;
        Ok((c, k))
    }

    /// Make the broker require a client certificate this CA signed, on top
    /// of each user's NKey (`verify: true` in its TLS block; `on = false`
    /// makes them optional again). Takes effect when the server starts.
    pub fn verify_clients(&self, on: bool) -> Result<(), DistError> {
        let text = std::fs::read_to_string(self.config()).map_err(|e| sec("config", e))?;
        let mut config: Value = serde_json::from_str(&text).map_err(|e| sec("config", e))?;
        config["tls"]["verify"] = Value::Bool(on);
        let text = serde_json::to_string_pretty(&config).map_err(|e| sec("config", e))?;
        write(&self.config(), &text, false)
    }

    /// The secrets already in `dir` (another process generated them).
    pub fn at(dir: &Path) -> Secrets {
        Secrets {
            dir: dir.to_path_buf(),
        }
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The CA certificate clients verify the broker with (`--nats-ca`).
    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// The broker's certificate.
    pub fn cert(&self) -> PathBuf {
        self.dir.join("server.pem")
    }

    /// The broker's private key.
    pub fn key(&self) -> PathBuf {
        self.dir.join("server-key.pem")
    }

    /// The nats-server configuration (TLS and the accounts; JSON, which
    /// nats-server reads as its own format): `nats-server -js -c FILE`.
    pub fn config(&self) -> PathBuf {
        self.dir.join("nats.conf")
    }

    /// The NKey seed file of `user` (`owner`, or a worker's name) of `job`.
    pub fn seed(&self, job: &str, user: &str) -> PathBuf {
        self.dir.join("jobs").join(job).join(format!("{user}.nk"))
    }

    /// What `user` of `job` connects with: TLS against this CA, its seed.
    pub fn security(&self, job: &str, user: &str) -> Security {
        Security::tls(self.ca(), Credentials::NKeySeed(self.seed(job, user)))
    }
}

/// The CA's parameters: the same at generation and when it signs again.
#[cfg(feature = "nkeys")]
fn ca_params() -> Result<rcgen::CertificateParams, DistError> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyUsagePurpose};
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(|e| sec("CA", e))?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.distinguished_name
        .push(DnType::CommonName, "rayorch broker CA");
    ca.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    Ok(ca)
}

#[cfg(feature = "nkeys")]
fn seed(kp: &nkeys::KeyPair) -> Result<String, DistError> {
    kp.seed().map_err(|e| sec("NKey seed", e))
}

/// A worker's allow-lists in `job`'s account, pulling the queues of `calls`.
#[cfg(feature = "nkeys")]
fn worker_permissions(job: &str, calls: &[usize]) -> Value {
    let bucket = format!("rayorch_{job}");
    let objects = format!("OBJ_{bucket}");
    let mut publish = vec![
        format!("rayorch.{job}.ctl"),
        format!("rayorch.{job}.hello"),
        format!("$JS.API.STREAM.INFO.{objects}"),
        format!("$JS.API.CONSUMER.CREATE.{objects}"),
        format!("$JS.API.CONSUMER.CREATE.{objects}.>"),
        format!("$JS.API.CONSUMER.DELETE.{objects}.>"),
        format!("$JS.API.STREAM.MSG.GET.{objects}"),
        format!("$JS.API.DIRECT.GET.{objects}"),
        format!("$JS.API.DIRECT.GET.{objects}.>"),
        format!("$O.{bucket}.>"),
        format!("$JS.FC.{objects}.>"),
        format!("$JS.ACK.{objects}.>"),
    ];
    for c in calls {
        let stream = format!("RAYORCH_{job}_C{c}");
        publish.extend([
            format!("$JS.API.STREAM.INFO.{stream}"),
            format!("$JS.API.CONSUMER.INFO.{stream}.c{c}"),
            format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.c{c}"),
            format!("$JS.ACK.{stream}.>"),
        ]);
    }
    json!({
        "publish": {"allow": publish},
        "subscribe": {"allow": ["_INBOX.>", format!("rayorch.{job}.done")]},
    })
}
