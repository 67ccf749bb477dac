//! Inputs from object storage: `s3://`, `gs://`, `az://` URLs (a prefix or a
//! glob) and `http(s)://` objects, listed as a stream of roots and fetched
//! by a Call inside the pipeline.
//!
//! What every build has: [`is_url`] (which inputs are URLs) and
//! [`refuse_urls`] (the clear error of a build without the `store`
//! feature), [`root_key`], and the dataset sources a run reads as it goes
//! ([`Streamed`]): input lists ([`input_list`]), Parquet shards
//! ([`shards`], with the kit's `parquet` feature) and WebDataset tars
//! ([`tars`]), each local, or in a store with `store`. With `store`: `Stores` (one client per
//! bucket or origin, configured from the environment), `list` (the
//! streaming listing), `Object` and `Fetch` (the per-object Call), and
//! `testing` (a real S3 server and a fault proxy for tests and benches).
//!
//! Invariants:
//! - **A root's key is a function of its URL alone** ([`root_key`]: FNV-1a
//!   64 of the URL's bytes), never of the listing order: a journal resumes
//!   over the same objects however the store orders or pages them.
//! - **The listing streams**: `list` yields objects page by page as the
//!   store returns them; the run admits roots while its window has room, so
//!   the first document starts before a long listing ends, and memory holds
//!   one page of names, not the listing.
//! - **The source never reads an object.** A missing or unreadable object is
//!   that root's failure at the fetch Call (the URL in its cause); the run
//!   goes on. Only a listing that cannot start (a bad URL, a missing bucket,
//!   refused credentials) is an error before the run.
//! - **Credentials come from the environment** (`AWS_*`, with
//!   `AWS_ENDPOINT_URL` for an S3-compatible store; `GOOGLE_*`; `AZURE_*`),
//!   never from a flag that lands in shell history.
//! - Retries: every request is retried by the store client on 5xx, 429,
//!   SlowDown, timeouts and cut connections (exponential backoff,
//!   `StoreOptions`); the fetch Call retries the whole object on top of
//!   that (its record retries).

#[cfg(feature = "store")]
pub mod commits;
pub mod input_list;
#[cfg(feature = "store")]
pub mod outputs;
#[cfg(all(feature = "store", feature = "dist"))]
pub mod payloads;
#[cfg(feature = "store")]
mod remote;
mod roots;
pub mod shards;
pub mod tars;
#[cfg(feature = "store")]
pub mod testing;

pub use input_list::{InputList, ListFlags};
#[cfg(all(feature = "store", feature = "otlp"))]
pub(crate) use remote::install_crypto;
#[cfg(feature = "store")]
pub use remote::{
    Fetch, FetchToFile, Fetched, Object, StoreError, StoreOptions, Stores, check_listing, list, read_blocking,
};
pub use roots::{FromBytes, RootKind, Roots, Streamed, discover, split};

/// The URL schemes inputs may use (`file://` is read as a local path).
pub const SCHEMES: &[&str] = &[
    "s3", "s3a", "gs", "az", "azure", "abfs", "abfss", "http", "https", "file",
];

/// Is `input` a URL (`scheme://…` with a scheme of [`SCHEMES`]) rather than a
/// local path or pattern?
///
/// ```
/// use rayorch_kit::store::is_url;
/// assert!(is_url("s3://bucket/docs/**/*.pdf"));
/// assert!(is_url("HTTPS://example.org/a.pdf"));
/// assert!(!is_url("docs/*.pdf"));
/// assert!(!is_url("c:/docs"));
/// ```
pub fn is_url(input: &str) -> bool {
    input
        .split_once("://")
        .is_some_and(|(scheme, _)| SCHEMES.iter().any(|s| s.eq_ignore_ascii_case(scheme)))
}

/// A local path for a `file://` URL (`file:///data/a.pdf` → `/data/a.pdf`);
/// `None` for any other input.
///
/// ```
/// assert_eq!(rayorch_kit::store::file_url_path("file:///data/a.pdf").as_deref(), Some("/data/a.pdf"));
/// assert_eq!(rayorch_kit::store::file_url_path("s3://b/a.pdf"), None);
/// ```
pub fn file_url_path(input: &str) -> Option<String> {
    let (scheme, rest) = input.split_once("://")?;
    if !scheme.eq_ignore_ascii_case("file") {
        return None;
    }
    // `file://localhost/x` and `file:///x` both name `/x`.
    let path = rest.strip_prefix("localhost").unwrap_or(rest);
    Some(if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    })
}

