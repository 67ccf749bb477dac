//! The object-store side of [`crate::store`] (feature `store`): clients per
//! bucket, the streaming listing and the fetch Call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use futures::stream::{self, BoxStream, StreamExt};
use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::http::HttpBuilder;
use object_store::path::Path as Key;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, ObjectStoreExt, RetryConfig};
use rayorch::{AsyncRecordStage, Cause, Outcome, RecordResult, StageContext};

/// How the store clients retry and time out (every request; the fetch Call
/// retries a whole object on top, with its own record retries).
#[derive(Clone, Debug, PartialEq)]
pub struct StoreOptions {
    /// Retries of one request after a 5xx, 429, SlowDown, timeout or cut
    /// connection (default 10).
    pub max_retries: usize,
    /// No retry starts later than this after a request's first attempt
    /// (default 3 minutes).
    pub retry_timeout: Duration,
    /// The first backoff between retries (default 100 ms; doubles, at most
    /// 15 s).
    pub backoff: Duration,
    /// One request's deadline, body included (default 60 s).
    pub request_timeout: Duration,
    /// The deadline to connect (default 5 s).
    pub connect_timeout: Duration,
    /// Settings applied after the environment's, as the store's own keys
    /// (`aws_endpoint`, `aws_access_key_id`, `google_service_account`, …):
    /// for tests and programs that hold their configuration elsewhere. The
    /// job command lines leave this empty: credentials come from the
    /// environment only.
    pub config: Vec<(String, String)>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            max_retries: 10,
            retry_timeout: Duration::from_secs(180),
            backoff: Duration::from_millis(100),
            request_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(5),
            config: Vec::new(),
        }
    }
}

/// Why a listing could not start or go on, or a client could not be made.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The input is not a URL of a store this build reads.
    #[error("{input}: {why}")]
    BadUrl {
        /// The input as given.
        input: String,
        /// What is wrong and what to write instead.
        why: String,
    },
    /// The client for a bucket or origin could not be configured.
    #[error(
        "{origin}: could not configure the store client: {cause} (credentials and endpoint come from the environment: AWS_*, AWS_ENDPOINT_URL, GOOGLE_*, AZURE_*)"
    )]
    Client {
        /// `scheme://bucket` or the HTTP origin.
        origin: String,
        /// The client's error.
        cause: String,
    },
    /// Listing failed after the client's retries.
    #[error("{input}: listing failed after {listed} objects: {cause}")]
    List {
        /// The input being listed.
        input: String,
        /// Objects it had yielded before the failure.
        listed: u64,
        /// The client's error.
        cause: String,
    },
}

/// One object to read: its URL (also its name in outputs and failure
/// lines, and the source of its [`root_key`](super::root_key)) and its size
/// when the listing said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Object {
    /// `s3://bucket/key`, `gs://…`, `az://…` or `http(s)://…`.
    pub url: Arc<str>,
    /// Bytes, from the listing (`None` for an object named directly).
    pub size: Option<u64>,
}

impl Object {
    /// The object at `url`, size unknown.
    pub fn new(url: impl Into<Arc<str>>) -> Object {
        Object {
            url: url.into(),
            size: None,
        }
    }

    /// Its root key ([`root_key`](super::root_key) of its URL).
    pub fn key(&self) -> u64 {
        super::root_key(&self.url)
    }
}

/// Where an input points: a bucket's objects, or one HTTP object.
enum Target {
    /// `scheme://bucket/rest`: `rest` is a key, a prefix or a pattern.
    Bucket {
        scheme: String,
        bucket: String,
        rest: String,
    },
    /// `http(s)://host/path`: one object.
    Http(String),
}

