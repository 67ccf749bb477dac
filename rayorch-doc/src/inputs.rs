//! Inputs of the document jobs: files, folders and glob patterns, expanded
//! to PDF paths in a stable order ([`discover`]); and, with the `store`
//! feature, objects in object storage, listed while the run goes
//! (`Roots`: local files first, keyed by their place in the list, then
//! each listed object, keyed by its URL).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::stream::{self, BoxStream, StreamExt};
use rayorch_kit::names::RootNames;
use rayorch_models::PdfFile;

type Error = rayorch::BoxError;

fn is_pdf_name(p: &Path) -> bool {
    p.extension().is_some_and(|e| e.eq_ignore_ascii_case("pdf"))
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out)?;
        } else if is_pdf_name(&p) {
            out.push(p);
        }
    }
    Ok(())
}

/// Expand inputs to files, in a stable order, without duplicates. A named
/// file is taken whatever its extension (the renderer says if it is no PDF).
/// An input that is neither a file, a folder nor a pattern matching files is
/// kept as a path too: the run reports it as a failed document (the renderer
/// cannot read it) and goes on with the others. Only a folder that cannot be
/// listed, or a malformed pattern, is an error.
pub fn discover(inputs: &[String]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for input in inputs {
        let p = Path::new(input);
        if p.is_dir() {
            walk(p, &mut files).map_err(|e| format!("{input}: {e}"))?;
        } else if p.is_file() || !input.contains(['*', '?', '[']) {
            files.push(p.to_path_buf());
        } else {
            let matches: Vec<PathBuf> = glob::glob(input)
                .map_err(|e| format!("{input}: not a file, folder or valid glob pattern ({e})"))?
                .filter_map(Result::ok)
                .filter(|m| m.is_file())
                .collect();
            if matches.is_empty() {
                // Nothing matches: one failure line names the pattern.
                files.push(p.to_path_buf());
            }
            files.extend(matches);
        }
    }
    let mut seen = std::collections::HashSet::new();
    files.retain(|f| seen.insert(f.clone()));
    Ok(files)
}

/// Split a job's inputs into local files (discovered now, at most `limit`)
/// and object-store inputs (checked to list, see `Roots`); `file://` URLs
/// are local paths. A URL in a build without `store` is refused with
/// `rebuild` (the job's build command with the feature); inputs that hold no
/// PDF at all are an error.
pub fn split(
    inputs: &[String],
    rebuild: &str,
    limit: Option<usize>,
) -> Result<(Vec<PathBuf>, Vec<String>), Error> {
    rayorch_kit::store::refuse_urls(inputs, cfg!(feature = "store"), rebuild)?;
    let (urls, local): (Vec<String>, Vec<String>) = inputs
        .iter()
        .map(|i| rayorch_kit::store::file_url_path(i).unwrap_or_else(|| i.clone()))
        .partition(|i| rayorch_kit::store::is_url(i));
    let mut files = discover(&local)?;
    if let Some(n) = limit {
        files.truncate(n);
    }
    let listable = check_listing(&urls)?;
    if files.is_empty() && listable == 0 {
        return Err(format!("no PDF files found in {}", inputs.join(", ")).into());
    }
    Ok((files, urls))
}

/// Is `name` a PDF's (what a prefix listing keeps)?
#[cfg(feature = "store")]
fn is_pdf_url(name: &str) -> bool {
    is_pdf_name(Path::new(name))
}

/// The documents of a run: local files, then the objects of object-store
/// inputs as they are listed, at most `limit` in all.
pub(crate) struct Roots {
    /// Local files, keyed by their place in this list.
    pub(crate) files: Vec<PathBuf>,
    /// Object-store inputs (URLs and patterns), listed as the run goes.
    pub(crate) urls: Vec<String>,
    limit: Option<usize>,
    names: Arc<RootNames>,
    /// Roots in the journal already: not named (the run skips them).
    done: Arc<HashSet<u64>>,
    /// What the listing yielded, and why it stopped early, if it did.
    listed: Arc<Listed>,
}

