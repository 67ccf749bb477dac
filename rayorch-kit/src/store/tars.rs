//! WebDataset tar shards as sources: a tar's members grouped by key
//! (`0001.pdf`, `0001.json`, `0001.txt` are one sample, `0001`), one input
//! per group, the member the job reads chosen by its extension.
//!
//! Invariants:
//! - **Members are read by offset, a group at a time.** A tar is read
//!   header by header through [`ReadAt`] (a file, or an object's byte
//!   ranges, through a read-ahead window), so a member the job does not
//!   read (an image beside the PDF) is skipped, never fetched, and memory
//!   holds one group. A reader that stops (the run stopped admitting)
//!   reads no further.
//! - **Keys**: a member's key is its path up to the first `.` of its file
//!   name (the WebDataset rule: `a/0001.meta.json` is `a/0001`, extension
//!   `meta.json`); a group is named `SHARD#KEY` and keyed by
//!   [`root_key`](super::root_key) of that name, so a resumed run skips
//!   the groups its journal holds.
//! - **Metadata**: a `.json` member's object fields (another JSON value
//!   under `json`), and each other UTF-8 member up to 64 KiB as a string
//!   under its extension (`txt`, `cls`); binary members are left out.
//! - **One failure per unreadable group, never a dead run**: a group
//!   without a member the job reads, or whose member cannot be read, is one
//!   failed input; a header that fails its checksum, or a shard that ends
//!   at a header without the end-of-archive blocks, ends the shard with one
//!   failed input named `SHARD@OFFSET` (what follows cannot be found).

use std::sync::Arc;

use serde_json::{Map, Value};

use super::shards::{RowInput, ShardRow};

/// Bytes of a shard by offset: a local file, or an object read by range.
pub trait ReadAt {
    /// The shard's size.
    fn size(&self) -> u64;
    /// `len` bytes from `offset` (an error says why, with the shard's name).
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>, String>;
}

/// Bytes read at once around a small read (headers and small members):
/// a member the job skips costs at most this much of its bytes.
const WINDOW: usize = 64 << 10;

/// A [`ReadAt`] with a read-ahead window: small reads are served from the
/// last window fetched, so a run of headers and small members costs one
/// request per window.
pub struct Windowed<R> {
    inner: R,
    window: std::cell::RefCell<(u64, Vec<u8>)>,
}

impl<R: ReadAt> Windowed<R> {
    /// `inner` behind a window.
    pub fn new(inner: R) -> Windowed<R> {
        Windowed {
            inner,
            window: std::cell::RefCell::new((0, Vec::new())),
        }
    }
}

impl<R: ReadAt> ReadAt for Windowed<R> {
    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>, String> {
        let mut w = self.window.borrow_mut();
        let (at, bytes) = &*w;
        if offset >= *at && offset + len as u64 <= at + bytes.len() as u64 {
            let from = (offset - at) as usize;
            return Ok(bytes[from..from + len].to_vec());
        }
        if len > WINDOW / 2 {
            return self.inner.read_at(offset, len);
        }
        let take = (self.inner.size().saturating_sub(offset)).min(WINDOW as u64) as usize;
        if take < len {
            return Err(format!(
                "{len} bytes at offset {offset} run past the end ({} bytes): the shard is cut short",
                self.inner.size()
            ));
        }
        *w = (offset, self.inner.read_at(offset, take)?);
        Ok(w.1[..len].to_vec())
    }
}

/// One tar header, as far as a reader of regular files needs it.
#[derive(Debug, PartialEq, Eq)]
struct Header {
    name: String,
    size: u64,
    kind: u8,
}

/// The header block `b` (`None`: a zero block, the archive's end).
fn header(b: &[u8]) -> Result<Option<Header>, String> {
    if b.iter().all(|&x| x == 0) {
        return Ok(None);
    }
    let field = |r: std::ops::Range<usize>| {
        let f = &b[r];
        let end = f.iter().position(|&x| x == 0).unwrap_or(f.len());
        String::from_utf8_lossy(&f[..end]).into_owned()
    };
    let octal = |r: std::ops::Range<usize>| -> Result<u64, String> {
        let f = &b[r.clone()];
        if f[0] & 0x80 != 0 {
            // GNU base-256 for large sizes.
            return Ok(f[1..].iter().fold(0u64, |n, &x| (n << 8) | u64::from(x)));
        }
        let s = field(r);
        let s = s.trim_matches(|c: char| c == ' ' || c == '\0');
        if s.is_empty() {
            return Ok(0);
        }
        u64::from_str_radix(s, 8).map_err(|_| format!("a header field is not octal ({s:?})"))
    };
    let want = octal(148..156)?;
    let sum: u64 = b
        .iter()
        .enumerate()
        .map(|(i, &x)| if (148..156).contains(&i) { 32 } else { u64::from(x) })
        .sum();
    if sum != want {
        return Err(format!("a header fails its checksum ({sum} against {want})"));
    }
    let mut name = field(0..100);
    if &b[257..262] == b"ustar" {
        let prefix = field(345..500);
        if !prefix.is_empty() {
            name = format!("{prefix}/{name}");
        }
    }
    Ok(Some(Header {
        name,
        size: octal(124..136)?,
        kind: b[156],
    }))
}

