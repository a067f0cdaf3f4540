//! The index write buffer: how the lsm engine takes secondary-index entries
//! without paying fjall's per-entry write path on the inserting thread.
//!
//! Index keys arrive in random order (a date, a name), one or more per
//! document. Written straight into fjall, each one is a journal record, a
//! refcounted key and value, and a skip-list insert that misses the cache all
//! the way down from the head of a 16 MiB memtable: on seed 003's load that was
//! two thirds of the inserting thread's time (docs/PERFORMANCE.md, issue 4).
//!
//! Instead, a batch's index-region operations (already sorted, one per key)
//! become one immutable [`Run`]:
//! - its encoding is journaled as a single value (a "blob", split into parts
//!   of at most [`PART_BYTES`]) in the `ixbuf` keyspace, in the same atomic
//!   fjall batch as the documents, so a crash keeps both or neither;
//! - the run itself joins the in-memory list that every snapshot captures, and
//!   reads merge the runs (newest first) over the index keyspace.
//!
//! A background thread merges runs of the same size class into larger ones
//! ([`FAN_IN`] at a time, so a read merges at most a few dozen runs) and, once
//! the runs hold [`LsmOptions::index_buffer_bytes`](super::LsmOptions), streams
//! all of them in key order into new tables of the index keyspace through
//! fjall's ingestion (no journal, no memtable), then deletes their blobs. The
//! order of those steps is what keeps readers right:
//! 1. ingest: the entries are now in fjall *and* still in the runs; a reader
//!    seeing both gets the same answer, since the runs win and repeat the
//!    same operations;
//! 2. delete the blobs (one journaled batch);
//! 3. drop the runs from the list.
//!
//! A crash between 1 and 2 replays the blobs on open, which is harmless for
//! the same reason. Opening replays whatever blobs are left (ingesting them at
//! once), and a clean close ingests everything, so a restart finds no blobs.
//!
//! Invariant: keys of the index region are written only through this buffer
//! (or by ingestion from it); a direct fjall write there could be shadowed by
//! an older buffered operation on the same key.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;

use bisondb_engine::BatchOp;
use bisondb_engine::EngineError;

/// Runs of one size class merged into one of the next class.
pub(super) const FAN_IN: usize = 8;

/// Largest blob part journaled as one fjall value.
pub(super) const PART_BYTES: usize = 32 << 20;

/// Entry tags in the encoding.
const TOMBSTONE: u8 = 0;
const VALUE: u8 = 1;

/// Sorted, deduplicated index-region operations: one committed batch's, or
/// several merged. Encoded as `tag:u8 klen:u32le key [vlen:u32le value]` per
/// entry (the value only for `VALUE`), which is also the journaled blob.
pub(super) struct Run {
    data: Vec<u8>,
    /// Start of each entry in `data`.
    starts: Vec<usize>,
    /// The newest blob sequence number whose operations it holds.
    pub(super) max_seq: u64,
    /// Size class: 0 for a batch's run, n + 1 for a merge of class-n runs.
    pub(super) level: u8,
}

/// One operation: a key and its value, or `None` for a deletion.
pub(super) type Op<'a> = (&'a [u8], Option<&'a [u8]>);

impl Run {
    /// Bytes of encoded entries (what counts toward the buffer's size).
    pub(super) fn bytes(&self) -> usize {
        self.data.len()
    }

    pub(super) fn len(&self) -> usize {
        self.starts.len()
    }

    /// The encoded entries, split at entry boundaries into parts of at most
    /// [`PART_BYTES`] (a single larger entry gets a part of its own).
    pub(super) fn parts(&self) -> Vec<&[u8]> {
        let mut parts = Vec::new();
        let mut from = 0usize;
        for &s in &self.starts {
            if s > from && s - from >= PART_BYTES {
                parts.push(self.data.get(from..s).unwrap_or_default());
                from = s;
            }
        }
        if from < self.data.len() {
            parts.push(self.data.get(from..).unwrap_or_default());
        }
        parts
    }