/// The listing's count and its error, filled while the run goes.
#[derive(Default)]
pub(crate) struct Listed {
    objects: AtomicU64,
    error: Mutex<Option<String>>,
}

impl Roots {
    /// The roots of `files` and `urls`, at most `limit`; `names` holds the
    /// local files' names already (but those of `done`), listed objects are
    /// named as they come; `done`: keys the journal holds.
    pub(crate) fn new(
        files: Vec<PathBuf>,
        urls: Vec<String>,
        limit: Option<usize>,
        names: Arc<RootNames>,
        done: HashSet<u64>,
    ) -> Roots {
        Roots {
            files,
            urls,
            limit,
            names,
            done: Arc::new(done),
            listed: Arc::default(),
        }
    }

    /// "N documents" (local) and the object-store inputs, for the console.
    pub(crate) fn describe(&self) -> String {
        match self.urls.len() {
            0 => format!("{} documents", self.files.len()),
            _ => format!(
                "{} local documents and the objects of {}",
                self.files.len(),
                self.urls.join(", ")
            ),
        }
    }

    /// The roots as the run admits them; object-store roots are named as
    /// they come (local files were named before the run).
    pub(crate) fn stream(&self) -> BoxStream<'static, (u64, PdfFile)> {
        let local: Vec<(u64, PdfFile)> = self
            .files
            .iter()
            .enumerate()
            .map(|(i, p)| (i as u64, PdfFile::from_path(p)))
            .collect();
        let (names, done, listed) = (self.names.clone(), self.done.clone(), self.listed.clone());
        let remote = self.remote().inspect(move |(k, f)| {
            listed.objects.fetch_add(1, Ordering::Relaxed);
            if !done.contains(k) {
                names.insert(*k, f.name.clone());
            }
        });
        stream::iter(local)
            .chain(remote)
            .take(self.limit.unwrap_or(usize::MAX))
            .boxed()
    }

    #[cfg(feature = "store")]
    fn remote(&self) -> BoxStream<'static, (u64, PdfFile)> {
        use rayorch_kit::store::{StoreOptions, Stores, list};
        if self.urls.is_empty() {
            return stream::empty().boxed();
        }
        let listed = self.listed.clone();
        list(
            Stores::new(StoreOptions::default()),
            self.urls.clone(),
            is_pdf_url,
        )
        .scan((), move |_, r| {
            futures::future::ready(match r {
                Ok(o) => Some((o.key(), PdfFile::from_url(o.url))),
                Err(e) => {
                    *listed.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                    None
                }
            })
        })
        .boxed()
    }

    #[cfg(not(feature = "store"))]
    fn remote(&self) -> BoxStream<'static, (u64, PdfFile)> {
        // URL inputs are refused before the run in a build without `store`.
        stream::empty().boxed()
    }

    /// Roots the source yielded.
    pub(crate) fn yielded(&self) -> u64 {
        let local = self.files.len() as u64;
        let all = local + self.listed.objects.load(Ordering::Relaxed);
        self.limit.map_or(all, |n| all.min(n as u64))
    }

    /// Why the listing stopped early, if it did.
    pub(crate) fn listing_error(&self) -> Option<String> {
        self.listed
            .error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// Check that each object-store input can be listed before any output is
/// touched (a missing bucket or refused credentials is an error here, not
/// a run that ends with nothing); how many of them hold a PDF.
#[cfg(feature = "store")]
fn check_listing(urls: &[String]) -> Result<usize, Error> {
    let opts = rayorch_kit::store::StoreOptions::default();
    Ok(rayorch_kit::store::check_listing(urls, is_pdf_url, &opts)?)
}

#[cfg(not(feature = "store"))]
fn check_listing(_urls: &[String]) -> Result<usize, Error> {
    Ok(0)
}