/// A pax extended header's `path`, if it has one.
fn pax_path(data: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(data).ok()?;
    let mut rest = text;
    while !rest.is_empty() {
        let (digits, _) = rest.split_once(' ')?;
        let len: usize = digits.parse().ok()?;
        let record = rest.get(..len)?;
        let body = record.get(digits.len() + 1..)?.strip_suffix('\n')?;
        if let Some(path) = body.strip_prefix("path=") {
            return Some(path.to_string());
        }
        rest = rest.get(len..)?;
    }
    None
}

/// A member path's WebDataset key and extension.
///
/// ```
/// use rayorch_kit::store::tars::key_of;
/// assert_eq!(key_of("a/0001.meta.json"), ("a/0001", "meta.json"));
/// assert_eq!(key_of("0002.pdf"), ("0002", "pdf"));
/// assert_eq!(key_of("README"), ("README", ""));
/// ```
pub fn key_of(path: &str) -> (&str, &str) {
    let base = path.rfind('/').map_or(0, |i| i + 1);
    match path[base..].find('.') {
        Some(dot) => (&path[..base + dot], &path[base + dot + 1..]),
        None => (path, ""),
    }
}

/// The members of one group read so far.
#[derive(Default)]
struct Group {
    key: String,
    input: Option<Result<Vec<u8>, String>>,
    meta: Map<String, Value>,
    members: Vec<String>,
}

/// Members up to this size are read as metadata when they are text.
const META_MAX: u64 = 64 << 10;

/// Read the groups of the tar `shard` through `r`, calling `emit` with
/// each (false: stop). `accept` says which member is the job's input (by
/// its path: `a.pdf`).
pub fn read_tar(
    shard: &str,
    r: &impl ReadAt,
    accept: fn(&str) -> bool,
    emit: &mut dyn FnMut(ShardRow) -> bool,
) {
    let mut off = 0u64;
    let mut long_name: Option<String> = None;
    let mut group: Option<Group> = None;
    let mut ended = false;
    let flush = |g: Group, emit: &mut dyn FnMut(ShardRow) -> bool| emit(row(shard, g));
    while off + 512 <= r.size() {
        let h = r.read_at(off, 512).and_then(|b| header(&b));
        let h = match h {
            Ok(Some(h)) => h,
            Ok(None) => {
                ended = true;
                break;
            }
            Err(why) => {
                if let Some(g) = group.take()
                    && !flush(g, emit)
                {
                    return;
                }
                emit(lost_rest(
                    shard,
                    off,
                    format!("at byte {off}, {why}; the rest of the shard cannot be read (replace the shard)"),
                ));
                return;
            }
        };
        let data = off + 512;
        off = data + h.size.div_ceil(512) * 512;
        let read = |len: u64| r.read_at(data, len as usize);
        match h.kind {
            b'L' => {
                long_name = read(h.size)
                    .ok()
                    .map(|b| String::from_utf8_lossy(&b).trim_end_matches('\0').to_string());
                continue;
            }
            b'x' => {
                long_name = read(h.size).ok().and_then(|b| pax_path(&b));
                continue;
            }
            b'0' | 0 | b'7' => {}
            _ => {
                long_name = None;
                continue;
            }
        }
        let path = long_name.take().unwrap_or(h.name);
        let (key, ext) = key_of(&path);
        if group.as_ref().is_some_and(|g| g.key != key)
            && let Some(g) = group.take()
            && !flush(g, emit)
        {
            return;
        }
        let g = group.get_or_insert_with(|| Group {
            key: key.to_string(),
            ..Group::default()
        });
        g.members.push(ext.to_string());
        if accept(&path) {
            if g.input.is_none() {
                g.input = Some(read(h.size).map_err(|e| format!("{shard}: member {path}: {e}")));
            }
        } else if h.size <= META_MAX
            && let Ok(bytes) = read(h.size)
        {
            if ext.ends_with("json")
                && let Ok(v) = serde_json::from_slice::<Value>(&bytes)
            {
                match v {
                    Value::Object(fields) => g.meta.extend(fields),
                    other => {
                        g.meta.insert(ext.to_string(), other);
                    }
                }
            } else if let Ok(text) = String::from_utf8(bytes) {
                g.meta.insert(ext.to_string(), Value::String(text));
            }
        }
    }
    if let Some(g) = group.take()
        && !flush(g, emit)
    {
        return;
    }
    if !ended && off <= r.size() {
        // Cut at a header: what follows is lost. (A cut inside a member's
        // data failed that member's sample.)
        let why = format!(
            "ends at byte {} without the end-of-archive blocks (cut short at a member's header); the samples before it were read, replace the shard",
            r.size()
        );
        emit(lost_rest(shard, off, why));
    }
}

