//! The Docling-style job: documents → pages → layout regions → text lines,
//! each region read by its own model, gathered back in reading order.
//!
//! ```text
//! Pdf ─render (+ text layer)─► expand Page ─upright─► layout─► expand Region
//!   Region ─detect (OCR regions only)─► expand Line ─recognize─► reduce (region lines)
//!   Region ─table (tables only)─► structure
//!   (region, lines, structure) ─finish─► reduce (page regions) ─page─► reduce ─assemble─► Document
//! ```
//! Layout is PicoDet CDLA, tables SLANet-plus, lines PP-OCRv6 tiny, all on
//! ONNX Runtime. Pages with a usable text layer take their text from it
//! (`--force-ocr` reads every page with OCR); the others (scans) are first
//! turned upright and deskewed (a low-resolution line-detection pass with
//! the PP-OCR line-orientation classifier). Batches mix pages, regions and
//! lines of many documents; each document is written when its last region
//! is done.
//!
//! [`run`] with no inputs runs the bundled samples; the example
//! (`cargo run --example doc_layout`) adds the generated layout corpus (two
//! columns, a table, a figure with caption, headers/footers) and its
//! scanned twin (image-only pages: degraded, turned 90/180/270°, skewed 2°
//! and 5°), both scored against their truth through [`run_inspected`]'s
//! hook (`rayorch_testdata::score`). Outputs in `--out`
//! (default `target/doc_layout`): `markdown/<name>.md`, `documents.jsonl`,
//! `regions.jsonl`, `regions.parquet`, `failures.jsonl`, `summary.json`.
//! [`LayoutJob::new`] makes the Calls and [`LayoutJob::plan`] the plan the
//! job runs.

pub mod cli;
pub mod outputs;
pub mod records;
mod run;

use rayorch::prelude::*;
use rayorch::{Output, PlanErrors};
use rayorch_models::assets::LayoutAssets;
use rayorch_models::layout::PageInfo;
use rayorch_models::layout::markdown::{
    LayoutDocument, PageResult, RegionResult, assemble_page, finish_region,
};
use rayorch_models::layout::upright::{PageUpright, UprightConfig};
use rayorch_models::{
    Assets, DetectConfig, LayoutConfig, LayoutDetect, LayoutDetector, LayoutPage, LayoutRender, LineText,
    OnnxConfig, PdfFile, RecognizeConfig, RegionDetect, RenderConfig, Table, TableConfig, TableRecognizer,
    TableStructure, TextDetector, TextRecognize,
};

pub(crate) use run::{Program, run_as};
pub use run::{run, run_from, run_inspected};

/// A layout region on its way to being read.
pub type PageRegion = rayorch_models::Region;

pub use crate::domains::{Page, Pdf};

/// A layout region of a page.
#[derive(Domain)]
#[domain(parent = Page)]
pub struct Region;
/// A text line of a region.
#[derive(Domain)]
#[domain(parent = Region)]
pub struct Line;

/// Every Call of the job.
pub struct LayoutJob {
    /// Render a document's pages with their text layer.
    pub render: Call<LayoutRender>,
    /// Turn OCR pages upright and deskew them.
    pub upright: Call<PageUpright>,
    /// Find a page's regions.
    pub layout: Call<LayoutDetect>,
    /// Detect the lines of an OCR region.
    pub detect: Call<RegionDetect>,
    /// Recognise one line.
    pub recognize: Call<TextRecognize>,
    /// Rebuild a table region's cells.
    pub table: Call<TableStructure>,
    /// A region's result from its lines and table.
    pub finish: FnCall<(PageRegion, Vec<LineText>, Option<Table>), RegionResult>,
    /// What a page records about itself.
    pub info: FnCall<LayoutPage, PageInfo>,
    /// A page from its regions.
    pub page: FnCall<(PageInfo, Vec<RegionResult>), PageResult>,
    /// Read a document named by a URL from object storage (local files pass through).
    pub fetch: RecordCall<crate::calls::FetchPdf>,
    /// The document's name.
    pub name: FnCall<PdfFile, String>,
    /// The document from its pages.
    pub assemble: FnCall<(String, Vec<PageResult>), LayoutDocument>,
}

/// How the layout job's Calls are made.
#[derive(Clone, Debug)]
pub struct LayoutSettings {
    /// ONNX Runtime threads per session (per replica).
    pub threads: usize,
    /// Rendering resolution.
    pub dpi: f32,
    /// Ignore the PDFs' text layers: OCR every page.
    pub force_ocr: bool,
    /// Layout: pages per batch (also the upright pass's batch).
    pub layout_batch: usize,
    /// Layout: pages stacked into one model call (at most `layout_batch`).
    pub layout_stack: usize,
    /// Region line detection: regions per batch.
    pub detect_batch: usize,
    /// Recognition: line crops per batch.
    pub recognize_batch: usize,
    /// Recognition: batches of one padded width ([`crate::calls::recognize`]).
    pub recognize_by_width: bool,
    /// Table structure: regions per batch.
    pub table_batch: usize,
    /// Replicas of the upright, detection and recognition Calls.
    pub replicas: usize,
    /// Replicas of the layout Call.
    pub layout_replicas: usize,
    /// Limits: render (a whole document at once: `--document-timeout-s`)
    /// and the model Calls (`--model-timeout-s`).
    pub timeouts: rayorch_kit::limits::Timeouts,
}

