//! The messages between an owner and its workers, as compact binary frames.
//!
//! Every frame starts with a kind byte and the job's wire version; integers
//! are little-endian, byte strings are u32-length-prefixed. A frame that does
//! not parse is refused with [`DistError::Wire`] (never a panic): a worker of
//! another build cannot corrupt the owner.
//!
//! Decoders never trust a declared size: every length and count is checked
//! against the bytes left in the frame *and* a cap ([`MAX_FRAME`],
//! [`MAX_NAME`], [`MAX_ITEMS`]) before anything is allocated for it, and a
//! count must leave room for the smallest encoding of each of its items. So
//! the largest allocation a decode makes is bounded by the frame's size times
//! a small factor, and never exceeds `MAX_ITEMS` items for any one list. A
//! stored payload's declared size is checked against
//! `DistConfig::payload_cap` before the store is read (`payload_store`).
//!
//! | frame | direction | subject |
//! | --- | --- | --- |
//! | [`BatchMsg`] | owner → JetStream `CALL` stream | `rayorch.<job>.call.<c>` |
//! | [`Claim`] (start + heartbeats) | worker → owner | `rayorch.<job>.ctl` |
//! | [`Report`] | worker → owner | `rayorch.<job>.ctl` |
//! | [`Hello`] / reply | worker → owner (request) | `rayorch.<job>.hello` |

use rayorch_runtime::spi::AttemptError;

use crate::error::DistError;

const VERSION: u8 = 4;

/// The largest frame a decoder reads: NATS's own ceiling on a server's
/// `max_payload` (64 MiB), so no message the broker can carry is refused.
pub const MAX_FRAME: usize = 64 << 20;

/// The longest name a frame may declare: a codec tag (a Rust type name for
/// `Codecs::json`), a store key, a worker id, a plan fingerprint.
pub const MAX_NAME: usize = 16 << 10;

/// The most items one count in a frame may declare: slots of a batch,
/// elements of a split list, outcomes of a report, split flags, calls of a
/// hello. A batch of `batch_size` Grains carries `batch_size × arity` slots;
/// at 2^18 a list of slots stays under 15 MiB in memory.
pub const MAX_ITEMS: usize = 1 << 18;

/// One payload slot: absent (a dropped optional input), inline bytes, a
/// reference into the payload store, or a list split into its elements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot {
    /// No value.
    None,
    /// Codec tag and encoded bytes.
    Inline(String, Vec<u8>),
    /// Codec tag, store key and size in bytes.
    Ref(String, String, u64),
    /// A list output sent as one slot per element (an output the owner
    /// expands without decoding it: `BatchMsg::split`). Its elements are
    /// never lists themselves.
    List(Vec<Slot>),
}

/// Why a whole attempt failed, as a report carries it (the owner's engine
/// classifies the record's failure by it: error, panic, timeout, contract).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireFailure {
    /// `Err` for the batch, a lost stage: retryable.
    Failed,
    /// The stage broke its contract: not retried.
    Contract,
    /// The stage panicked: retryable.
    Panicked,
    /// The attempt timed out: retryable.
    TimedOut,
}

impl WireFailure {
    /// How `e` travels.
    pub fn of(e: &AttemptError) -> WireFailure {
        match e {
            AttemptError::Contract(_) => WireFailure::Contract,
            AttemptError::Panicked(_) => WireFailure::Panicked,
            AttemptError::TimedOut(_) => WireFailure::TimedOut,
            _ => WireFailure::Failed,
        }
    }

    /// The attempt error this stands for, with its message.
    pub fn error(self, message: String) -> AttemptError {
        match self {
            WireFailure::Failed => AttemptError::Failed(message),
            WireFailure::Contract => AttemptError::Contract(message),
            WireFailure::Panicked => AttemptError::Panicked(message),
            WireFailure::TimedOut => AttemptError::TimedOut(message),
        }
    }
}