    /// Entry `i`. The encoding was checked when the run was built or decoded, so
    /// the fallbacks below never apply; they keep a bug from becoming a panic.
    pub(super) fn entry(&self, i: usize) -> Op<'_> {
        let at = self.starts.get(i).copied().unwrap_or(self.data.len());
        parse(&self.data, at)
            .map(|(op, _)| op)
            .unwrap_or((&[], None))
    }

    pub(super) fn key(&self, i: usize) -> &[u8] {
        self.entry(i).0
    }

    /// The newest operation on `key` in this run: `Some(None)` for a deletion,
    /// `None` when the run does not mention the key.
    pub(super) fn get(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        let i = self.lower(Bound::Included(key));
        match self.entry(i) {
            (k, v) if i < self.len() && k == key => Some(v),
            _ => None,
        }
    }

    /// Index of the first entry at or after the lower bound `b`.
    fn lower(&self, b: Bound<&[u8]>) -> usize {
        match b {
            Bound::Unbounded => 0,
            Bound::Included(s) => self.partition(|k| k < s),
            Bound::Excluded(s) => self.partition(|k| k <= s),
        }
    }

    /// Index one past the last entry within the upper bound `b`.
    fn upper(&self, b: Bound<&[u8]>) -> usize {
        match b {
            Bound::Unbounded => self.len(),
            Bound::Included(e) => self.partition(|k| k <= e),
            Bound::Excluded(e) => self.partition(|k| k < e),
        }
    }

    fn partition(&self, before: impl Fn(&[u8]) -> bool) -> usize {
        let (mut lo, mut hi) = (0usize, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if before(self.key(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

/// Decodes the entry starting at `at`: the operation and where the next starts.
fn parse(data: &[u8], at: usize) -> Option<(Op<'_>, usize)> {
    let tag = *data.get(at)?;
    let (key, next) = field(data, at.checked_add(1)?)?;
    match tag {
        TOMBSTONE => Some(((key, None), next)),
        VALUE => {
            let (value, next) = field(data, next)?;
            Some(((key, Some(value)), next))
        }
        _ => None,
    }
}

/// A `len:u32le bytes` field at `at`.
fn field(data: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let len_end = at.checked_add(4)?;
    let len = u32::from_le_bytes(data.get(at..len_end)?.try_into().ok()?) as usize;
    let end = len_end.checked_add(len)?;
    Some((data.get(len_end..end)?, end))
}

/// Builds a run from entries given in strictly ascending key order.
#[derive(Default)]
pub(super) struct RunBuilder {
    data: Vec<u8>,
    starts: Vec<usize>,
}

impl RunBuilder {
    pub(super) fn with_capacity(entries: usize, bytes: usize) -> RunBuilder {
        RunBuilder {
            data: Vec::with_capacity(bytes),
            starts: Vec::with_capacity(entries),
        }
    }

    /// Appends one operation; refuses a key or value too long to encode.
    pub(super) fn push(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<(), EngineError> {
        let len = |b: &[u8]| {
            u32::try_from(b.len()).map_err(|_| {
                EngineError::InvalidArgument(format!(
                    "index entry of {} bytes is too large to store",
                    b.len()
                ))
            })
        };
        let klen = len(key)?;
        let vlen = value.map(len).transpose()?;
        self.starts.push(self.data.len());
        self.data
            .push(if value.is_some() { VALUE } else { TOMBSTONE });
        self.data.extend_from_slice(&klen.to_le_bytes());
        self.data.extend_from_slice(key);
        if let (Some(v), Some(vlen)) = (value, vlen) {
            self.data.extend_from_slice(&vlen.to_le_bytes());
            self.data.extend_from_slice(v);
        }
        Ok(())
    }

    pub(super) fn finish(self, max_seq: u64, level: u8) -> Run {
        Run {
            data: self.data,
            starts: self.starts,
            max_seq,
            level,
        }
    }
}

/// The run of a batch's index-region operations (sorted, one per key, as the
/// engine's commit prepares them); the commit sets its `max_seq` once the
/// blob has its sequence number.
pub(super) fn run_of_ops(ops: &[BatchOp]) -> Result<Run, EngineError> {
    let bytes = ops
        .iter()
        .map(|op| match op {
            BatchOp::Put(k, v) | BatchOp::Insert(k, v) => 9 + k.len() + v.len(),
            BatchOp::Delete(k) => 5 + k.len(),
        })
        .fold(0usize, usize::saturating_add);
    let mut b = RunBuilder::with_capacity(ops.len(), bytes);
    for op in ops {
        match op {
            BatchOp::Put(k, v) | BatchOp::Insert(k, v) => b.push(k, Some(v))?,
            BatchOp::Delete(k) => b.push(k, None)?,
        }
    }
    Ok(b.finish(0, 0))
}

/// Decodes journaled blob parts (in order) back into a run, checking every
/// length and that keys strictly ascend.
pub(super) fn decode_run(parts: &[&[u8]], seq: u64) -> Result<Run, EngineError> {
    let mut data = Vec::with_capacity(parts.iter().map(|p| p.len()).sum());
    for p in parts {
        data.extend_from_slice(p);
    }
    let mut starts = Vec::new();
    let mut at = 0usize;
    let mut last: Option<&[u8]> = None;
    while at < data.len() {
        let bad = || EngineError::Corrupt(format!("index write buffer blob {seq} is damaged"));
        let ((key, _), next) = parse(&data, at).ok_or_else(bad)?;
        if last.is_some_and(|l| l >= key) {
            return Err(bad());
        }
        last = Some(key);
        starts.push(at);
        at = next;
    }
    Ok(Run {
        data,
        starts,
        max_seq: seq,
        level: 0,
    })
}

/// The operations of `runs` within `[lo, hi)`-style bounds, merged into one key
/// order (descending when `reverse`), one per key: where runs disagree the
/// later (newer) one in the slice wins.
pub(super) struct Merged<'a> {
    runs: &'a [Arc<Run>],
    /// Per run, the entries `[next, end)` not yet consumed.
    pos: Vec<(usize, usize)>,
    reverse: bool,
}

impl<'a> Merged<'a> {
    pub(super) fn new(
        runs: &'a [Arc<Run>],
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        reverse: bool,
    ) -> Merged<'a> {
        let pos = runs
            .iter()
            .map(|r| {
                let (a, b) = (r.lower(lo), r.upper(hi));
                (a, b.max(a))
            })
            .collect();
        Merged { runs, pos, reverse }
    }

    fn head(&self, r: usize) -> Option<Op<'a>> {
        let (next, end) = *self.pos.get(r)?;
        if next >= end {
            return None;
        }
        let run: &'a Run = self.runs.get(r)?;
        Some(run.entry(if self.reverse { end - 1 } else { next }))
    }
}

impl<'a> Iterator for Merged<'a> {
    type Item = Op<'a>;

    fn next(&mut self) -> Option<Op<'a>> {
        let mut best: Option<Op<'a>> = None;
        for r in 0..self.pos.len() {
            let Some(op) = self.head(r) else { continue };
            best = match best {
                None => Some(op),
                Some(b) => {
                    let ord = op.0.cmp(b.0);
                    let first = if self.reverse {
                        Ordering::Greater
                    } else {
                        Ordering::Less
                    };
                    // Equal keys: the later run is newer and replaces the pick.
                    if ord == first || ord == Ordering::Equal {
                        Some(op)
                    } else {
                        Some(b)
                    }
                }
            };
        }
        let best = best?;
        for r in 0..self.pos.len() {
            if self.head(r).is_some_and(|(k, _)| k == best.0) {
                if let Some(p) = self.pos.get_mut(r) {
                    if self.reverse {
                        p.1 -= 1;
                    } else {
                        p.0 += 1;
                    }
                }
            }
        }
        Some(best)
    }
}

/// Merges `runs` (oldest first) into one run of class `level`. Deletions are
/// kept: older data in fjall may still need shadowing.
pub(super) fn merge(runs: &[Arc<Run>], level: u8) -> Result<Run, EngineError> {
    let entries = runs.iter().map(|r| r.len()).sum();
    let bytes = runs.iter().map(|r| r.bytes()).sum();
    let max_seq = runs.iter().map(|r| r.max_seq).max().unwrap_or(0);
    if let Some(order) = disjoint_in_key_order(runs) {
        // No key is in two runs, so nothing shadows anything: the runs'
        // entries, one run after the other in key order, are the merge.
        // Increasing keys (ObjectId `_id`s, a record-id collection's `_id`
        // index) make every merge one of these; comparing every head took a
        // fifth of the server's time on `timeseries-batch`.
        let mut data = Vec::with_capacity(bytes);
        let mut starts = Vec::with_capacity(entries);
        for r in order {
            let base = data.len();
            starts.extend(r.starts.iter().map(|s| s + base));
            data.extend_from_slice(&r.data);
        }
        return Ok(Run {
            data,
            starts,
            max_seq,
            level,
        });
    }
    let mut b = RunBuilder::with_capacity(entries, bytes);
    for (k, v) in Merged::new(runs, Bound::Unbounded, Bound::Unbounded, false) {
        b.push(k, v)?;
    }
    Ok(b.finish(max_seq, level))
}

/// Every entry of `runs` (oldest first) in key order, the newest operation
/// on each key, as [`Merged`] gives them; when no key is in two runs (an
/// increasing `_id` index), run after run without comparing heads, which
/// took most of an ingestion's own time.
pub(super) fn all_in_key_order<'a>(runs: &'a [Arc<Run>]) -> Box<dyn Iterator<Item = Op<'a>> + 'a> {
    match disjoint_in_key_order(runs) {
        Some(order) => Box::new(
            order
                .into_iter()
                .flat_map(|r| (0..r.len()).map(move |i| r.entry(i))),
        ),
        None => Box::new(Merged::new(runs, Bound::Unbounded, Bound::Unbounded, false)),
    }
}

