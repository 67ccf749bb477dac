//! Output checks a job prints after its run: every root written once, the
//! same roots in each of its outputs.

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

/// The `key` of every line of a JSON-lines output, in file order.
pub fn jsonl_keys(path: &Path) -> Result<Vec<u64>, BoxError> {
    jsonl_lines(path)?
        .iter()
        .enumerate()
        .map(|(i, v)| {
            v["key"]
                .as_u64()
                .ok_or_else(|| format!("{} line {}: no `key`", path.display(), i + 1).into())
        })
        .collect()
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
