//! Output checks a job prints after its run: every root written once, the
//! same roots in each of its outputs.
//!
//! Invariant: a check reads keys only, a line or a column at a time: its
//! memory is 8 bytes a root, never the outputs (a run of millions of
//! documents ends with the same peak it ran at).

use std::path::Path;

use rayorch::BoxError;

/// Every line of a JSON-lines output, parsed, in file order.
pub fn jsonl_lines(path: &Path) -> Result<Vec<serde_json::Value>, BoxError> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            serde_json::from_str(line).map_err(|e| format!("{} line {}: {e}", path.display(), i + 1).into())
        })
        .collect()
}

/// The `key` of every line of a JSON-lines output, in file order: read a
/// line at a time, only the key parsed out of it.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let p = dir.path().join("d.jsonl");
/// std::fs::write(&p, "{\"key\": 7, \"page_embeddings\": [[0.5, 1.0]]}\n{\"name\": \"a\", \"key\": 3}\n").unwrap();
/// assert_eq!(rayorch_kit::check::jsonl_keys(&p).unwrap(), [7, 3]);
/// std::fs::write(&p, "{\"name\": \"a\"}\n").unwrap();
/// assert!(rayorch_kit::check::jsonl_keys(&p).unwrap_err().to_string().ends_with("line 1: no `key`"));
/// ```
pub fn jsonl_keys(path: &Path) -> Result<Vec<u64>, BoxError> {
    use std::io::BufRead;
    #[derive(serde::Deserialize)]
    struct Keyed {
        key: Option<u64>,
    }
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut keys = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let at = || format!("{} line {}", path.display(), i + 1);
        let line = line.map_err(|e| format!("{}: {e}", at()))?;
        let keyed: Keyed = serde_json::from_str(&line).map_err(|e| format!("{}: {e}", at()))?;
        keys.push(keyed.key.ok_or_else(|| format!("{}: no `key`", at()))?);
    }
    Ok(keys)
}

/// Check that two outputs hold the same roots, each once; `Ok` says how
/// many (cheap: only keys are compared).
///
/// ```
/// use rayorch_kit::check::once_in_both;
/// assert_eq!(once_in_both(("a.jsonl", vec![2, 1]), ("b.parquet", vec![1, 2])).unwrap(), 2);
/// assert!(once_in_both(("a.jsonl", vec![1, 1]), ("b.parquet", vec![1])).is_err());
/// ```
pub fn once_in_both(a: (&str, Vec<u64>), b: (&str, Vec<u64>)) -> Result<usize, String> {
    let ((name_a, mut ka), (name_b, mut kb)) = (a, b);
    let (na, nb) = (ka.len(), kb.len());
    ka.sort_unstable();
    ka.dedup();
    kb.sort_unstable();
    kb.dedup();
    if ka.len() != na || kb.len() != nb || ka != kb {
        return Err(format!(
            "outputs disagree: {name_a} has {na} rows ({} keys), {name_b} {nb} rows ({} keys)",
            ka.len(),
            kb.len()
        ));
    }
    Ok(na)
}

/// Write `value` as pretty JSON to `dir/name` (a run's `summary.json`).
pub fn write_json(dir: &Path, name: &str, value: &serde_json::Value) -> Result<(), BoxError> {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(value)? + "\n")
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(())
}
