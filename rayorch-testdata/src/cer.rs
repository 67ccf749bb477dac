//! Character error rate, to score OCR against known text.

/// Edit distance (insertions, deletions, substitutions) between two sequences.
pub fn levenshtein<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, x) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, y) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(x != y);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// Collapse every run of whitespace (line breaks included) to one space and trim.
pub fn normalize_whitespace(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Character error rate of `hypothesis` against `reference`: edit distance
/// over the reference length, after [`normalize_whitespace`] on both (line
/// breaks and spaces count alike). An empty reference scores 0 when the
/// hypothesis is empty too, else 1.
///
/// ```
/// use rayorch_testdata::cer::cer;
/// assert_eq!(cer("hello world", "hello  world"), 0.0);
/// assert_eq!(cer("abcd", "abed"), 0.25);
/// assert_eq!(cer("line one\nline two", "line one line two"), 0.0);
/// ```
pub fn cer(reference: &str, hypothesis: &str) -> f64 {
    let r: Vec<char> = normalize_whitespace(reference).chars().collect();
    let h: Vec<char> = normalize_whitespace(hypothesis).chars().collect();
    error_rate(&r, &h)
}

/// Edit distance over the reference length; an empty reference scores 0
/// against an empty hypothesis, else 1.
pub fn error_rate<T: PartialEq>(reference: &[T], hypothesis: &[T]) -> f64 {
    if reference.is_empty() {
        return if hypothesis.is_empty() { 0.0 } else { 1.0 };
    }
    levenshtein(reference, hypothesis) as f64 / reference.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        let c = |s: &str| s.chars().collect::<Vec<_>>();
        assert_eq!(levenshtein(&c("kitten"), &c("sitting")), 3);
        assert_eq!(levenshtein(&c(""), &c("abc")), 3);
        assert_eq!(levenshtein(&c("abc"), &c("abc")), 0);
        assert_eq!(cer("", ""), 0.0);
        assert_eq!(cer("", "x"), 1.0);
    }
}