/// A reserved batch, as published to a Call's work queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchMsg {
    /// The owner's ticket for this dispatch (unique per owner run).
    pub ticket: u64,
    /// The owner run's id (a stale message of an earlier run is refused).
    pub run: u64,
    /// The batch's key: random per ticket, known only to the owner and to
    /// whoever pulls the batch; a claim proves it (see the `binding` module
    /// note in the crate's source).
    pub key: [u8; 16],
    /// The Call index.
    pub call: u32,
    /// Input slots per Grain.
    pub arity: u32,
    /// `arity` slots per Grain, in Grain order.
    pub slots: Vec<Slot>,
    /// Per output of the Call: send it split into its elements
    /// ([`Slot::List`]), because the owner expands it without reading it.
    pub split: Vec<bool>,
}

/// A worker took (or still runs) a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The owner run the batch belongs to (a report of another run is
    /// refused: tickets restart with every owner run).
    pub run: u64,
    /// The ticket.
    pub ticket: u64,
    /// JetStream's delivery count of this copy (1 = first delivery).
    pub delivered: u64,
    /// The worker's id.
    pub worker: String,
    /// `SHA-256` of the claimer's opening for this delivery (the report
    /// reveals the opening).
    pub seal: [u8; 32],
    /// `HMAC-SHA-256(batch key, run ‖ ticket ‖ delivered ‖ seal)`: the
    /// claimer pulled the batch.
    pub proof: [u8; 32],
}

/// The outcome of one Grain on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireOutcome {
    /// One slot per output Port.
    Ok(Vec<Slot>),
    /// A typed record failure: its message and the stage's code.
    Record(String, Option<String>),
    /// A typed group failure: its message and the stage's code.
    Group(String, Option<String>),
}

/// A worker's report of one batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The claim it answers.
    pub claim: Claim,
    /// The opening of the claim's seal: only the claimer has it.
    pub opening: [u8; 32],
    /// Per Grain outcomes, or the attempt error (`(contract?, text)`).
    pub result: Result<Vec<WireOutcome>, (WireFailure, String)>,
}

/// A worker's registration: sent as a request, answered with the owner's
/// fingerprint. Repeated as a heartbeat (capacity = the slots it serves).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// The worker's id.
    pub worker: String,
    /// Its plan fingerprint.
    pub fingerprint: String,
    /// (Call index, slots).
    pub calls: Vec<(u32, u32)>,
}

/// The owner's control subject carries three kinds of frames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ctl {
    /// See [`Claim`].
    Claim(Claim),
    /// See [`Report`].
    Report(Report),
    /// A heartbeat of a registered worker.
    Beat(Hello),
}

#[derive(Default)]
pub(crate) struct W(pub(crate) Vec<u8>);

impl W {
    fn head(kind: u8) -> W {
        W(vec![kind, VERSION])
    }
    fn u8(&mut self, x: u8) {
        self.0.push(x);
    }
    fn u32(&mut self, x: u32) {
        self.0.extend_from_slice(&x.to_le_bytes());
    }
    fn u64(&mut self, x: u64) {
        self.0.extend_from_slice(&x.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u32(b.len() as u32);
        self.0.extend_from_slice(b);
    }
    fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }
    fn slot(&mut self, s: &Slot) {
        match s {
            Slot::None => self.u8(0),
            Slot::Inline(tag, b) => {
                self.u8(1);
                self.str(tag);
                self.bytes(b);
            }
            Slot::Ref(tag, key, n) => {
                self.u8(2);
                self.str(tag);
                self.str(key);
                self.u64(*n);
            }
            Slot::List(items) => {
                self.u8(3);
                self.slots(items);
            }
        }
    }
    fn slots(&mut self, s: &[Slot]) {
        self.u32(s.len() as u32);
        for x in s {
            self.slot(x);
        }
    }
    fn claim(&mut self, c: &Claim) {
        self.u64(c.run);
        self.u64(c.ticket);
        self.u64(c.delivered);
        self.str(&c.worker);
        self.0.extend_from_slice(&c.seal);
        self.0.extend_from_slice(&c.proof);
    }
    fn hello(&mut self, h: &Hello) {
        self.str(&h.worker);
        self.str(&h.fingerprint);
        self.u32(h.calls.len() as u32);
        for &(c, n) in &h.calls {
            self.u32(c);
            self.u32(n);
        }
    }
}

pub(crate) struct R<'a> {
    b: &'a [u8],
    what: &'static str,
}