fn target_of(input: &str) -> Result<Target, StoreError> {
    let bad = |why: &str| StoreError::BadUrl {
        input: input.to_string(),
        why: why.to_string(),
    };
    let (scheme, rest) = input.split_once("://").ok_or_else(|| bad("not a URL"))?;
    let scheme = scheme.to_ascii_lowercase();
    match scheme.as_str() {
        "http" | "https" => {
            let url = url::Url::parse(input).map_err(|e| bad(&format!("not a valid URL ({e})")))?;
            if url.path().len() <= 1 {
                return Err(bad(
                    "an http(s) input names one object (a path after the host); listing over HTTP is not supported",
                ));
            }
            Ok(Target::Http(input.to_string()))
        }
        "s3" | "s3a" | "gs" | "az" | "azure" | "abfs" | "abfss" => {
            let (bucket, rest) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(bad(&format!("no bucket: write {scheme}://BUCKET/PREFIX")));
            }
            Ok(Target::Bucket {
                scheme,
                bucket: bucket.to_string(),
                rest: rest.to_string(),
            })
        }
        "file" => Err(bad("a file:// URL is a local path: read it as one")),
        other => Err(bad(&format!(
            "unknown scheme `{other}` (s3, gs, az, http, https or file)"
        ))),
    }
}

/// The store clients of a run, one per bucket (or HTTP origin), made on
/// first use from the environment and [`StoreOptions`], shared by the
/// listing and every fetch replica.
pub struct Stores {
    opts: StoreOptions,
    by_origin: Mutex<HashMap<String, Arc<dyn ObjectStore>>>,
}

impl std::fmt::Debug for Stores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stores")
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

