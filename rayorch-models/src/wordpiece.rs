//! BERT's uncased WordPiece tokenizer, read from a Hugging Face `tokenizer.json`.
//!
//! The same steps as the `BertNormalizer` + `BertPreTokenizer` + `WordPiece`
//! pipeline that file describes:
//! 1. clean: drop NUL, U+FFFD and control characters, turn whitespace into spaces;
//! 2. put spaces around CJK ideographs;
//! 3. lowercase, then strip accents (NFD, drop combining marks);
//! 4. split on whitespace and around every punctuation character;
//! 5. greedy longest-match-first word pieces (`##` marks a continuation);
//!    a word with no match, or longer than 100 characters, is `[UNK]`.
//!
//! Punctuation is ASCII punctuation plus the common Unicode punctuation
//! blocks (general punctuation, CJK and full-width forms); rarer Unicode
//! punctuation outside those blocks stays inside words.

use std::collections::HashMap;
use std::path::Path;

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

use crate::error::ModelError;

/// An uncased BERT WordPiece tokenizer.
#[derive(Clone, Debug)]
pub struct WordPiece {
    vocab: HashMap<String, u32>,
    unk: u32,
    cls: u32,
    sep: u32,
    max_chars: usize,
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

fn is_punct(c: char) -> bool {
    c.is_ascii_punctuation()
        || matches!(c as u32,
            0xA1 | 0xA7 | 0xAB | 0xB6 | 0xB7 | 0xBB | 0xBF | 0x37E | 0x387
            | 0x2010..=0x2027 | 0x2030..=0x205E | 0x2E00..=0x2E4F
            | 0x3001..=0x3003 | 0x3008..=0x3011 | 0x3014..=0x301F
            | 0xFE10..=0xFE19 | 0xFE30..=0xFE4F | 0xFE50..=0xFE6B
            | 0xFF01..=0xFF03 | 0xFF05..=0xFF0A | 0xFF0C..=0xFF0F | 0xFF1A | 0xFF1B
            | 0xFF1F | 0xFF20 | 0xFF3B..=0xFF3D | 0xFF3F | 0xFF5B | 0xFF5D | 0xFF5F..=0xFF65)
}

fn normalize(text: &str) -> String {
    let mut cleaned = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\0' || c == '\u{FFFD}' {
            continue;
        }
        if c.is_whitespace() {
            cleaned.push(' ');
        } else if c.is_control() {
            continue;
        } else if is_cjk(c) {
            cleaned.push(' ');
            cleaned.push(c);
            cleaned.push(' ');
        } else {
            cleaned.push(c);
        }
    }
    cleaned
        .to_lowercase()
        .nfd()
        .filter(|&c| !is_combining_mark(c))
        .collect()
}

impl WordPiece {
    /// Parse a Hugging Face `tokenizer.json` with a WordPiece model.
    pub fn from_tokenizer_json(json: &str) -> Result<WordPiece, String> {
        let v: serde_json::Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
        let model = &v["model"];
        if model["type"] != "WordPiece" {
            return Err(format!("expected a WordPiece model, found {}", model["type"]));
        }
        let vocab: HashMap<String, u32> = model["vocab"]
            .as_object()
            .ok_or("tokenizer.json has no model.vocab")?
            .iter()
            .filter_map(|(k, id)| Some((k.clone(), u32::try_from(id.as_u64()?).ok()?)))
            .collect();
        let id = |t: &str| vocab.get(t).copied().ok_or(format!("the vocab lacks {t}"));
        Ok(WordPiece {
            unk: id(model["unk_token"].as_str().unwrap_or("[UNK]"))?,
            cls: id("[CLS]")?,
            sep: id("[SEP]")?,
            max_chars: model["max_input_chars_per_word"].as_u64().unwrap_or(100) as usize,
            vocab,
        })
    }