impl<'a> R<'a> {
    fn open(b: &'a [u8], kind: u8, what: &'static str) -> Result<R<'a>, DistError> {
        let mut r = R { b, what };
        if b.len() > MAX_FRAME {
            return Err(r.err(format!("frame of {} bytes, at most {MAX_FRAME} allowed", b.len())));
        }
        let (k, v) = (r.u8("frame kind")?, r.u8("wire version")?);
        if k != kind || v != VERSION {
            return Err(r.err(format!(
                "frame kind {k} version {v}, expected kind {kind} version {VERSION}"
            )));
        }
        Ok(r)
    }
    fn err(&self, cause: String) -> DistError {
        DistError::Wire {
            what: self.what,
            cause,
        }
    }
    fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8], DistError> {
        let Some((h, t)) = self.b.split_at_checked(n) else {
            return Err(self.err(format!(
                "truncated {field}: needed {n} more bytes, {} left",
                self.b.len()
            )));
        };
        self.b = t;
        Ok(h)
    }
    fn array<const N: usize>(&mut self, field: &str) -> Result<[u8; N], DistError> {
        let h = self.take(N, field)?;
        // `take` returned exactly N bytes.
        Ok(h.try_into().unwrap_or([0; N]))
    }
    fn u8(&mut self, field: &str) -> Result<u8, DistError> {
        Ok(self.array::<1>(field)?[0])
    }
    fn u32(&mut self, field: &str) -> Result<u32, DistError> {
        self.array(field).map(u32::from_le_bytes)
    }
    fn u64(&mut self, field: &str) -> Result<u64, DistError> {
        self.array(field).map(u64::from_le_bytes)
    }
    /// A length-prefixed byte string of at most `max` bytes.
    fn bytes(&mut self, field: &str, max: usize) -> Result<&'a [u8], DistError> {
        let n = self.u32(field)? as usize;
        if n > max {
            return Err(self.err(format!("{field} declares {n} bytes, at most {max} allowed")));
        }
        self.take(n, field)
    }
    /// A UTF-8 string of at most `max` bytes.
    fn str(&mut self, field: &str, max: usize) -> Result<String, DistError> {
        let b = self.bytes(field, max)?;
        std::str::from_utf8(b)
            .map(str::to_owned)
            .map_err(|e| self.err(format!("{field}: {e}")))
    }
    /// A name: tag, key, worker id, fingerprint.
    fn name(&mut self, field: &str) -> Result<String, DistError> {
        self.str(field, MAX_NAME)
    }
    /// A free text (an error message): bounded by the frame alone.
    fn text(&mut self, field: &str) -> Result<String, DistError> {
        self.str(field, MAX_FRAME)
    }
    fn slot(&mut self) -> Result<Slot, DistError> {
        if self.b.first() != Some(&3) {
            return self.element();
        }
        self.u8("slot tag")?;
        let n = self.count("list elements", 1)?;
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(self.element()?);
        }
        Ok(Slot::List(items))
    }
    /// A slot that is not a list (lists do not nest: a frame cannot make
    /// the decoder recurse).
    fn element(&mut self) -> Result<Slot, DistError> {
        Ok(match self.u8("slot tag")? {
            0 => Slot::None,
            1 => Slot::Inline(
                self.name("codec tag")?,
                self.bytes("inline payload", MAX_FRAME)?.to_vec(),
            ),
            2 => Slot::Ref(
                self.name("codec tag")?,
                self.name("store key")?,
                self.u64("stored size")?,
            ),
            t => return Err(self.err(format!("unknown slot tag {t}"))),
        })
    }
    /// A count of items each encoded in at least `min` bytes: at most
    /// [`MAX_ITEMS`], and no more than the bytes left can hold, so a bogus
    /// count cannot make us reserve more than the frame's size (times the
    /// in-memory size of one item over `min`).
    fn count(&mut self, field: &str, min: usize) -> Result<usize, DistError> {
        let n = self.u32(field)? as usize;
        let fit = self.b.len() / min.max(1);
        let allowed = fit.min(MAX_ITEMS);
        if n > allowed {
            return Err(self.err(format!(
                "{field}: count {n} declared, at most {allowed} allowed (cap {MAX_ITEMS}, {} bytes left at ≥ {min} each)",
                self.b.len()
            )));
        }
        Ok(n)
    }
    fn slots(&mut self) -> Result<Vec<Slot>, DistError> {
        let n = self.count("slots", 1)?;
        let mut slots = Vec::with_capacity(n);
        for _ in 0..n {
            slots.push(self.slot()?);
        }
        Ok(slots)
    }
    fn claim(&mut self) -> Result<Claim, DistError> {
        Ok(Claim {
            run: self.u64("run")?,
            ticket: self.u64("ticket")?,
            delivered: self.u64("delivery count")?,
            worker: self.name("worker id")?,
            seal: self.array("claim seal")?,
            proof: self.array("claim proof")?,
        })
    }
    fn hello(&mut self) -> Result<Hello, DistError> {
        let worker = self.name("worker id")?;
        let fingerprint = self.name("plan fingerprint")?;
        let n = self.count("calls", 8)?;
        let mut calls = Vec::with_capacity(n);
        for _ in 0..n {
            calls.push((self.u32("call index")?, self.u32("call slots")?));
        }
        Ok(Hello {
            worker,
            fingerprint,
            calls,
        })
    }
    fn done(self) -> Result<(), DistError> {
        if self.b.is_empty() {
            Ok(())
        } else {
            Err(self.err(format!("{} trailing bytes", self.b.len())))
        }
    }
}

