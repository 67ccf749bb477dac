//! The exporter: `tracing` spans to OpenTelemetry to OTLP/HTTP (see the
//! module note above for its invariants).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider, SpanData, SpanExporter, SpanProcessor,
};
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;

use super::OtlpError;

/// How spans are queued and posted.
#[derive(Clone, Debug)]
pub struct OtlpConfig {
    /// The collector: `http(s)://HOST:PORT`, with or without `/v1/traces`.
    pub endpoint: String,
    /// The `service.name` resource attribute (the job's name).
    pub service: String,
    /// Spans held in memory before new ones are dropped.
    pub queue: usize,
    /// The longest a span waits before it is posted.
    pub delay: Duration,
    /// The most spans in one request.
    pub batch: usize,
    /// One request's timeout.
    pub timeout: Duration,
}

impl OtlpConfig {
    /// Defaults for a data-prep run: a 64 Ki-span queue, posted every
    /// second in requests of at most 4,096 spans, 10 s per request.
    pub fn new(endpoint: impl Into<String>, service: impl Into<String>) -> OtlpConfig {
        OtlpConfig {
            endpoint: endpoint.into(),
            service: service.into(),
            queue: 1 << 16,
            delay: Duration::from_secs(1),
            batch: 4096,
            timeout: Duration::from_secs(10),
        }
    }

    /// The traces URL: the endpoint, with `/v1/traces` when it names no path.
    pub fn traces_url(&self) -> Result<String, OtlpError> {
        let url = self.endpoint.trim_end_matches('/');
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"))
            .filter(|r| !r.is_empty() && !r.starts_with('/'))
            .ok_or_else(|| OtlpError::Url {
                url: self.endpoint.clone(),
            })?;
        Ok(if rest.contains('/') {
            url.to_string()
        } else {
            format!("{url}/v1/traces")
        })
    }
}

/// What happened to a run's spans, from [`Otlp::shutdown`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OtlpReport {
    /// The traces URL.
    pub url: String,
    /// Spans that ended (and were offered to the queue).
    pub ended: u64,
    /// Spans the collector accepted.
    pub exported: u64,
    /// Spans in requests that failed.
    pub failed: u64,
    /// Spans dropped because the queue was full (or never posted).
    pub dropped: u64,
    /// The last export error, if any.
    pub last_error: Option<String>,
}

impl OtlpReport {
    /// Every span that ended reached the collector.
    pub fn complete(&self) -> bool {
        self.exported == self.ended
    }
}

impl fmt::Display for OtlpReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "traces to {}: {} of {} spans exported",
            self.url, self.exported, self.ended
        )?;
        if self.failed > 0 {
            write!(f, ", {} in failed requests", self.failed)?;
        }
        if self.dropped > 0 {
            write!(
                f,
                ", {} dropped (queue full: raise OTEL_BSP_MAX_QUEUE_SIZE)",
                self.dropped
            )?;
        }
        if let Some(e) = &self.last_error {
            write!(f, "; last error: {e}")?;
        }
        Ok(())
    }
}

#[derive(Debug, Default)]
struct Counts {
    ended: AtomicU64,
    exported: AtomicU64,
    failed: AtomicU64,
    last_error: Mutex<Option<String>>,
}

/// The OTLP exporter, counting what it posts.
#[derive(Debug)]
struct Counted {
    inner: opentelemetry_otlp::SpanExporter,
    counts: Arc<Counts>,
}

impl SpanExporter for Counted {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len() as u64;
        let r = self.inner.export(batch).await;
        match &r {
            Ok(()) => self.counts.exported.fetch_add(n, Ordering::Relaxed),
            Err(e) => {
                *self.counts.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                self.counts.failed.fetch_add(n, Ordering::Relaxed)
            }
        };
        r
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// Counts spans as they end, ahead of the batch processor's queue.
#[derive(Debug)]
struct Ended(Arc<Counts>);

impl SpanProcessor for Ended {
    fn on_start(&self, _: &mut opentelemetry_sdk::trace::Span, _: &opentelemetry::Context) {}

