//! How an owner or a worker reaches a broker that lets no one in: TLS and
//! credentials ([`Security`], part of [`DistConfig`](crate::DistConfig)).
//!
//! Invariants:
//! - **No plain TCP unless asked for.** A `nats://` URL without a CA file
//!   is refused before any byte is sent ([`DistError::Security`]) unless
//!   [`Security::insecure`] is set; every batch, payload and credential
//!   would cross the network in the clear. A CA file or a `tls://` URL
//!   makes TLS required: a broker that does not offer it is refused.
//! - **The CA given is the only one trusted.** With [`Security::ca`] the
//!   system's roots are not consulted, so a certificate from any other CA
//!   (another job's broker, a public one) is refused. With `tls://` and no
//!   CA file the system's roots verify the broker (a managed NATS service).
//! - **Credentials never print.** `Debug` shows which kind was given, never
//!   a password or a seed; an NKey seed is read from its file at connect,
//!   not kept in the configuration.
//! - A refusal names what to give: credentials the broker refused, a
//!   certificate no trusted CA signed, a missing seed file.

use std::path::{Path, PathBuf};

use async_nats::{ConnectErrorKind, ConnectOptions};

use crate::error::DistError;

/// Who this process is to the broker.
#[derive(Clone, Default)]
pub enum Credentials {
    /// None (a broker with no authorization).
    #[default]
    None,
    /// A user and password of the broker's configuration.
    UserPassword {
        /// The user.
        user: String,
        /// The password.
        password: String,
    },
    /// A file holding an NKey seed (`SU…`): the broker holds only the
    /// public key and challenges the client to sign a nonce. Needs the
    /// `nkeys` feature: without it, connecting with one is refused.
    NKeySeed(PathBuf),
    /// A `.creds` file (a user JWT and its NKey seed, from `nsc`): operator
    /// mode deployments. Needs the `nkeys` feature, as [`Credentials::NKeySeed`].
    CredsFile(PathBuf),
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credentials::None => f.write_str("None"),
            Credentials::UserPassword { user, .. } => write!(f, "UserPassword({user}, <hidden>)"),
            Credentials::NKeySeed(p) => write!(f, "NKeySeed({})", p.display()),
            Credentials::CredsFile(p) => write!(f, "CredsFile({})", p.display()),
        }
    }
}

/// TLS and credentials of one connection to the broker.
#[derive(Clone, Debug, Default)]
pub struct Security {
    /// The CA certificate (PEM) that signed the broker's certificate: TLS
    /// is then required and only this CA is trusted.
    pub ca: Option<PathBuf>,
    /// A client certificate and its key (PEM), for a broker that verifies
    /// clients (`verify: true` in its `tls` block).
    pub client_cert: Option<(PathBuf, PathBuf)>,
    /// Who this process is.
    pub credentials: Credentials,
    /// Allow plain TCP (no TLS): only on a network nobody else reaches.
    pub insecure: bool,
}

impl Security {
    /// Plain TCP allowed, no credentials: a loopback test broker.
    pub fn insecure() -> Security {
        Security {
            insecure: true,
            ..Security::default()
        }
    }

    /// TLS verified against `ca`, with `credentials`.
    pub fn tls(ca: impl Into<PathBuf>, credentials: Credentials) -> Security {
        Security {
            ca: Some(ca.into()),
            credentials,
            ..Security::default()
        }
    }

    /// Does this configuration use TLS with `url`?
    fn uses_tls(&self, url: &str) -> bool {
        self.ca.is_some()
            || self.client_cert.is_some()
            || url.split(',').all(|u| u.trim_start().starts_with("tls://"))
    }

    /// May this configuration connect to `url`? Plain TCP needs
    /// [`Security::insecure`]; checked again at connect.
    pub fn check(&self, url: &str) -> Result<(), DistError> {
        if self.uses_tls(url) || self.insecure {
            return Ok(());
        }
        Err(DistError::Security(format!(
            "plain TCP to {url} would carry every batch, payload and credential unencrypted: give the CA certificate that signed the broker's (`Security::ca`; `--nats-ca FILE`; `--serve-nats` writes it as `ca.pem`) to connect with TLS, or allow plain TCP explicitly (`Security::insecure`; `--insecure`)"
        )))
    }