    /// Read `tokenizer.json` from `path`.
    pub fn load(path: &Path) -> Result<WordPiece, ModelError> {
        let text = std::fs::read_to_string(path).map_err(ModelError::io(path))?;
        WordPiece::from_tokenizer_json(&text).map_err(|e| ModelError::model(path.display().to_string(), e))
    }

    /// The vocabulary size.
    pub fn vocab_size(&self) -> usize {
        self.vocab.len()
    }

    /// The id of `token`, if it is in the vocabulary.
    pub fn id(&self, token: &str) -> Option<u32> {
        self.vocab.get(token).copied()
    }

    fn words(text: &str) -> Vec<String> {
        let mut words = Vec::new();
        for chunk in normalize(text).split(' ') {
            let mut cur = String::new();
            for c in chunk.chars() {
                if is_punct(c) {
                    if !cur.is_empty() {
                        words.push(std::mem::take(&mut cur));
                    }
                    words.push(c.to_string());
                } else {
                    cur.push(c);
                }
            }
            if !cur.is_empty() {
                words.push(cur);
            }
        }
        words
    }

    fn pieces(&self, word: &str, out: &mut Vec<u32>) {
        let chars: Vec<char> = word.chars().collect();
        if chars.len() > self.max_chars {
            out.push(self.unk);
            return;
        }
        let mark = out.len();
        let mut start = 0;
        while start < chars.len() {
            let mut end = chars.len();
            let mut found = None;
            while end > start {
                let mut piece: String = chars[start..end].iter().collect();
                if start > 0 {
                    piece.insert_str(0, "##");
                }
                if let Some(&id) = self.vocab.get(&piece) {
                    found = Some(id);
                    break;
                }
                end -= 1;
            }
            match found {
                Some(id) => out.push(id),
                None => {
                    out.truncate(mark);
                    out.push(self.unk);
                    return;
                }
            }
            start = end;
        }
    }

    /// Token ids of `text`: `[CLS] pieces… [SEP]`, at most `max_len` ids
    /// (pieces past the limit are cut, `[SEP]` is kept).
    ///
    /// ```
    /// # let assets = rayorch_models::assets::ensure().unwrap();
    /// let wp = rayorch_models::wordpiece::WordPiece::load(&assets.embed_dir.join("tokenizer.json")).unwrap();
    /// assert_eq!(wp.encode("Hello, world!", 16), vec![101, 7592, 1010, 2088, 999, 102]);
    /// ```
    pub fn encode(&self, text: &str, max_len: usize) -> Vec<u32> {
        let mut ids = vec![self.cls];
        for w in Self::words(text) {
            self.pieces(&w, &mut ids);
            if ids.len() >= max_len {
                break;
            }
        }
        ids.truncate(max_len.max(2) - 1);
        ids.push(self.sep);
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> WordPiece {
        let vocab = [
            "[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "hello", ",", "!", "cafe",
        ];
        let json = serde_json::json!({
            "model": {
                "type": "WordPiece",
                "unk_token": "[UNK]",
                "max_input_chars_per_word": 100,
                "vocab": vocab.iter().enumerate().map(|(i, t)| (t.to_string(), i)).collect::<HashMap<_, _>>(),
            }
        });
        WordPiece::from_tokenizer_json(&json.to_string()).unwrap()
    }

    #[test]
    fn greedy_longest_match_with_continuations() {
        let wp = tiny();
        assert_eq!(wp.encode("Unaffable", 32), vec![2, 4, 5, 6, 3]);
        assert_eq!(wp.encode("hello,HELLO!", 32), vec![2, 7, 8, 7, 9, 3]);
    }

    #[test]
    fn accents_are_stripped_and_unknown_words_are_unk() {
        let wp = tiny();
        assert_eq!(wp.encode("Café unx", 32), vec![2, 10, 1, 3]);
    }

    #[test]
    fn truncation_keeps_sep() {
        let wp = tiny();
        assert_eq!(wp.encode("hello hello hello hello", 4), vec![2, 7, 7, 3]);
    }
}