    fn on_end(&self, _: SpanData) {
        self.0.ended.fetch_add(1, Ordering::Relaxed);
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _: Duration) -> OTelSdkResult {
        Ok(())
    }
}

/// A run's traces, bridged from `tracing` to an OTLP/HTTP collector
/// (feature `otlp`). The example is compiled, not run: it needs a collector
/// at the URL.
///
/// ```no_run
/// let otlp = rayorch_kit::otlp::Otlp::install(rayorch_kit::otlp::OtlpConfig::new(
///     "http://localhost:4318",
///     "doc_ocr",
/// ))?;
/// // ... run the job ...
/// eprintln!("{}", otlp.shutdown());
/// # Ok::<(), rayorch_kit::otlp::OtlpError>(())
/// ```
pub struct Otlp {
    provider: SdkTracerProvider,
    counts: Arc<Counts>,
    url: String,
    dispatch: tracing::Dispatch,
    /// A second registered dispatcher that wants nothing, alive as long as
    /// this one. While only one dispatcher is registered, tracing-core
    /// decides a callsite's cached interest, when the callsite is first
    /// hit, from the hitting thread's default alone: under
    /// `with_default(otlp.dispatch(), ..)`, a run on another thread without
    /// a subscriber that reached a span first would silence it for this
    /// run too. With two registered, every dispatcher is asked.
    _others: tracing::Dispatch,
    done: bool,
}

impl Otlp {
    /// Set up the exporter and a `tracing` dispatcher that feeds it (see
    /// [`Otlp::dispatch`]); nothing is installed globally.
    pub fn new(config: OtlpConfig) -> Result<Otlp, OtlpError> {
        let url = config.traces_url()?;
        let counts = Arc::new(Counts::default());
        // With `store`, reqwest is built with rustls and no bundled crypto
        // provider, for this client too: install ring's before building it.
        #[cfg(feature = "store")]
        crate::store::install_crypto();
        let inner = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(url.clone())
            .with_timeout(config.timeout)
            .build()
            .map_err(|e| OtlpError::Build {
                url: url.clone(),
                cause: e.to_string(),
            })?;
        let exporter = Counted {
            inner,
            counts: counts.clone(),
        };
        let batching = BatchConfigBuilder::default()
            .with_max_queue_size(config.queue.max(1))
            .with_max_export_batch_size(config.batch.clamp(1, config.queue.max(1)))
            .with_scheduled_delay(config.delay)
            .build();
        let provider = SdkTracerProvider::builder()
            .with_resource(Resource::builder().with_service_name(config.service).build())
            .with_span_processor(Ended(counts.clone()))
            .with_span_processor(
                BatchSpanProcessor::builder(exporter)
                    .with_batch_config(batching)
                    .build(),
            )
            .build();
        let layer = tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("rayorch"))
            .with_filter(rayorch_only());
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
        Ok(Otlp {
            provider,
            counts,
            url,
            dispatch,
            _others: tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default()),
            done: false,
        })
    }

    /// [`Otlp::new`], then make its dispatcher the process's global default
    /// (what a job binary wants; fails if the program set one already).
    pub fn install(config: OtlpConfig) -> Result<Otlp, OtlpError> {
        let otlp = Otlp::new(config)?;
        tracing::dispatcher::set_global_default(otlp.dispatch.clone())
            .map_err(|_| OtlpError::SubscriberSet)?;
        Ok(otlp)
    }

    /// The dispatcher that exports rayorch's spans: for
    /// `tracing::dispatcher::with_default` around a run, or for a program
    /// that installs it itself.
    pub fn dispatch(&self) -> &tracing::Dispatch {
        &self.dispatch
    }

    /// The traces URL spans are posted to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Post every queued span, stop the exporter and say what became of the
    /// run's spans.
    pub fn shutdown(mut self) -> OtlpReport {
        self.finish()
    }

    fn finish(&mut self) -> OtlpReport {
        if !self.done {
            self.done = true;
            let _ = self.provider.force_flush();
            if let Err(e) = self.provider.shutdown() {
                let mut last = self.counts.last_error.lock().unwrap_or_else(|p| p.into_inner());
                last.get_or_insert_with(|| e.to_string());
            }
        }
        let c = &self.counts;
        let ended = c.ended.load(Ordering::Relaxed);
        let exported = c.exported.load(Ordering::Relaxed);
        let failed = c.failed.load(Ordering::Relaxed);
        OtlpReport {
            url: self.url.clone(),
            ended,
            exported,
            failed,
            dropped: ended.saturating_sub(exported + failed),
            last_error: c.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        }
    }
}

impl Drop for Otlp {
    fn drop(&mut self) {
        self.finish();
    }
}

fn rayorch_only<S>() -> impl tracing_subscriber::layer::Filter<S> {
    tracing_subscriber::filter::filter_fn(|m| m.target().starts_with("rayorch"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traces_path_is_added_only_when_the_url_names_none() {
        let url = |e: &str| OtlpConfig::new(e, "t").traces_url();
        assert_eq!(url("http://c:4318").unwrap(), "http://c:4318/v1/traces");
        assert_eq!(url("http://c:4318/").unwrap(), "http://c:4318/v1/traces");
        assert_eq!(
            url("https://c/otlp/v1/traces").unwrap(),
            "https://c/otlp/v1/traces"
        );
        for bad in ["c:4318", "grpc://c:4317", "http://", "http:///v1/traces"] {
            let e = url(bad).unwrap_err().to_string();
            assert!(e.contains(bad) && e.contains("http://localhost:4318"), "{e}");
        }
    }
}
