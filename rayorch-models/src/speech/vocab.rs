//! whisper's vocabulary, for turning token ids back into text.
//!
//! whisper uses GPT-2's byte-level BPE: every token is a string over a
//! 256-character alphabet that stands for raw bytes (printable ASCII and
//! most of Latin-1 stand for themselves; the other bytes map to U+0100 and
//! up, in order). Decoding is therefore table lookups; encoding is never
//! needed, since the prompt holds only special tokens.
//! `vocabulary.txt` (CTranslate2's) has one token per line, line i = id i.

use std::collections::HashMap;
use std::path::Path;

use crate::error::ModelError;

/// Token strings by id, and the byte each alphabet character stands for.
#[derive(Clone, Debug)]
pub struct Vocab {
    tokens: Vec<String>,
    ids: HashMap<String, u32>,
    bytes: HashMap<char, u8>,
}

/// GPT-2's `bytes_to_unicode`, inverted.
fn char_to_byte() -> HashMap<char, u8> {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut next = 256u32;
    let mut map = HashMap::with_capacity(256);
    for b in 0..=255u8 {
        let c = if printable(b) {
            char::from(b)
        } else {
            let c = char::from_u32(next).unwrap_or(char::REPLACEMENT_CHARACTER);
            next += 1;
            c
        };
        map.insert(c, b);
    }
    map
}

impl Vocab {
    /// Read a one-token-per-line vocabulary.
    pub fn load(path: &Path) -> Result<Vocab, ModelError> {
        let text = std::fs::read_to_string(path).map_err(ModelError::io(path))?;
        Ok(Vocab::from_lines(text.lines()))
    }

    /// Build from token strings in id order.
    pub fn from_lines<'a>(lines: impl IntoIterator<Item = &'a str>) -> Vocab {
        let tokens: Vec<String> = lines.into_iter().map(String::from).collect();
        let ids = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        Vocab {
            tokens,
            ids,
            bytes: char_to_byte(),
        }
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether there are no tokens.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The id of a token string (e.g. `<|endoftext|>`).
    pub fn id(&self, token: &str) -> Option<u32> {
        self.ids.get(token).copied()
    }

    /// The text of `ids`, special tokens (`<|...|>`) skipped, invalid UTF-8
    /// replaced, surrounding whitespace trimmed.
    pub fn decode(&self, ids: &[u32]) -> String {
        let mut bytes = Vec::new();
        for &id in ids {
            let Some(t) = self.tokens.get(id as usize) else {
                continue;
            };
            if t.starts_with("<|") && t.ends_with("|>") {
                continue;
            }
            bytes.extend(t.chars().filter_map(|c| self.bytes.get(&c)));
        }
        String::from_utf8_lossy(&bytes).trim().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_level_tokens_decode_to_text() {
        // "Ġ" is the space byte, "Ċ" the newline; "Ã©" are the two UTF-8 bytes of "é".
        let v = Vocab::from_lines(["Hello", "Ġcaf", "Ã©", "Ċ", "<|endoftext|>"]);
        assert_eq!(v.id("<|endoftext|>"), Some(4));
        assert_eq!(v.decode(&[0, 1, 2, 4]), "Hello café");
        assert_eq!(v.decode(&[1, 3, 0]), "caf\nHello");
        assert_eq!(v.decode(&[99]), "", "unknown ids are skipped");
        assert_eq!(char_to_byte().len(), 256);
    }
}
