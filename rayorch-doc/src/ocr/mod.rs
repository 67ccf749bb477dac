//! The document-OCR job (`doc_ocr`, the main job): OCR on real models,
//! streamed per document.
//!
//! ```text
//! Pdf ─fetch─open─► expand Page ─read─► detect ─► expand Line ─recognize─► reduce (page lines)
//!                            └──layer──────────────────────────────────┴─page_text─► embed
//!     ─► reduce (page texts, page embeddings) ─assemble─► Document
//! ```
//! A document named by a URL is read from object storage first (`fetch`:
//! a per-record async Call with its own concurrency, deadline and retries;
//! a local file passes through it). A document is parsed once (`open`) and expanded into page handles; each
//! page is read in its own Grain (`read`): a page whose text layer passes
//! the checks of `rayorch_models::pdf::text::Verdict` takes its text from
//! the layer and is never rendered, detected or recognised (it expands to
//! no lines); any other page is rendered and OCR'd. Every page's record
//! says which, and why (`Document::page_sources`, `page_reasons`,
//! `page_reason_kinds`; the summary counts pages by reason kind);
//! `--force-ocr` OCRs every page. Rendered pages in flight are bounded
//! by batch sizes, replicas and backpressure, not by document length, and a
//! window in child pages and lines (a line counts until its page is
//! reduced, a page until its document is) bounds how much work the admitted
//! documents bring. A page's text is in reading order across columns
//! (`rayorch_models::lines::reading_order`), from the layer or from OCR.
//! Rendering is hayro, detection and recognition PP-OCRv6 tiny on ONNX
//! Runtime, embeddings all-MiniLM-L6-v2 on candle. Recognition batches mix
//! line crops of many pages and documents; each document is written the
//! moment its last page is done, while long documents are still running.
//!
//! **One command, two plans.** `--layout` runs the layout plan
//! ([`crate::layout`]: Page → Region → Line; regions, tables, reading
//! order, a Markdown file per document) instead of this one (Page →
//! Line). A plan's Domain graph is fixed when it is built, and the two
//! differ by a level, so the mode picks the plan rather than branching
//! inside one. Everything a user sees is shared: the per-page decision
//! (`Verdict`: the layout plan reads a trusted layer and OCRs the rest,
//! turning only those pages upright), the record per document
//! ([`Document`], the layout plan's without embeddings, beside its
//! regions), the pages counted by source and reason
//! ([`PageTally`](crate::document::PageTally)), the inspection hook (it
//! sees a `Document` in either mode) and the skeleton (`rayorch_kit::job`:
//! journal, `--resume`, Ctrl-C, exit codes, `--metrics`, `--otlp`). A flag
//! only one plan reads is refused with the other (`cli::Args::PAGE_PLAN_ONLY`,
//! `layout::cli::LayoutFlags`), never ignored. Layout is off by default:
//! at the same CPU per page (BENCHMARKS.md, "One document job, by mode")
//! the page plan's text scores higher on every kind of the real-PDF bench,
//! and only it embeds pages and runs distributed.
//!
//! [`OcrJob::new`] makes the job's Calls from an [`OcrConfig`] and
//! [`OcrJob::plan`] its plan: the job itself ([`run`]), its tests and its
//! bench build the plan this way. [`run`] is the command line (`cli::Args`):
//! local, or owner / worker / broker of a distributed run (`dist`).

#[cfg(feature = "store")]
mod bucket;
pub mod cli;
#[cfg(feature = "dist")]
mod dist;
pub mod outputs;
mod run;

use std::sync::Arc;

use rayorch::prelude::*;
use rayorch::{Output, PlanErrors};
use rayorch_models::{
    Assets, DetectConfig, Device, EmbedConfig, LineText, OnnxConfig, PageText, PdfFile, PdfOpen, PdfPageRead,
    ReadPage, RecognizeConfig, RenderConfig, SentenceEmbed, SentenceEmbedder, TextDetect, TextDetector,
    TextRecognize, ocr::PageDetect, ocr::RecognizeCounts,
};

#[cfg(feature = "dist")]
pub use dist::codecs;
pub use run::{run, run_from, run_inspected};

use crate::document::Document;

pub use crate::domains::{Page, Pdf};