/// Install rustls's process-wide provider: ring's (the one crypto library
/// in the tree; reqwest is built without a bundled provider, so every
/// reqwest client of a process with `store` needs it, the OTLP exporter's
/// too).
pub(crate) fn install_crypto() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Err: one was installed already (by this process's own TLS code).
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

impl Stores {
    /// Clients configured from the environment and `opts`.
    pub fn new(opts: StoreOptions) -> Arc<Stores> {
        install_crypto();
        Arc::new(Stores {
            opts,
            by_origin: Mutex::new(HashMap::new()),
        })
    }

    fn retry(&self) -> RetryConfig {
        RetryConfig {
            backoff: BackoffConfig {
                init_backoff: self.opts.backoff,
                max_backoff: Duration::from_secs(15).max(self.opts.backoff),
                base: 2.0,
            },
            max_retries: self.opts.max_retries,
            retry_timeout: self.opts.retry_timeout,
        }
    }

    fn client_options(&self, allow_http: bool) -> ClientOptions {
        ClientOptions::new()
            .with_timeout(self.opts.request_timeout)
            .with_connect_timeout(self.opts.connect_timeout)
            .with_allow_http(allow_http)
    }

    /// Is plain HTTP what the user configured (an `http://` endpoint)?
    fn http_endpoint(&self, keys: &[&str]) -> bool {
        let from_config = self
            .opts
            .config
            .iter()
            .rev()
            .find(|(k, _)| keys.contains(&k.to_ascii_lowercase().as_str()))
            .map(|(_, v)| v.clone());
        let from_env = || {
            keys.iter()
                .find_map(|k| std::env::var(k.to_ascii_uppercase()).ok())
        };
        from_config
            .or_else(from_env)
            .is_some_and(|v| v.to_ascii_lowercase().starts_with("http://"))
    }

    fn build(&self, scheme: &str, bucket: &str) -> Result<Arc<dyn ObjectStore>, String> {
        let origin = format!("{scheme}://{bucket}");
        // The same steps for each cloud's builder type: the environment,
        // the URL, `StoreOptions::config` on top, retries and timeouts.
        macro_rules! client {
            ($builder:ty, $http:expr) => {{
                let mut b = <$builder>::from_env().with_url(&origin);
                for (k, v) in &self.opts.config {
                    let key = k
                        .to_ascii_lowercase()
                        .parse()
                        .map_err(|e| format!("{k}: {e}"))?;
                    b = b.with_config(key, v);
                }
                let b = b
                    .with_retry(self.retry())
                    .with_client_options(self.client_options($http));
                Arc::new(b.build().map_err(|e| e.to_string())?) as Arc<dyn ObjectStore>
            }};
        }
        Ok(match scheme {
            "s3" | "s3a" => client!(
                AmazonS3Builder,
                self.http_endpoint(&["aws_endpoint_url", "aws_endpoint", "aws_endpoint_url_s3"])
            ),
            "gs" => client!(GoogleCloudStorageBuilder, false),
            _ => client!(
                MicrosoftAzureBuilder,
                self.http_endpoint(&["azure_storage_endpoint", "azure_endpoint"])
            ),
        })
    }

    /// The client for `origin` (`scheme://bucket`, or an HTTP origin), made
    /// once.
    fn client(
        &self,
        origin: &str,
        make: impl FnOnce() -> Result<Arc<dyn ObjectStore>, String>,
    ) -> Result<Arc<dyn ObjectStore>, StoreError> {
        let mut map = self.by_origin.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = map.get(origin) {
            return Ok(s.clone());
        }
        let store = make().map_err(|cause| StoreError::Client {
            origin: origin.to_string(),
            cause,
        })?;
        map.insert(origin.to_string(), store.clone());
        Ok(store)
    }

    fn bucket(&self, scheme: &str, bucket: &str) -> Result<Arc<dyn ObjectStore>, StoreError> {
        self.client(&format!("{scheme}://{bucket}"), || self.build(scheme, bucket))
    }

    /// The client and the object's key for `url` (an object, not a pattern).
    pub fn resolve(&self, url: &str) -> Result<(Arc<dyn ObjectStore>, Key), StoreError> {
        match target_of(url)? {
            Target::Bucket { scheme, bucket, rest } => Ok((self.bucket(&scheme, &bucket)?, key_of(&rest))),
            Target::Http(u) => {
                let parsed = url::Url::parse(&u).map_err(|e| StoreError::BadUrl {
                    input: u.clone(),
                    why: e.to_string(),
                })?;
                let origin = parsed[..url::Position::BeforePath].to_string();
                let key = Key::from_url_path(parsed.path()).map_err(|e| StoreError::BadUrl {
                    input: u.clone(),
                    why: e.to_string(),
                })?;
                let http = parsed.scheme() == "http";
                let store = self.client(&origin, || {
                    let b = HttpBuilder::new()
                        .with_url(origin.clone())
                        .with_retry(self.retry())
                        .with_client_options(self.client_options(http));
                    Ok(Arc::new(b.build().map_err(|e| e.to_string())?) as Arc<dyn ObjectStore>)
                })?;
                Ok((store, key))
            }
        }
    }
}

/// The store key of `key` as written in a URL: taken as it is (a listing
/// yields keys raw: `report~v2 [final].pdf`), so a listed object is fetched
/// by the key it was listed under. `Key::from` would percent-encode the
/// characters object_store avoids (`~ [ ] # % * ?` …) and ask for another
/// key; it only stands in for keys `Key::parse` refuses (control
/// characters, empty segments).
fn key_of(key: &str) -> Key {
    Key::parse(key).unwrap_or_else(|_| Key::from(key))
}

/// Where a pattern's literal part ends: the prefix to list (up to the last
/// `/` before the first `*`, `?` or `[`); `None` without such a character.
fn glob_prefix(rest: &str) -> Option<&str> {
    let first = rest.find(['*', '?', '['])?;
    Some(rest[..first].rfind('/').map_or("", |i| &rest[..=i]))
}

/// List `inputs` as a stream of objects, in order: each input's objects as
/// its store returns them (S3, GCS and Azure list in key order), page by
/// page, never the whole listing at once.
///
/// - `scheme://bucket/prefix/` (or the bucket alone): every object under the
///   prefix whose name `accept`s (the job's file types).
/// - `scheme://bucket/a/**/*.pdf`: the objects the pattern matches (`*`,
///   `?` and `[...]` stay within one `/` segment; `**` spans segments),
///   whatever `accept` says.
/// - `scheme://bucket/key`: that object, whatever its name; if there is no
///   such object but objects under `key/`, those (as a prefix). A key that
///   names neither is yielded as it is, and fails when fetched (no such
///   object): one failure line, the run goes on.
/// - `http(s)://host/path`: that object.
///
/// An `Err` ends the stream: a listing that failed after its client's
/// retries ([`StoreError::List`]), or an input that is no URL of a store.
/// An object named by two inputs is yielded twice (the engine refuses the
/// second as a key given twice): the listing keeps no set of names.
pub fn list(
    stores: Arc<Stores>,
    inputs: Vec<String>,
    accept: fn(&str) -> bool,
) -> BoxStream<'static, Result<Object, StoreError>> {
    stream::iter(inputs)
        .flat_map(move |input| {
            let stores = stores.clone();
            stream::once(async move { input_objects(&stores, input, accept).await })
                .flat_map(|r| r.unwrap_or_else(|e| stream::once(async { Err(e) }).boxed()))
        })
        .scan(false, |failed, item| {
            // Nothing after the first error.
            let out = (!*failed).then_some(item);
            *failed |= matches!(out, Some(Err(_)));
            futures::future::ready(out)
        })
        .boxed()
}