    /// The client's options for `url`, or why this configuration may not
    /// connect to it.
    pub(crate) async fn options(&self, url: &str) -> Result<ConnectOptions, DistError> {
        self.check(url)?;
        let tls = self.uses_tls(url);
        let mut o = ConnectOptions::new();
        if tls {
            o = o.require_tls(true);
        }
        if let Some(ca) = &self.ca {
            readable(ca, "the CA certificate (--nats-ca)")?;
            o = o.add_root_certificates(ca.clone());
        }
        if let Some((cert, key)) = &self.client_cert {
            readable(cert, "the client certificate (--nats-cert)")?;
            readable(key, "the client key (--nats-key)")?;
            o = o.add_client_certificate(cert.clone(), key.clone());
        }
        Ok(match &self.credentials {
            Credentials::None => o,
            Credentials::UserPassword { user, password } => {
                o.user_and_password(user.clone(), password.clone())
            }
            #[cfg(feature = "nkeys")]
            Credentials::NKeySeed(path) => {
                let seed = std::fs::read_to_string(path).map_err(|e| {
                    DistError::Security(format!(
                        "could not read the NKey seed file {} (--nats-nkey): {e}",
                        path.display()
                    ))
                })?;
                o.nkey(seed.trim().to_string())
            }
            #[cfg(feature = "nkeys")]
            Credentials::CredsFile(path) => o.credentials_file(path).await.map_err(|e| {
                DistError::Security(format!(
                    "could not read the credentials file {} (--nats-creds): {e}",
                    path.display()
                ))
            })?,
            #[cfg(not(feature = "nkeys"))]
            c @ (Credentials::NKeySeed(_) | Credentials::CredsFile(_)) => {
                return Err(DistError::Security(format!(
                    "{} needs NKey support, which this build lacks: rebuild with rayorch-dist's `nkeys` feature (`rayorch` with `--features dist,dist-nkeys`; the job kit's `dist` has it)",
                    c.kind()
                )));
            }
        })
    }

    /// Connect to `url` with `o` (this configuration's options, plus what
    /// the caller adds): a refusal by the broker says what to fix.
    pub(crate) async fn connect(
        &self,
        url: &str,
        o: ConnectOptions,
    ) -> Result<async_nats::Client, DistError> {
        // Several servers of one cluster: `tls://a:4222,tls://b:4222`.
        let servers: Vec<&str> = url.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
        o.connect(servers).await.map_err(|e| {
            // rustls's verdict on the broker's certificate reaches us as an
            // I/O error.
            let tls = e.kind() == ConnectErrorKind::Tls
                || (e.kind() == ConnectErrorKind::Io && e.to_string().to_lowercase().contains("certificate"));
            if tls {
                DistError::Security(format!(
                    "TLS with the broker at {url} failed: {e}; check that `--nats-ca` names the CA that signed the broker's certificate and that the URL's host is one the certificate names (a broker that verifies clients also needs `--nats-cert` and `--nats-key`)"
                ))
            } else if e.kind() == ConnectErrorKind::AuthorizationViolation {
                DistError::Security(format!(
                    "the broker at {url} refused this process's credentials ({}): give the owner's or a worker's credentials of this job (`--nats-nkey`, `--nats-creds` or `--nats-user`; `--serve-nats` writes them under its folder)",
                    self.credentials.kind()
                ))
            } else {
                DistError::Nats {
                    what: format!("connect to {url}"),
                    cause: e.to_string(),
                }
            }
        })
    }
}

impl Credentials {
    fn kind(&self) -> &'static str {
        match self {
            Credentials::None => "none given",
            Credentials::UserPassword { .. } => "a user and password",
            Credentials::NKeySeed(_) => "an NKey seed",
            Credentials::CredsFile(_) => "a .creds file",
        }
    }
}

fn readable(path: &Path, what: &str) -> Result<(), DistError> {
    std::fs::metadata(path)
        .map(drop)
        .map_err(|e| DistError::Security(format!("{what} {} cannot be read: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn plain_tcp_needs_insecure_and_credentials_never_print() {
        let e = Security::default()
            .options("nats://10.0.0.7:4222")
            .await
            .unwrap_err();
        assert!(
            e.to_string().contains("--insecure") && e.to_string().contains("--nats-ca"),
            "{e}"
        );
        assert!(Security::insecure().options("nats://10.0.0.7:4222").await.is_ok());
        assert!(
            Security::default()
                .options("tls://nats.example:4222")
                .await
                .is_ok()
        );
        let e = Security::tls("/nonexistent/ca.pem", Credentials::None)
            .options("nats://h:1")
            .await
            .unwrap_err();
        assert!(e.to_string().contains("/nonexistent/ca.pem"), "{e}");
        let s = Security {
            credentials: Credentials::UserPassword {
                user: "owner".into(),
                password: "hunter2".into(),
            },
            ..Security::insecure()
        };
        let shown = format!("{s:?}");
        assert!(shown.contains("owner") && !shown.contains("hunter2"), "{shown}");
    }
}