impl Default for LayoutSettings {
    /// The command line's defaults.
    fn default() -> LayoutSettings {
        LayoutSettings {
            threads: 1,
            dpi: 150.0,
            force_ocr: false,
            layout_batch: 4,
            layout_stack: 1,
            detect_batch: 16,
            recognize_batch: 48,
            recognize_by_width: false,
            table_batch: 8,
            replicas: 1,
            layout_replicas: 1,
            timeouts: rayorch_kit::limits::Timeouts::default(),
        }
    }
}

/// Pdf → Page → Region → Line and back: lines reduce into their region,
/// regions into their page, pages into their document.
#[pipeline]
impl LayoutJob {
    fn forward(&self, pdfs: Port<Pdf, PdfFile>) -> Port<Pdf, LayoutDocument> {
        let pages = self.upright(expand!(self.render(self.fetch(pdfs)) => Page));
        let regions = expand!(self.layout(pages) => Region);
        let lines = expand!(self.detect(regions) => Line);
        let texts = reduce!(self.recognize(lines));
        let tables = self.table(regions);
        let results = self.finish(regions, texts, tables);
        let page = self.page(self.info(pages), reduce!(results));
        self.assemble(self.name(pdfs), reduce!(page))
    }
}

impl LayoutJob {
    /// The job's Calls with `args`, loading their models from `a` and `la`.
    pub fn new(args: &LayoutSettings, a: &Assets, la: &LayoutAssets) -> LayoutJob {
        let onnx = OnnxConfig {
            intra_threads: args.threads,
            ..OnnxConfig::default()
        };
        let render_cfg = RenderConfig {
            dpi: args.dpi,
            ..RenderConfig::default()
        };
        let force_ocr = args.force_ocr;
        let up_cfg = UprightConfig {
            detect: DetectConfig {
                onnx: onnx.clone(),
                ..UprightConfig::default().detect
            },
            ..UprightConfig::default()
        };
        let (lay_cfg, det_cfg, rec_cfg, tab_cfg) = (
            LayoutConfig {
                onnx: onnx.clone(),
                max_batch: args.layout_stack.min(args.layout_batch).max(1),
                ..LayoutConfig::default()
            },
            DetectConfig {
                onnx: onnx.clone(),
                ..DetectConfig::default()
            },
            RecognizeConfig {
                onnx: onnx.clone(),
                ..RecognizeConfig::default()
            },
            TableConfig { onnx },
        );
        let (a0, a1, a3, a4) = (a.clone(), a.clone(), la.clone(), la.clone());
        let ort = a.ort_lib.clone();
        let ort2 = a.ort_lib.clone();
        let t = &args.timeouts;
        LayoutJob {
            render: t.whole(
                Call::new("render", move || {
                    Ok(LayoutRender::new(render_cfg.clone(), force_ocr))
                })
                .batch_size(1),
            ),
            upright: t.modelling(
                Call::new("upright", move || {
                    Ok(PageUpright::from_assets(&a0, up_cfg.clone())?)
                })
                .replicas(args.replicas)
                .batch_size(args.layout_batch),
            ),
            layout: t.modelling(
                Call::new("layout", move || {
                    Ok(LayoutDetect::new(LayoutDetector::load(
                        &a3.layout_model,
                        &ort,
                        lay_cfg.clone(),
                    )?))
                })
                .replicas(args.layout_replicas)
                .batch_size(args.layout_batch),
            ),
            detect: t.modelling(
                Call::new("detect", move || {
                    Ok(RegionDetect::new(TextDetector::from_assets(
                        &a1,
                        det_cfg.clone(),
                    )?))
                })
                .replicas(args.replicas)
                .batch_size(args.detect_batch),
            ),
            recognize: t.modelling(crate::calls::recognize(
                a,
                rec_cfg,
                args.replicas,
                args.recognize_batch,
                args.recognize_by_width,
                &Default::default(),
            )),
            table: t.modelling(
                Call::new("table", move || {
                    Ok(TableStructure::new(TableRecognizer::load(
                        &a4.table_model,
                        &ort2,
                        &tab_cfg,
                    )?))
                })
                .batch_size(args.table_batch),
            ),
            finish: Call::map(
                "finish",
                |(r, lines, table): (PageRegion, Vec<LineText>, Option<Table>)| {
                    finish_region(&r, &lines, table)
                },
            ),
            info: Call::map("info", |p: LayoutPage| p.info()),
            page: Call::map("page", |(info, regions): (PageInfo, Vec<RegionResult>)| {
                assemble_page(info, regions)
            }),
            fetch: crate::calls::fetch(8, std::time::Duration::from_secs(120)),
            name: Call::map("name", |f: PdfFile| f.name.to_string()),
            assemble: Call::map("assemble", |(name, pages): (String, Vec<PageResult>)| {
                LayoutDocument::assemble(&name, pages)
            }),
        }
    }

    /// The job's plan and its one output, the [`LayoutDocument`] of each PDF.
    pub fn plan(&self) -> Result<(Plan, Output<LayoutDocument>), PlanErrors> {
        self.build_plan()
    }
}