/// A text line of a page.
#[derive(Domain)]
#[domain(parent = Page)]
pub struct Line;

/// What `assemble` takes: the document name, its page texts and page embeddings.
pub type Parts = (String, Vec<PageText>, Vec<Vec<f32>>);

/// Every Call of the job.
pub struct OcrJob {
    /// Read a document named by a URL from object storage (local files pass through).
    pub fetch: RecordCall<crate::calls::FetchPdf>,
    /// Parse a document into page handles (once per document).
    pub open: Call<PdfOpen>,
    /// Read one page: its trusted text layer, or its pixels for OCR.
    pub read: Call<PdfPageRead>,
    /// Detect the text lines (with orientation) of a page OCR reads.
    pub detect: Call<PageDetect>,
    /// A read page without its pixels (what waits for its OCR lines).
    pub layer: FnCall<ReadPage, ReadPage>,
    /// Recognise one line (batches mix lines of many pages and documents).
    pub recognize: Call<TextRecognize>,
    /// What `recognize`'s replicas in this process did: model calls and
    /// the padded share of the model's input (the run's summary).
    pub recognized: Arc<RecognizeCounts>,
    /// A page's text, from its layer or its OCR lines, in reading order.
    pub page_text: FnCall<(ReadPage, Vec<LineText>), PageText>,
    /// The text alone (what is embedded).
    pub text: FnCall<PageText, String>,
    /// Embed one page text.
    pub embed: Call<SentenceEmbed>,
    /// The document's name.
    pub name: FnCall<PdfFile, String>,
    /// The document from its parts.
    pub assemble: FnCall<Parts, Document>,
}

/// The pipeline: Pdf → pages, each read from its text layer or OCR'd
/// (text lines recognized in batches that mix lines of many pages and
/// documents, gathered back in reading order).
#[pipeline]
impl OcrJob {
    fn forward(&self, pdfs: Port<Pdf, PdfFile>) -> Port<Pdf, Document> {
        let pages = self.read(expand!(self.open(self.fetch(pdfs)) => Page));
        let lines = expand!(self.detect(pages) => Line);
        let page = self.page_text(self.layer(pages), reduce!(self.recognize(lines)));
        let embedding = self.embed(self.text(page));
        self.assemble(self.name(pdfs), reduce!(page), reduce!(embedding))
    }
}

/// The job's Calls by name: what `--calls`, `--owner-calls`, the
/// replica knobs and the summary's `calls` say, typed. Every Call of
/// [`OcrJob::plan`] is one of these, and each is made under its
/// [`OcrCall::name`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OcrCall {
    /// `fetch`: read a document named by a URL.
    Fetch,
    /// `open`: parse a document into page handles.
    Open,
    /// `read`: one page's text layer, or its pixels for OCR.
    Read,
    /// `detect`: text lines of a page OCR reads.
    Detect,
    /// `layer`: a read page without its pixels.
    Layer,
    /// `recognize`: one line's text.
    Recognize,
    /// `page_text`: a page's text in reading order.
    PageText,
    /// `text`: the text alone.
    Text,
    /// `embed`: a page text's embedding.
    Embed,
    /// `name`: the document's name.
    Name,
    /// `assemble`: the document from its parts.
    Assemble,
}

impl OcrCall {
    /// Every Call, in pipeline order.
    pub const ALL: [OcrCall; 11] = [
        OcrCall::Fetch,
        OcrCall::Open,
        OcrCall::Read,
        OcrCall::Detect,
        OcrCall::Layer,
        OcrCall::Recognize,
        OcrCall::PageText,
        OcrCall::Text,
        OcrCall::Embed,
        OcrCall::Name,
        OcrCall::Assemble,
    ];