/// Where a fetched object's file goes in the spool folder `dir`: its
/// [`root_key`] in hex, with the URL's extension (readers such as FFmpeg
/// guess the format from it).
///
/// ```
/// let p = rayorch_kit::store::spool_path("/tmp/spool".as_ref(), "s3://b/v/clip.MP4");
/// assert_eq!(p.extension().unwrap(), "MP4");
/// assert!(p.starts_with("/tmp/spool"));
/// ```
pub fn spool_path(dir: &std::path::Path, url: &str) -> std::path::PathBuf {
    let name = url.rsplit('/').next().unwrap_or("");
    let ext = std::path::Path::new(name)
        .extension()
        .map_or_else(String::new, |e| format!(".{}", e.to_string_lossy()));
    dir.join(format!("{:016x}{ext}", root_key(url)))
}

/// The root key of the object at `url`: FNV-1a 64 of its UTF-8 bytes. Stable
/// across builds, machines and listing orders; two URLs of one run that
/// collide (odds about n²/2⁶⁵ for n objects) are refused by the engine as
/// a key given twice, never merged.
///
/// ```
/// use rayorch_kit::store::root_key;
/// assert_eq!(root_key("s3://b/a.pdf"), root_key("s3://b/a.pdf"));
/// assert_ne!(root_key("s3://b/a.pdf"), root_key("s3://b/b.pdf"));
/// assert_eq!(root_key(""), 0xcbf2_9ce4_8422_2325);
/// ```
pub fn root_key(url: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in url.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A job's `--out` as an object-store URL (`None`: a local folder). A job
/// built without object-storage outputs (`built`: its `store` feature)
/// refuses a URL, naming the command that builds it with them (`rebuild`).
///
/// ```
/// use std::path::Path;
/// use rayorch_kit::store::output_url;
/// let rebuild = "cargo run --features store --example job --";
/// assert_eq!(output_url(Path::new("target/out"), false, rebuild), Ok(None));
/// assert_eq!(output_url(Path::new("s3://b/out/"), true, rebuild), Ok(Some("s3://b/out/".into())));
/// let e = output_url(Path::new("s3://b/out/"), false, rebuild).unwrap_err();
/// assert!(e.starts_with("--out s3://b/out/: ") && e.contains("--example job -- --out s3://b/out/"));
/// ```
pub fn output_url(out: &std::path::Path, built: bool, rebuild: &str) -> Result<Option<String>, String> {
    let out = out.to_string_lossy().into_owned();
    match (is_url(&out), built) {
        (false, _) => Ok(None),
        (true, true) => Ok(Some(out)),
        (true, false) => Err(format!(
            "--out {out}: this binary was built without object-storage outputs (the `store` feature); rebuild with `{rebuild} --out {out}`"
        )),
    }
}

/// How a job commits its outputs at a URL (`--out s3://…`): the flags
/// every job takes (ignored for a local folder).
#[derive(Clone, Debug, clap::Args)]
pub struct CommitFlags {
    /// Outputs at a URL: commit once the pending segments hold this many
    /// MiB...
    #[arg(long, default_value_t = 64, value_name = "MIB")]
    pub commit_mib: usize,
    /// ...or once this many seconds passed since the last commit (0: after
    /// every root).
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
    pub commit_every_s: f64,
    /// Outputs at a URL on a store that ignores conditional writes: accept
    /// at-least-once outputs (two runs writing at once could both commit).
    #[arg(long)]
    pub at_least_once: bool,
}

/// The error for the first URL among `inputs` in a job built without
/// object-storage inputs (`built`: the job's own `store` feature), naming
/// the command that builds it with them (`rebuild`); `Ok` when there is no
/// URL or the job has the feature. `file://` URLs are local paths.
///
/// ```
/// let inputs = ["a.pdf".to_string(), "s3://b/x/".to_string()];
/// let rebuild = "cargo run --features store --example job --";
/// assert!(rayorch_kit::store::refuse_urls(&inputs, true, rebuild).is_ok());
/// let e = rayorch_kit::store::refuse_urls(&inputs, false, rebuild).unwrap_err();
/// assert!(e.starts_with("s3://b/x/: ") && e.contains("--features store --example job -- s3://b/x/"));
/// assert!(rayorch_kit::store::refuse_urls(&["file:///a.pdf".into()], false, rebuild).is_ok());
/// ```
pub fn refuse_urls(inputs: &[String], built: bool, rebuild: &str) -> Result<(), String> {
    match inputs.iter().find(|i| is_url(i) && file_url_path(i).is_none()) {
        Some(url) if !built => Err(format!(
            "{url}: this binary was built without object-storage inputs (the `store` feature); rebuild with `{rebuild} {url}`"
        )),
        _ => Ok(()),
    }
}