const K_BATCH: u8 = b'B';
const K_CLAIM: u8 = b'C';
const K_REPORT: u8 = b'R';
const K_BEAT: u8 = b'H';

impl BatchMsg {
    /// Encode.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W::head(K_BATCH);
        w.u64(self.ticket);
        w.u64(self.run);
        w.0.extend_from_slice(&self.key);
        w.u32(self.call);
        w.u32(self.arity);
        w.slots(&self.slots);
        w.u32(self.split.len() as u32);
        for &s in &self.split {
            w.u8(u8::from(s));
        }
        w.0
    }

    /// Decode.
    pub fn decode(b: &[u8]) -> Result<BatchMsg, DistError> {
        let mut r = R::open(b, K_BATCH, "batch message")?;
        let m = BatchMsg {
            ticket: r.u64("ticket")?,
            run: r.u64("run")?,
            key: r.array("batch key")?,
            call: r.u32("call")?,
            arity: r.u32("arity")?,
            slots: r.slots()?,
            split: {
                let n = r.count("split flags", 1)?;
                let flags = r.take(n, "split flags")?;
                let mut split = Vec::with_capacity(n);
                for &f in flags {
                    split.push(match f {
                        0 => false,
                        1 => true,
                        t => return Err(r.err(format!("split flag {t}, expected 0 or 1"))),
                    });
                }
                split
            },
        };
        r.done()?;
        Ok(m)
    }
}

impl Hello {
    /// Encode (the hello request and the heartbeat share the body).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W::head(K_BEAT);
        w.hello(self);
        w.0
    }

    /// Decode.
    pub fn decode(b: &[u8]) -> Result<Hello, DistError> {
        let mut r = R::open(b, K_BEAT, "hello")?;
        let h = r.hello()?;
        r.done()?;
        Ok(h)
    }
}