    /// The Call's name in the plan.
    pub const fn name(self) -> &'static str {
        match self {
            OcrCall::Fetch => "fetch",
            OcrCall::Open => "open",
            OcrCall::Read => "read",
            OcrCall::Detect => "detect",
            OcrCall::Layer => "layer",
            OcrCall::Recognize => "recognize",
            OcrCall::PageText => "page_text",
            OcrCall::Text => "text",
            OcrCall::Embed => "embed",
            OcrCall::Name => "name",
            OcrCall::Assemble => "assemble",
        }
    }

    /// The Call named `name`, if the job has one.
    ///
    /// ```
    /// use rayorch_doc::ocr::OcrCall;
    /// assert_eq!(OcrCall::named("page_text"), Some(OcrCall::PageText));
    /// assert_eq!(OcrCall::named("ocr"), None);
    /// ```
    pub fn named(name: &str) -> Option<OcrCall> {
        OcrCall::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// Replicas and ONNX threads of the model Calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Knobs {
    /// ONNX Runtime intra-op threads per session (per replica).
    pub threads: usize,
    /// Read (and render) replicas.
    pub render_replicas: usize,
    /// Detect replicas.
    pub detect_replicas: usize,
    /// Recognise replicas.
    pub recognize_replicas: usize,
    /// Embed replicas.
    pub embed_replicas: usize,
}

impl Knobs {
    /// Defaults for a machine with `cores` cores. Recognition is the
    /// bottleneck (many line crops per page), so it gets a replica per core's
    /// worth of threads; detection a quarter of that; rendering a quarter of
    /// the cores (one document each); embedding one replica (a page text per
    /// Grain, light). Small ONNX models gain little past a few intra-op
    /// threads, so threads grow slowly (one per 8 cores, at most 4) and the
    /// rest of the machine goes to replicas. Two cores: 2 recognition
    /// replicas, everything else 1.
    pub fn for_cores(cores: usize) -> Knobs {
        let cores = cores.max(1);
        let threads = (cores / 8).clamp(1, 4);
        let recognize_replicas = (cores / threads).max(1);
        Knobs {
            threads,
            render_replicas: (cores / 4).max(1),
            detect_replicas: (recognize_replicas / 4).max(1),
            recognize_replicas,
            embed_replicas: 1,
        }
    }

    /// The replicas of `call` (1 for the cheap ones).
    pub fn replicas_of(&self, call: OcrCall) -> usize {
        match call {
            OcrCall::Read => self.render_replicas,
            OcrCall::Detect => self.detect_replicas,
            OcrCall::Recognize => self.recognize_replicas,
            OcrCall::Embed => self.embed_replicas,
            _ => 1,
        }
    }
}

/// The cores this process may use (1 if unknown).
pub fn machine_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// How the job's Calls are made: rendering, detection, batch sizes, replicas.
#[derive(Clone, Debug)]
pub struct OcrConfig {
    /// Page rendering.
    pub render: RenderConfig,
    /// OCR every page, trusting no text layer.
    pub force_ocr: bool,
    /// OCR an OCR'd scan's page too and keep its invisible layer only if
    /// the two agree (`--trust-scan-layers` turns it off).
    pub verify_scan_layers: bool,
    /// Detect: longest side of the detection input in pixels (0 = the full page).
    pub det_max_side: u32,
    /// Detect: turn pages by 90/180/270° and flip upside-down lines.
    pub orientation: bool,
    /// Run the ONNX models on CUDA device 0.
    pub cuda: bool,
    /// Replicas and threads.
    pub knobs: Knobs,
    /// Read (render): pages per batch.
    pub render_batch: usize,
    /// Detect: pages per batch.
    pub detect_batch: usize,
    /// Recognise: line crops per batch.
    pub recognize_batch: usize,
    /// Recognise: batches of one padded width, one model call each
    /// ([`crate::calls::recognize`]).
    pub recognize_by_width: bool,
    /// Embed: page texts per batch.
    pub embed_batch: usize,
    /// Embed: longest a page text waits for a fuller batch (only while
    /// more pages can still come; zero: never).
    pub embed_delay: std::time::Duration,
    /// Fetch: objects read at once (inputs in object storage).
    pub fetch_concurrency: usize,
    /// Fetch: longest one attempt to read an object may take.
    pub fetch_timeout: std::time::Duration,
    /// Limits of the Calls that parse user bytes (open, read) and of the
    /// model Calls (detect, recognise, embed).
    pub timeouts: rayorch_kit::limits::Timeouts,
}

