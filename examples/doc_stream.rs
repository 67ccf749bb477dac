//! The main job (for now): stream a bundled library of documents through a
//! two-level pipeline and print each document the moment it is complete.
//!
//! Document → render (split into pages) → `expand!` Page → analyse (a batched
//! "model" stage whose batches mix pages of many documents) → `reduce!` back
//! to the document → assemble. Long documents do not hold up short ones
//! (`Reservation::NearestCompletion`, the default policy). The
//! pipeline is a `#[pipeline]` struct: Domain mistakes in `forward` are
//! compile errors.
//!
//! Run: `cargo run -p rayorch --example doc_stream [path/to/library.md]`

use std::time::{Duration, Instant};

use rayorch::prelude::*;
use rayorch::sink::Callback;
use rayorch::{RootOutcome, Runner};

#[derive(Domain)]
struct Doc;

#[derive(Domain)]
#[domain(parent = Doc)]
struct Page;

/// What the analysis "model" returns per page.
#[derive(Clone, Debug)]
struct PageStats {
    words: usize,
    longest: String,
}

/// One assembled document.
#[derive(Clone, Debug)]
struct Report {
    title: String,
    pages: usize,
    words: usize,
    longest: String,
}

/// The pipeline: one field per Call, and the graph in `forward`.
struct Library {
    render: FnCall<String, Vec<String>>,
    title: FnCall<String, String>,
    analyse: FnCall<String, PageStats>,
    assemble: FnCall<(String, Vec<PageStats>), Report>,
}

#[pipeline]
impl Library {
    fn forward(&self, doc: Port<Doc, String>) -> Port<Doc, Report> {
        let page = expand!(self.render(doc) => Page);
        let stats = reduce!(self.analyse(page));
        self.assemble(self.title(doc), stats)
    }
}

fn split_library(text: &str) -> Vec<String> {
    let mut docs = Vec::new();
    for line in text.lines() {
        if line.starts_with("# ") || docs.is_empty() {
            docs.push(String::new());
        }
        let d = docs.last_mut().expect("pushed above");
        d.push_str(line);
        d.push('\n');
    }
    docs
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/examples/data/library.md").to_string());
    let docs = split_library(&std::fs::read_to_string(&path)?);

    // Rendering costs time per page, like rasterising a PDF.
    let render = Call::map("render", |doc: String| {
        let body = doc.split_once('\n').map_or("", |(_, b)| b).to_string();
        let pages: Vec<String> = body.split("---\n").map(str::to_string).collect();
        std::thread::sleep(Duration::from_micros(300) * pages.len() as u32);
        pages
    })
    .replicas(2)
    .batch_size(1);
    let title = Call::map("title", |doc: String| {
        doc.lines()
            .next()
            .unwrap_or("")
            .trim_start_matches("# ")
            .to_string()
    });
    // A batched model: fixed cost per call plus a little per page, so it
    // pays to fill batches with pages from many documents.
    let analyse = Call::batch("analyse", |pages: Vec<String>| {
        std::thread::sleep(Duration::from_millis(4) + Duration::from_micros(100) * pages.len() as u32);
        Ok(pages
            .into_iter()
            .map(|p| {
                let longest = p
                    .split_whitespace()
                    .max_by_key(|w| w.len())
                    .unwrap_or("")
                    .to_string();
                Outcome::Ok(PageStats {
                    words: p.split_whitespace().count(),
                    longest,
                })
            })
            .collect())
    })
    .batch_size(16)
    .replicas(2);
    let assemble = Call::map("assemble", |(title, stats): (String, Vec<PageStats>)| Report {
        title,
        pages: stats.len(),
        words: stats.iter().map(|s| s.words).sum(),
        longest: stats
            .iter()
            .map(|s| s.longest.clone())
            .max_by_key(String::len)
            .unwrap_or_default(),
    });

    let (plan, out) = Library {
        render,
        title,
        analyse,
        assemble,
    }
    .build_plan()?;

    let start = Instant::now();
    println!(
        "{:>8}  {:<40} {:>5} {:>6}  longest word",
        "t(ms)", "document", "pages", "words"
    );
    let summary = Runner::new(&plan).window(8).run(
        docs.into_iter().enumerate().map(|(i, d)| (i as u64, d)),
        Callback(|o: &RootOutcome| match o.get(out) {
            Item::Present(r) => println!(
                "{:>8.1}  {:<40} {:>5} {:>6}  {}",
                start.elapsed().as_secs_f64() * 1e3,
                r.title,
                r.pages,
                r.words,
                r.longest
            ),
            other => println!(
                "{:>8.1}  document {} did not complete: {other:?}",
                start.elapsed().as_secs_f64() * 1e3,
                o.key
            ),
        }),
    )?;
    let a = summary.call("analyse").expect("analyse ran");
    println!(
        "\n{} documents in {:.0} ms (first after {:.0} ms); analyse: {} batches, mean {:.1} pages ({:.0}% full), {} mixing documents",
        summary.present,
        summary.wall_s * 1e3,
        summary.first_root_s.unwrap_or(0.0) * 1e3,
        a.rpcs,
        a.mean_batch,
        a.fill * 100.0,
        a.mixed_parent_batches
    );
    Ok(())
}