impl Ctl {
    /// Encode.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Ctl::Beat(h) => h.encode(),
            Ctl::Claim(c) => {
                let mut w = W::head(K_CLAIM);
                w.claim(c);
                w.0
            }
            Ctl::Report(rep) => {
                let mut w = W::head(K_REPORT);
                w.claim(&rep.claim);
                w.0.extend_from_slice(&rep.opening);
                match &rep.result {
                    Ok(outs) => {
                        w.u8(0);
                        w.u32(outs.len() as u32);
                        for o in outs {
                            match o {
                                WireOutcome::Ok(s) => {
                                    w.u8(0);
                                    w.slots(s);
                                }
                                // Tags 1 and 2 without a code, 3 and 4 with.
                                WireOutcome::Record(m, code) | WireOutcome::Group(m, code) => {
                                    let group = matches!(o, WireOutcome::Group(..));
                                    w.u8(u8::from(group) + if code.is_some() { 3 } else { 1 });
                                    w.str(m);
                                    if let Some(c) = code {
                                        w.str(c);
                                    }
                                }
                            }
                        }
                    }
                    Err((kind, m)) => {
                        w.u8(match kind {
                            WireFailure::Failed => 1,
                            WireFailure::Contract => 2,
                            WireFailure::Panicked => 3,
                            WireFailure::TimedOut => 4,
                        });
                        w.str(m);
                    }
                }
                w.0
            }
        }
    }

    /// Decode any control frame.
    pub fn decode(b: &[u8]) -> Result<Ctl, DistError> {
        match b.first() {
            Some(&K_BEAT) => Hello::decode(b).map(Ctl::Beat),
            Some(&K_CLAIM) => {
                let mut r = R::open(b, K_CLAIM, "claim")?;
                let c = r.claim()?;
                r.done()?;
                Ok(Ctl::Claim(c))
            }
            Some(&K_REPORT) => {
                let mut r = R::open(b, K_REPORT, "report")?;
                let claim = r.claim()?;
                let opening = r.array("report opening")?;
                let result = match r.u8("result tag")? {
                    0 => {
                        // Each outcome: a tag and a count or a length.
                        let n = r.count("outcomes", 5)?;
                        let mut outs = Vec::with_capacity(n);
                        for _ in 0..n {
                            outs.push(match r.u8("outcome tag")? {
                                0 => WireOutcome::Ok(r.slots()?),
                                1 => WireOutcome::Record(r.text("record failure")?, None),
                                2 => WireOutcome::Group(r.text("group failure")?, None),
                                3 => WireOutcome::Record(
                                    r.text("record failure")?,
                                    Some(r.text("failure code")?),
                                ),
                                4 => WireOutcome::Group(
                                    r.text("group failure")?,
                                    Some(r.text("failure code")?),
                                ),
                                t => return Err(r.err(format!("unknown outcome tag {t}"))),
                            });
                        }
                        Ok(outs)
                    }
                    1 => Err((WireFailure::Failed, r.text("attempt error")?)),
                    2 => Err((WireFailure::Contract, r.text("attempt error")?)),
                    3 => Err((WireFailure::Panicked, r.text("attempt error")?)),
                    4 => Err((WireFailure::TimedOut, r.text("attempt error")?)),
                    t => return Err(r.err(format!("unknown result tag {t}"))),
                };
                r.done()?;
                Ok(Ctl::Report(Report {
                    claim,
                    opening,
                    result,
                }))
            }
            _ => Err(DistError::Wire {
                what: "control frame",
                cause: format!("unknown kind {:?}", b.first()),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_truncation_is_an_error() {
        let b = BatchMsg {
            ticket: 7,
            run: 9,
            key: [7; 16],
            call: 2,
            arity: 2,
            slots: vec![
                Slot::Inline("u32".into(), vec![1, 2]),
                Slot::None,
                Slot::Ref("bytes".into(), "k1".into(), 99),
                Slot::List(vec![
                    Slot::Inline("u32".into(), vec![3]),
                    Slot::Ref("u32".into(), "k2".into(), 4),
                ]),
            ],
            split: vec![true, false],
        };
        let e = b.encode();
        assert_eq!(BatchMsg::decode(&e).unwrap(), b);
        for cut in 0..e.len() {
            assert!(BatchMsg::decode(&e[..cut]).is_err(), "cut at {cut}");
        }
        let claim = Claim {
            run: 5,
            ticket: 1,
            delivered: 2,
            worker: "w".into(),
            seal: [1; 32],
            proof: [2; 32],
        };
        for c in [
            Ctl::Claim(claim.clone()),
            Ctl::Report(Report {
                claim: claim.clone(),
                opening: [3; 32],
                result: Ok(vec![
                    WireOutcome::Ok(vec![Slot::Inline("s".into(), b"x".to_vec())]),
                    WireOutcome::Record("bad".into(), None),
                    WireOutcome::Group("worse".into(), None),
                    WireOutcome::Record("corrupt".into(), Some("pdf.corrupt".into())),
                    WireOutcome::Group("gone".into(), Some("input.missing".into())),
                ]),
            }),
            Ctl::Report(Report {
                claim: claim.clone(),
                opening: [3; 32],
                result: Err((WireFailure::Contract, "contract".into())),
            }),
            Ctl::Beat(Hello {
                worker: "w".into(),
                fingerprint: "f".into(),
                calls: vec![(0, 2), (3, 1)],
            }),
        ] {
            assert_eq!(Ctl::decode(&c.encode()).unwrap(), c);
        }
        assert!(Ctl::decode(b"").is_err());
    }
}
