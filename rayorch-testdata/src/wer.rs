//! Word error rate, to score speech recognition against known text.

use crate::cer::error_rate;

/// The words of `s` for scoring: lowercased, punctuation dropped (an
/// apostrophe inside a word is kept), split on whitespace. Transcripts differ
/// from references in case and punctuation far more often than in words.
pub fn normalize_words(s: &str) -> Vec<String> {
    s.split_whitespace()
        .map(|w| {
            w.chars()
                .filter(|c| c.is_alphanumeric() || *c == '\'')
                .flat_map(char::to_lowercase)
                .collect::<String>()
        })
        .map(|w| w.trim_matches('\'').to_string())
        .filter(|w| !w.is_empty())
        .collect()
}

/// Word error rate of `hypothesis` against `reference`: word-level edit
/// distance over the number of reference words, after [`normalize_words`].
/// An empty reference scores 0 when the hypothesis is empty too, else 1.
///
/// ```
/// use rayorch_testdata::wer::wer;
/// assert_eq!(wer("The cat sat.", "the cat sat"), 0.0);
/// assert_eq!(wer("the cat sat on the mat", "the cat sat on a mat"), 1.0 / 6.0);
/// assert_eq!(wer("one two", "one two three four"), 1.0);
/// ```
pub fn wer(reference: &str, hypothesis: &str) -> f64 {
    error_rate(&normalize_words(reference), &normalize_words(hypothesis))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_compared_without_case_or_punctuation() {
        assert_eq!(
            normalize_words("Hello, World! It's  'fine'."),
            ["hello", "world", "it's", "fine"]
        );
        assert_eq!(wer("", ""), 0.0);
        assert_eq!(wer("", "x"), 1.0);
        assert_eq!(wer("a b c d", "a x c"), 0.5);
        assert_eq!(wer("a b", ""), 1.0);
    }
}