impl Default for OcrConfig {
    /// The command line's defaults on this machine's cores.
    fn default() -> OcrConfig {
        OcrConfig {
            render: RenderConfig::default(),
            force_ocr: false,
            verify_scan_layers: true,
            det_max_side: 960,
            orientation: true,
            cuda: false,
            knobs: Knobs::for_cores(machine_cores()),
            render_batch: 2,
            detect_batch: 4,
            recognize_batch: 48,
            recognize_by_width: false,
            embed_batch: 16,
            embed_delay: std::time::Duration::from_secs(1),
            fetch_concurrency: 8,
            fetch_timeout: std::time::Duration::from_secs(120),
            timeouts: rayorch_kit::limits::Timeouts::default(),
        }
    }
}

impl OcrConfig {
    /// The ONNX Runtime settings of every model Call.
    pub fn onnx(&self) -> OnnxConfig {
        OnnxConfig {
            intra_threads: self.knobs.threads,
            device: if self.cuda { Device::Cuda(0) } else { Device::Cpu },
        }
    }

    /// The detection stage's settings.
    pub fn detect(&self) -> DetectConfig {
        DetectConfig {
            onnx: self.onnx(),
            max_side: self.det_max_side,
            orientation: self.orientation,
            ..DetectConfig::default()
        }
    }

    /// The recognition stage's settings: on a GPU a width bucket is one
    /// model call however wide (memory is plenty, calls are not), and its
    /// batches are keyed by padded width, so the ladder is coarser (×1.25
    /// from 320: few keys, full batches) than a CPU's (×1.06 from 96: little
    /// padding, at no cost where one batch holds many widths).
    pub fn recognize(&self) -> RecognizeConfig {
        let cpu = RecognizeConfig::default();
        if self.cuda {
            return RecognizeConfig {
                onnx: self.onnx(),
                max_call_columns: usize::MAX,
                min_width: 320,
                bucket_ratio: 1.25,
                ..cpu
            };
        }
        RecognizeConfig {
            onnx: self.onnx(),
            ..cpu
        }
    }
}

impl OcrJob {
    /// The job's Calls with `cfg`, loading their models from `assets` (each
    /// replica loads its model when the run starts it).
    pub fn new(cfg: &OcrConfig, assets: &Assets) -> OcrJob {
        let k = cfg.knobs;
        let (render_cfg, force_ocr, trust_hidden) =
            (cfg.render.clone(), cfg.force_ocr, !cfg.verify_scan_layers);
        let (a1, a3) = (assets.clone(), assets.clone());
        let (det_cfg, rec_cfg) = (cfg.detect(), cfg.recognize());
        let t = &cfg.timeouts;
        let recognized = Arc::new(RecognizeCounts::default());
        OcrJob {
            fetch: crate::calls::fetch(cfg.fetch_concurrency, cfg.fetch_timeout),
            open: t.parsing(Call::new(OcrCall::Open.name(), || Ok(PdfOpen)).batch_size(1)),
            read: t.parsing(
                Call::new(OcrCall::Read.name(), move || {
                    Ok(PdfPageRead::new(render_cfg.clone(), force_ocr).trusting_hidden_layers(trust_hidden))
                })
                .replicas(k.render_replicas)
                .batch_size(cfg.render_batch),
            ),
            detect: t.modelling(
                Call::new(OcrCall::Detect.name(), move || {
                    Ok(PageDetect(TextDetect::new(TextDetector::from_assets(
                        &a1,
                        det_cfg.clone(),
                    )?)))
                })
                .replicas(k.detect_replicas)
                .batch_size(cfg.detect_batch),
            ),
            layer: Call::map(OcrCall::Layer.name(), ReadPage::without_image),
            recognize: t.modelling(crate::calls::recognize(
                assets,
                rec_cfg,
                k.recognize_replicas,
                cfg.recognize_batch,
                cfg.recognize_by_width,
                &recognized,
            )),
            recognized,
            page_text: Call::map(
                OcrCall::PageText.name(),
                |(page, lines): (ReadPage, Vec<LineText>)| page.text(&lines),
            ),
            text: Call::map(OcrCall::Text.name(), |page: PageText| page.text),
            embed: t.modelling(
                Call::new(OcrCall::Embed.name(), move || {
                    Ok(SentenceEmbed::new(SentenceEmbedder::from_assets(
                        &a3,
                        &EmbedConfig::default(),
                    )?))
                })
                .replicas(k.embed_replicas)
                .batch_size(cfg.embed_batch)
                .shape(|text: &String| rayorch_models::embed::length_bucket(text))
                .max_batch_delay(cfg.embed_delay),
            ),
            name: Call::map(OcrCall::Name.name(), |f: PdfFile| f.name.to_string()),
            assemble: Call::map(OcrCall::Assemble.name(), |(name, texts, embs): Parts| {
                Document::assemble(&name, texts, embs)
            }),
        }
    }