/// The failed input `SHARD@OFFSET`: what follows `off` cannot be read.
fn lost_rest(shard: &str, off: u64, why: String) -> ShardRow {
    let name = format!("{shard}@{off}");
    ShardRow {
        key: super::root_key(&name),
        name: name.into(),
        meta: None,
        input: Err(format!("{shard}: {why}")),
    }
}

/// The input of a group.
fn row(shard: &str, g: Group) -> ShardRow {
    let name = format!("{shard}#{}", g.key);
    let input = match g.input {
        Some(Ok(bytes)) => Ok(RowInput::Bytes(Arc::from(bytes))),
        Some(Err(e)) => Err(format!("{e}; replace the shard")),
        None => Err(format!(
            "{shard}: sample {} has no member this job reads (its members: {}); add one or leave the sample out",
            g.key,
            g.members.join(", ")
        )),
    };
    ShardRow {
        key: super::root_key(&name),
        name: name.into(),
        meta: (!g.meta.is_empty()).then(|| Arc::new(Value::Object(g.meta))),
        input,
    }
}

/// Is `name` a tar shard's (what a folder or prefix listing keeps)?
///
/// ```
/// assert!(rayorch_kit::store::tars::is_tar("s3://b/train-0001.tar"));
/// assert!(!rayorch_kit::store::tars::is_tar("a.pdf"));
/// ```
pub fn is_tar(name: &str) -> bool {
    name.rsplit('/')
        .next()
        .and_then(|n| n.rsplit_once('.'))
        .is_some_and(|(_, e)| e.eq_ignore_ascii_case("tar"))
}

impl ReadAt for std::fs::File {
    fn size(&self) -> u64 {
        self.metadata().map_or(0, |m| m.len())
    }

    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>, String> {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0; len];
        self.read_exact_at(&mut buf, offset)
            .map_err(|e| format!("{len} bytes at offset {offset}: {e}"))?;
        Ok(buf)
    }
}

impl<R: ReadAt> ReadAt for &R {
    fn size(&self) -> u64 {
        (**self).size()
    }

    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>, String> {
        (**self).read_at(offset, len)
    }
}

/// A tar shard in memory (tests).
impl ReadAt for Vec<u8> {
    fn size(&self) -> u64 {
        self.len() as u64
    }

    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>, String> {
        let from = offset as usize;
        self.get(from..from + len).map(<[u8]>::to_vec).ok_or_else(|| {
            format!(
                "{len} bytes at offset {offset} run past the end ({} bytes)",
                self.len()
            )
        })
    }
}