/// The non-empty runs ordered by their first key, when each one's keys all
/// sort before the next one's.
fn disjoint_in_key_order(runs: &[Arc<Run>]) -> Option<Vec<&Run>> {
    let mut order: Vec<&Run> = runs
        .iter()
        .map(|r| r.as_ref())
        .filter(|r| r.len() > 0)
        .collect();
    order.sort_by(|a, b| a.entry(0).0.cmp(b.entry(0).0));
    order
        .windows(2)
        .all(|w| match w {
            [a, b] => a.entry(a.len() - 1).0 < b.entry(0).0,
            _ => true,
        })
        .then_some(order)
}

/// The first group of [`FAN_IN`] adjacent runs of one class, if any: merging
/// it keeps the list ordered oldest first, and classes non-increasing.
pub(super) fn mergeable(runs: &[Arc<Run>]) -> Option<std::ops::Range<usize>> {
    let mut start = 0usize;
    for i in 1..=runs.len() {
        let same = match (runs.get(i), runs.get(start)) {
            (Some(a), Some(b)) => a.level == b.level,
            _ => false,
        };
        if !same {
            if i - start >= FAN_IN {
                return Some(start..start + FAN_IN);
            }
            start = i;
        }
    }
    None
}

#[cfg(test)]
mod tests;