/// Check, before a run touches its outputs, that each of `inputs` can be
/// listed: its first object is read on a client and a runtime of its own
/// (the run lists again on its own). `Err` names the first input whose
/// listing fails (a missing bucket, refused credentials, an unknown
/// scheme); `Ok` says how many inputs hold at least one object.
pub fn check_listing(
    inputs: &[String],
    accept: fn(&str) -> bool,
    opts: &StoreOptions,
) -> Result<usize, StoreError> {
    if inputs.is_empty() {
        return Ok(0);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| StoreError::Client {
            origin: inputs[0].clone(),
            cause: format!("no runtime for the check: {e}"),
        })?;
    let stores = Stores::new(opts.clone());
    rt.block_on(async {
        let mut holding = 0;
        for input in inputs {
            match list(stores.clone(), vec![input.clone()], accept).next().await {
                Some(Err(e)) => return Err(e),
                Some(Ok(_)) => holding += 1,
                None => {}
            }
        }
        Ok(holding)
    })
}

/// Read the object at `url` from synchronous code (a decoder that meets a
/// document named by its URL: `rayorch_models::pdf::read_urls_with`): one
/// GET on a thread and a runtime of their own, with `stores`' clients and
/// their retries. Called on a worker thread of a multi-threaded tokio
/// runtime, it tells that runtime it blocks (`block_in_place`), so the
/// thread's other tasks (heartbeats, acks) move on meanwhile.
pub fn read_blocking(stores: &Arc<Stores>, url: &str) -> Result<bytes::Bytes, String> {
    let read = || {
        std::thread::scope(|s| {
            s.spawn(|| {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| format!("{url}: no runtime to read it: {e}"))?;
                rt.block_on(async {
                    match get(stores, url).await {
                        Ok(Ok(got)) => got
                            .bytes()
                            .await
                            .map_err(|e| format!("{url}: reading the body: {e}")),
                        Ok(Err(cause)) => Err(cause.message().to_string()),
                        Err(e) => Err(e.to_string()),
                    }
                })
            })
            .join()
            .unwrap_or_else(|_| Err(format!("{url}: the reading thread panicked")))
        })
    };
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(read)
        }
        _ => read(),
    }
}