/// A tar of `members` (path, bytes; each path at most 100 bytes), ustar
/// headers, then two zero blocks: a WebDataset shard for tests and tools.
///
/// ```
/// let shard = rayorch_kit::store::tars::tar_of(&[("0001.pdf", b"%PDF"), ("0001.json", b"{}")]).unwrap();
/// assert_eq!(shard.len(), 4 * 512 + 1024);
/// assert!(rayorch_kit::store::tars::tar_of(&[(&"x".repeat(101), b"")]).is_err());
/// ```
pub fn tar_of(members: &[(&str, &[u8])]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    for (path, data) in members {
        if path.len() > 100 {
            return Err(format!("{path}: longer than a tar header's 100 bytes"));
        }
        let mut h = [0u8; 512];
        h[..path.len()].copy_from_slice(path.as_bytes());
        h[100..107].copy_from_slice(b"0000644");
        h[124..135].copy_from_slice(format!("{:011o}", data.len()).as_bytes());
        h[136..147].copy_from_slice(b"00000000000");
        h[156] = b'0';
        h[257..263].copy_from_slice(b"ustar\0");
        h[263..265].copy_from_slice(b"00");
        h[148..156].copy_from_slice(b"        ");
        let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
        h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
        out.extend_from_slice(&h);
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.resize(out.len() + 1024, 0);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar(members: &[(&str, &[u8])]) -> Vec<u8> {
        tar_of(members).unwrap()
    }

    fn is_pdf(name: &str) -> bool {
        name.ends_with(".pdf")
    }

    fn read(shard: &[u8]) -> Vec<ShardRow> {
        let mut rows = Vec::new();
        read_tar("s.tar", &Windowed::new(shard.to_vec()), is_pdf, &mut |r| {
            rows.push(r);
            true
        });
        rows
    }

    #[test]
    fn members_group_by_key_and_the_pdf_is_the_input_the_rest_metadata() {
        let shard = tar(&[
            ("0001.pdf", b"%PDF one"),
            ("0001.json", br#"{"lang": "en", "pages": 3}"#),
            ("0001.txt", b"a caption"),
            ("0001.jpg", &[0xff, 0xd8, 0xff, 0x00]),
            ("0002.json", b"[1, 2]"),
            ("0002.pdf", b"%PDF two"),
            ("0003.json", b"{}"),
        ]);
        let rows = read(&shard);
        assert_eq!(rows.len(), 3);
        assert_eq!(&*rows[0].name, "s.tar#0001");
        assert_eq!(rows[0].key, crate::store::root_key("s.tar#0001"));
        assert!(matches!(&rows[0].input, Ok(RowInput::Bytes(b)) if &b[..] == b"%PDF one"));
        assert_eq!(
            rows[0].meta.as_deref(),
            Some(&serde_json::json!({"lang": "en", "pages": 3, "txt": "a caption"}))
        );
        assert_eq!(
            rows[1].meta.as_deref(),
            Some(&serde_json::json!({"json": [1, 2]}))
        );
        let none = rows[2].input.as_ref().unwrap_err();
        assert!(
            none.contains("sample 0003 has no member this job reads (its members: json)"),
            "{none}"
        );
    }

    #[test]
    fn a_bad_header_ends_the_shard_with_one_failure_and_a_cut_member_fails_its_group() {
        let mut shard = tar(&[("a.pdf", b"%PDF a"), ("b.pdf", b"%PDF b"), ("c.pdf", b"%PDF c")]);
        shard[1024 + 10] ^= 0x55; // b.pdf's header
        let rows = read(&shard);
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert!(rows[0].input.is_ok());
        assert_eq!(&*rows[1].name, "s.tar@1024");
        assert!(rows[1].input.as_ref().unwrap_err().contains("checksum"));

        let whole = tar(&[("a.pdf", b"%PDF a"), ("big.pdf", &[7u8; 3000])]);
        let cut = &whole[..1024 + 512 + 1000];
        let rows = read(cut);
        assert_eq!(rows.len(), 2, "{rows:?}");
        let e = rows[1].input.as_ref().unwrap_err();
        assert!(e.contains("member big.pdf") && e.contains("cut short"), "{e}");

        // Cut inside a header: the samples before it, then one failure.
        let rows = read(&whole[..1024 + 100]);
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert!(rows[0].input.is_ok());
        assert_eq!(&*rows[1].name, "s.tar@1024");
        assert!(
            rows[1]
                .input
                .as_ref()
                .unwrap_err()
                .contains("without the end-of-archive blocks")
        );
        // A whole shard ends with them: no such failure.
        assert!(read(&whole).iter().all(|r| r.input.is_ok()));
    }

    /// A shard that counts the bytes read from it.
    struct Counting(Vec<u8>, std::cell::Cell<u64>);

    impl ReadAt for Counting {
        fn size(&self) -> u64 {
            self.0.size()
        }
        fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>, String> {
            self.1.set(self.1.get() + len as u64);
            self.0.read_at(offset, len)
        }
    }

    #[test]
    fn a_large_member_the_job_does_not_read_is_skipped_not_read() {
        let image = vec![9u8; 4 << 20];
        let shard = Counting(
            tar(&[("1.pdf", b"%PDF"), ("1.jpg", &image), ("2.pdf", b"%PDF 2")]),
            Default::default(),
        );
        let mut rows = Vec::new();
        read_tar("s.tar", &Windowed::new(&shard), is_pdf, &mut |r| {
            rows.push(r);
            true
        });
        assert_eq!(rows.len(), 2);
        assert!(shard.1.get() < 3 * WINDOW as u64, "{} bytes read", shard.1.get());
    }

    #[test]
    fn a_stopped_reader_reads_no_further() {
        let shard = tar(&[("a.pdf", b"1"), ("b.pdf", b"2"), ("c.pdf", b"3")]);
        let mut seen = 0;
        read_tar("s.tar", &shard, is_pdf, &mut |_| {
            seen += 1;
            false
        });
        assert_eq!(seen, 1);
    }

    #[test]
    fn long_names_and_pax_paths_name_their_member() {
        assert_eq!(
            pax_path(b"12 size=100\n26 path=deep/dir/0001.pdf\n").as_deref(),
            Some("deep/dir/0001.pdf")
        );
        assert_eq!(pax_path(b"12 size=100\n"), None);
    }
}