    /// The job's plan and its one output, the [`Document`] of each PDF.
    pub fn plan(&self) -> Result<(Plan, Output<Document>), PlanErrors> {
        self.build_plan()
    }
}

/// The width of the embeddings the model at `dir` makes (its `config.json`).
pub fn embedding_dim(dir: &std::path::Path) -> Result<usize, String> {
    let text =
        std::fs::read_to_string(dir.join("config.json")).map_err(|e| format!("{}: {e}", dir.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    v["hidden_size"]
        .as_u64()
        .map(|d| d as usize)
        .ok_or_else(|| "config.json has no hidden_size".to_string())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use clap::Parser;

    use super::*;

    /// Paths only: the factories that would load them never run here.
    fn no_assets() -> Assets {
        let p = PathBuf::from("/nonexistent");
        Assets {
            ort_lib: p.clone(),
            det_model: p.clone(),
            rec_model: p.clone(),
            rec_config: p.clone(),
            cls_model: p.clone(),
            embed_dir: p,
        }
    }

    fn limits(args: &[&str]) -> Vec<(String, Option<Duration>)> {
        let args = cli::Args::parse_from(std::iter::once("doc_ocr").chain(args.iter().copied()));
        let job = OcrJob::new(&args.config(2), &no_assets());
        let (plan, _) = job.plan().unwrap();
        plan.calls()
            .iter()
            .map(|c| (c.name.to_string(), c.config.timeout))
            .collect()
    }

    #[test]
    fn every_call_that_parses_user_bytes_or_runs_a_model_has_a_limit_by_default() {
        let s = Duration::from_secs;
        let got = limits(&[]);
        let of = |name: &str| got.iter().find(|(n, _)| n == name).unwrap().1;
        assert_eq!(of("open"), Some(s(120)));
        assert_eq!(of("read"), Some(s(240)), "two pages a batch");
        for model in ["detect", "recognize", "embed"] {
            assert_eq!(of(model), Some(s(600)), "{model}");
        }
        let got = limits(&[
            "--parse-timeout-s",
            "5",
            "--render-batch",
            "3",
            "--model-timeout-s",
            "0",
        ]);
        let of = |name: &str| got.iter().find(|(n, _)| n == name).unwrap().1;
        assert_eq!((of("open"), of("read")), (Some(s(5)), Some(s(15))));
        assert_eq!(of("detect"), None);
    }

    /// The plan's Calls are exactly the typed ones, by name and in
    /// pipeline order.
    #[test]
    fn every_call_of_the_plan_is_a_typed_call() {
        let args = cli::Args::parse_from(["doc_ocr"]);
        let (plan, _) = OcrJob::new(&args.config(2), &no_assets()).plan().unwrap();
        let names: Vec<&str> = plan.calls().iter().map(|c| &*c.name).collect();
        let mut typed: Vec<&str> = OcrCall::ALL.iter().map(|c| c.name()).collect();
        let (mut a, b) = (names.clone(), typed.clone());
        a.sort_unstable();
        typed.sort_unstable();
        assert_eq!(a, typed, "plan {names:?}, typed {b:?}");
        assert_eq!(args.knobs(2).replicas_of(OcrCall::Recognize), 2);
    }

    /// A job has the limit flags of the kinds of Call it runs, and no
    /// other: a flag that would change nothing is a usage error. `doc_ocr`
    /// has both plans' (`--layout` renders whole documents), each refused
    /// in the mode that does not read it.
    #[test]
    fn a_limit_flag_no_call_of_the_job_reads_is_refused() {
        use clap::Parser;
        use clap::error::ErrorKind;
        let kind = |r: Result<(), clap::Error>| r.map_err(|e| e.kind());
        let ocr = |a: &[&str]| {
            let argv = std::iter::once("doc_ocr").chain(a.iter().copied()).chain(["5"]);
            kind(cli::Args::try_parse_from(argv).map(drop))
        };
        let layout =
            |a: &str| kind(crate::layout::cli::Args::try_parse_from(["doc_layout", a, "5"]).map(drop));
        assert_eq!(
            ocr(&["--document-timeout-s"]),
            Err(ErrorKind::MissingRequiredArgument),
            "doc_ocr reads page by page; --layout renders whole documents"
        );
        assert_eq!(ocr(&["--layout", "--document-timeout-s"]), Ok(()));
        assert_eq!(
            ocr(&["--layout", "--parse-timeout-s"]),
            Err(ErrorKind::ArgumentConflict)
        );
        assert_eq!(
            (ocr(&["--parse-timeout-s"]), ocr(&["--model-timeout-s"])),
            (Ok(()), Ok(()))
        );
        assert_eq!(
            layout("--parse-timeout-s"),
            Err(ErrorKind::UnknownArgument),
            "doc_layout renders whole documents"
        );
        assert_eq!(
            (layout("--document-timeout-s"), layout("--model-timeout-s")),
            (Ok(()), Ok(()))
        );
    }

    /// `--layout` picks the layout plan: its own flags need it, the page
    /// plan's are refused with it (none is silently ignored), and the
    /// flags both plans read carry over.
    #[test]
    fn each_mode_takes_its_plans_flags_and_refuses_the_others() {
        use clap::Parser;
        use clap::error::ErrorKind;
        let parse =
            |a: &[&str]| cli::Args::try_parse_from(std::iter::once("doc_ocr").chain(a.iter().copied()));
        for id in crate::layout::cli::LayoutFlags::IDS {
            let flag = format!("--{}", id.replace('_', "-"));
            assert_eq!(
                parse(&[&flag, "2"]).map(drop).map_err(|e| e.kind()),
                Err(ErrorKind::MissingRequiredArgument),
                "{flag} without --layout"
            );
            assert!(parse(&["--layout", &flag, "2"]).is_ok(), "{flag} with --layout");
        }
        for id in cli::Args::PAGE_PLAN_ONLY {
            let flag = format!("--{}", id.replace('_', "-"));
            let argv: Vec<&str> = match id {
                "no_orientation" | "cuda" | "trust_scan_layers" => vec!["--layout", &flag],
                "nats" => vec!["--layout", &flag, "nats://127.0.0.1:4222"],
                "job" => vec!["--layout", &flag, "j"],
                _ => vec!["--layout", &flag, "3"],
            };
            assert_eq!(
                parse(&argv).map(drop).map_err(|e| e.kind()),
                Err(ErrorKind::ArgumentConflict),
                "{flag} with --layout"
            );
            assert!(parse(&argv[1..]).is_ok(), "{flag} without --layout");
        }
        let args = parse(&[
            "--layout",
            "--dpi",
            "72",
            "--force-ocr",
            "--recognize-batch",
            "12",
            "--layout-batch",
            "2",
            "--replicas",
            "3",
            "--document-timeout-s",
            "9",
            "--window",
            "5",
            "a.pdf",
        ])
        .unwrap();
        let layout = args.layout_args();
        assert_eq!(
            (layout.inputs, layout.window, layout.dpi),
            (vec!["a.pdf".to_string()], 5, 72.0)
        );
        let s = layout_settings(&args);
        assert_eq!(
            (s.force_ocr, s.recognize_batch, s.layout_batch, s.replicas),
            (true, 12, 2, 3)
        );
        assert_eq!(
            s.timeouts,
            crate::layout::cli::Args::try_parse_from(["doc_layout", "--document-timeout-s", "9"])
                .unwrap()
                .settings()
                .timeouts
        );
        // The page plan's own defaults stay the page plan's.
        assert_eq!(
            s.detect_batch,
            crate::layout::LayoutSettings::default().detect_batch
        );
        assert_eq!(s.threads, 1);
    }

    fn layout_settings(args: &cli::Args) -> crate::layout::LayoutSettings {
        args.layout_args().settings()
    }
}