async fn input_objects(
    stores: &Stores,
    input: String,
    accept: fn(&str) -> bool,
) -> Result<BoxStream<'static, Result<Object, StoreError>>, StoreError> {
    let (scheme, bucket, rest) = match target_of(&input)? {
        Target::Http(url) => return Ok(stream::once(async { Ok(Object::new(url)) }).boxed()),
        Target::Bucket { scheme, bucket, rest } => (scheme, bucket, rest),
    };
    let store = stores.bucket(&scheme, &bucket)?;
    let base = format!("{scheme}://{bucket}/");
    if let Some(prefix) = glob_prefix(&rest) {
        let options = glob::MatchOptions {
            case_sensitive: true,
            require_literal_separator: true,
            require_literal_leading_dot: false,
        };
        let pattern = glob::Pattern::new(&rest).map_err(|e| StoreError::BadUrl {
            input: input.clone(),
            why: format!("not a valid pattern ({e})"),
        })?;
        let keep = move |key: &str| pattern.matches_with(key, options);
        return Ok(listing(store, input, base, prefix.to_string(), keep));
    }
    if rest.is_empty() || rest.ends_with('/') {
        return Ok(listing(store, input, base, rest, accept));
    }
    match store.head(&key_of(&rest)).await {
        Ok(meta) => {
            let object = Object {
                url: format!("{base}{}", meta.location).into(),
                size: Some(meta.size),
            };
            Ok(stream::once(async { Ok(object) }).boxed())
        }
        Err(object_store::Error::NotFound { .. }) => {
            // A prefix written without its slash, or a missing object.
            let prefix = format!("{rest}/");
            let mut first = store.list(Some(&key_of(&prefix))).take(1);
            match first.next().await {
                Some(Ok(_)) => Ok(listing(store, input, base, prefix, accept)),
                None => Ok(stream::once(async move { Ok(Object::new(format!("{base}{rest}"))) }).boxed()),
                Some(Err(e)) => Err(StoreError::List {
                    input,
                    listed: 0,
                    cause: e.to_string(),
                }),
            }
        }
        Err(e) => Err(StoreError::List {
            input,
            listed: 0,
            cause: e.to_string(),
        }),
    }
}

/// The objects under `prefix` whose keys `keep` says yes to.
fn listing(
    store: Arc<dyn ObjectStore>,
    input: String,
    base: String,
    prefix: String,
    keep: impl Fn(&str) -> bool + Send + 'static,
) -> BoxStream<'static, Result<Object, StoreError>> {
    let prefix = (!prefix.is_empty()).then(|| key_of(&prefix));
    let mut listed = 0u64;
    store
        .list(prefix.as_ref())
        .filter_map(move |r| {
            let out = match r {
                Ok(meta) if keep(meta.location.as_ref()) => {
                    listed += 1;
                    Some(Ok(Object {
                        url: format!("{base}{}", meta.location).into(),
                        size: Some(meta.size),
                    }))
                }
                Ok(_) => None,
                Err(e) => Some(Err(StoreError::List {
                    input: input.clone(),
                    listed,
                    cause: e.to_string(),
                })),
            };
            futures::future::ready(out)
        })
        .boxed()
}

/// An object's bytes, read by [`Fetch`].
#[derive(Clone, Debug)]
pub struct Fetched {
    /// The object's URL.
    pub url: Arc<str>,
    /// Its bytes.
    pub bytes: bytes::Bytes,
}

/// The fetch Call's stage: one GET per object (build it with
/// `Call::new_async_records("fetch", move || Ok(Fetch::new(stores.clone())))`
/// and give it the concurrency, timeout and retries the store needs).
///
/// A missing object, or one the credentials may not read, is that record's
/// failure at once (no retry helps; the cause names the URL); any other
/// error is an attempt that failed (retried within the Call's record
/// budget, then the root fails with every attempt in its cause).
pub struct Fetch {
    stores: Arc<Stores>,
}

impl Fetch {
    /// Fetch with these clients.
    pub fn new(stores: Arc<Stores>) -> Fetch {
        Fetch { stores }
    }
}

/// GET `url`: the response, or the record's final failure (a missing or
/// refused object: no retry helps), or an attempt's error (retried).
async fn get(
    stores: &Stores,
    url: &str,
) -> Result<Result<object_store::GetResult, Cause>, rayorch::BoxError> {
    let (store, key) = match stores.resolve(url) {
        Ok(x) => x,
        Err(e) => return Ok(Err(Cause::new(e.to_string()))),
    };
    match store.get(&key).await {
        Ok(got) => Ok(Ok(got)),
        Err(object_store::Error::NotFound { .. }) => Ok(Err(Cause::new(format!("{url}: no such object")))),
        Err(
            e @ (object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. }),
        ) => Ok(Err(Cause::new(format!(
            "{url}: access refused ({e}); check the credentials in the environment"
        )))),
        Err(e) => Err(format!("{url}: {e}").into()),
    }
}

