//! What a run expects of its inputs, and a caller's look at what it made.
//!
//! [`Expected`]: which inputs must be written (and with how many parts:
//! pages of a document) and which must fail, read from a folder's
//! `manifest.json` (`--expected DIR`). An input that ends otherwise counts
//! as unexpected, and any unexpected ending makes the exit status 3
//! ([`crate::outcome::exit_status`]); an input the manifest does not name
//! is expected to be written. This is how a demo over samples broken on
//! purpose (the bundled ones) still exits 0, and how a user marks inputs
//! known to be broken.
//!
//! The manifest is a JSON array of objects, one per input, matched by file
//! name (the last segment of a path or URL): `file`, `kind` — `text` or
//! `empty` (written; with `pages`, an array, that many parts) or any other
//! word naming why it must fail (`corrupt`, `encrypted`, `not_pdf`, …).
//! Other fields are ignored (the test-data crate keeps page texts there).
//!
//! [`Inspect`]: a caller's hook on each ended root, as the job writes it.
//! Tests and demos score outputs against truth through it
//! (`rayorch_testdata`); it is never part of the job's outputs.

use std::collections::HashMap;
use std::path::Path;

/// A caller's look at each root as it ends: its name, and what the job
/// writes for it (`None`: it failed). Called on the run's sink thread as
/// the job's outputs take the root.
pub type Inspect<D> = Box<dyn FnMut(&str, Option<&D>) + Send>;

/// Show the root `name`'s `doc` (`None`: it failed) to `inspect`, when
/// the caller gave one: what a job's sink calls as each root ends.
pub fn show<D>(inspect: &mut Option<Inspect<D>>, name: &str, doc: Option<&D>) {
    if let Some(look) = inspect {
        look(name, doc);
    }
}

/// How one input should end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Written, with this many parts when the manifest says.
    Written {
        /// Parts (pages of a document), when known.
        parts: Option<usize>,
    },
    /// Fails (broken on purpose).
    Fails,
}

/// Which inputs must end how (see the module note); empty: every input is
/// expected to be written.
#[derive(Clone, Debug, Default)]
pub struct Expected(HashMap<String, Expect>);

/// The last segment of a path or URL.
fn file_name(name: &str) -> &str {
    name.rsplit(['/', '\\']).next().unwrap_or(name)
}

impl Expected {
    /// Nothing expected beyond "written".
    pub fn none() -> Expected {
        Expected::default()
    }

    /// These inputs (paths, URLs or file names) must fail; any other must
    /// be written.
    ///
    /// ```
    /// let e = rayorch_kit::expect::Expected::failing(["/media/broken.mp4"]);
    /// assert!(e.as_expected("broken.mp4", None) && !e.as_expected("ok.mp4", None));
    /// ```
    pub fn failing<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> Expected {
        Expected(
            names
                .into_iter()
                .map(|n| (file_name(n.as_ref()).to_string(), Expect::Fails))
                .collect(),
        )
    }

    /// The manifest `dir/manifest.json`; an error names the file and what
    /// is wrong in it.
    pub fn read(dir: &Path) -> Result<Expected, String> {
        let path = dir.join("manifest.json");
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        Expected::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// A manifest's text (see the module note).
    ///
    /// ```
    /// use rayorch_kit::expect::{Expect, Expected};
    /// let e = Expected::parse(r#"[{"file": "a.pdf", "kind": "text", "pages": [["x"], ["y"]]},
    ///                              {"file": "b.pdf", "kind": "corrupt"}]"#).unwrap();
    /// assert_eq!(e.of("/data/a.pdf"), Some(Expect::Written { parts: Some(2) }));
    /// assert!(e.as_expected("s3://bucket/b.pdf", None));
    /// assert!(!e.as_expected("b.pdf", Some(1)), "b.pdf must fail");
    /// assert!(!e.as_expected("a.pdf", Some(1)), "a.pdf has two pages");
    /// assert!(e.as_expected("c.pdf", Some(7)) && !e.as_expected("c.pdf", None));
    /// ```
    pub fn parse(text: &str) -> Result<Expected, String> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let entries = v.as_array().ok_or("not a JSON array of inputs")?;
        let mut map = HashMap::new();
        for (i, e) in entries.iter().enumerate() {
            let field = |f: &str| e[f].as_str().ok_or_else(|| format!("entry {i}: no string `{f}`"));
            let (file, kind) = (field("file")?, field("kind")?);
            let expect = match kind {
                "text" | "empty" => Expect::Written {
                    parts: e["pages"].as_array().map(Vec::len),
                },
                _ => Expect::Fails,
            };
            map.insert(file_name(file).to_string(), expect);
        }
        Ok(Expected(map))
    }

    /// How the input named `name` (a path or URL) should end, if the
    /// manifest says.
    pub fn of(&self, name: &str) -> Option<Expect> {
        self.0.get(file_name(name)).copied()
    }

    /// Did `name` end as expected: written with `Some(parts)`, or failed?
    pub fn as_expected(&self, name: &str, written: Option<usize>) -> bool {
        match (self.of(name), written) {
            (None, w) => w.is_some(),
            (Some(Expect::Fails), w) => w.is_none(),
            (Some(Expect::Written { parts }), Some(n)) => parts.is_none_or(|p| p == n),
            (Some(Expect::Written { .. }), None) => false,
        }
    }
}