impl AsyncRecordStage for Fetch {
    type In = Object;
    type Out = Fetched;

    async fn run_one(self: Arc<Self>, object: Object, _cx: StageContext) -> RecordResult<Fetched> {
        let url = object.url;
        let got = match get(&self.stores, &url).await? {
            Ok(got) => got,
            Err(cause) => return Ok(Outcome::RecordFailure(cause)),
        };
        match got.bytes().await {
            Ok(bytes) => Ok(Outcome::Ok(Fetched { url, bytes })),
            Err(e) => Err(format!("{url}: reading the body: {e}").into()),
        }
    }
}

/// [`Fetch`] for readers that need a file to seek in (FFmpeg): each object
/// is written into a spool folder as its bytes arrive, at
/// [`spool_path`](super::spool_path), and that path is the output. The file
/// is complete when it appears under that name (it is written under a
/// temporary one and renamed); a failed attempt removes its part. The job
/// removes the file when the root ends.
pub struct FetchToFile {
    stores: Arc<Stores>,
    dir: std::path::PathBuf,
}

impl FetchToFile {
    /// Fetch with these clients into `dir` (made if missing).
    pub fn new(stores: Arc<Stores>, dir: impl Into<std::path::PathBuf>) -> FetchToFile {
        FetchToFile {
            stores,
            dir: dir.into(),
        }
    }
}

impl AsyncRecordStage for FetchToFile {
    type In = Object;
    type Out = std::path::PathBuf;

    async fn run_one(self: Arc<Self>, object: Object, _cx: StageContext) -> RecordResult<std::path::PathBuf> {
        use std::io::Write;
        let url = object.url;
        let got = match get(&self.stores, &url).await? {
            Ok(got) => got,
            Err(cause) => return Ok(Outcome::RecordFailure(cause)),
        };
        std::fs::create_dir_all(&self.dir).map_err(|e| format!("{}: {e}", self.dir.display()))?;
        let path = super::spool_path(&self.dir, &url);
        let part = path.with_file_name(format!(
            ".{}.part",
            path.file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
        ));
        let written = async {
            let mut file = std::fs::File::create(&part).map_err(|e| format!("{}: {e}", part.display()))?;
            let mut body = got.into_stream();
            while let Some(chunk) = body.next().await {
                let chunk = chunk.map_err(|e| format!("{url}: reading the body: {e}"))?;
                // Small chunks into the page cache: a blocking write is short.
                file.write_all(&chunk)
                    .map_err(|e| format!("{}: {e}", part.display()))?;
            }
            std::fs::rename(&part, &path).map_err(|e| format!("{}: {e}", path.display()))
        }
        .await;
        match written {
            Ok(()) => Ok(Outcome::Ok(path)),
            Err(e) => {
                let _ = std::fs::remove_file(&part);
                Err(e.into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_lists_from_its_literal_part() {
        assert_eq!(glob_prefix("docs/2024/**/*.pdf"), Some("docs/2024/"));
        assert_eq!(glob_prefix("docs/a*.pdf"), Some("docs/"));
        assert_eq!(glob_prefix("*.pdf"), Some(""));
        assert_eq!(glob_prefix("docs/a.pdf"), None);
    }

    #[test]
    fn inputs_name_their_mistake() {
        let why = |i: &str| match target_of(i) {
            Err(StoreError::BadUrl { why, .. }) => why,
            _ => String::new(),
        };
        assert!(why("s3:///a.pdf").contains("no bucket"));
        assert!(why("ftp://h/a.pdf").contains("unknown scheme"));
        assert!(why("https://example.org/").contains("one object"));
        assert!(why("file:///a.pdf").contains("local path"));
        assert!(matches!(
            target_of("gs://b/x/y.pdf"),
            Ok(Target::Bucket { ref scheme, ref bucket, ref rest }) if scheme == "gs" && bucket == "b" && rest == "x/y.pdf"
        ));
    }
}
