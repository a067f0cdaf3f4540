//! `$sample: {size: n}`: n documents chosen uniformly at random (reservoir
//! sampling, so memory stays bounded by n).

use crate::agg::{spec_doc, DocStream, RunCtx, Stage};
use crate::value::type_name;
use bisondb_error::{MongoError, MongoResult};
use bson::{Bson, Document};
use std::hash::{BuildHasher, Hasher};

#[derive(Debug)]
pub(crate) struct SampleStage {
    size: u64,
}

pub(crate) fn parse(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    let spec = spec_doc(arg, 28745, |_| {
        "the $sample stage specification must be an object".to_string()
    })?;
    let mut size = None;
    for (k, v) in spec {
        if k != "size" {
            return Err(MongoError::location(
                28748,
                format!("unrecognized option to $sample: {k}"),
            ));
        }
        let n = match v {
            Bson::Int32(i) => i64::from(*i),
            Bson::Int64(i) => *i,
            Bson::Double(d) if d.is_finite() => *d as i64,
            other => {
                return Err(MongoError::location(
                    28746,
                    format!(
                        "size argument to $sample must be a number, found {}",
                        type_name(other)
                    ),
                ))
            }
        };
        size = Some(u64::try_from(n).map_err(|_| {
            MongoError::location(28747, "size argument to $sample must not be negative")
        })?);
    }
    let size =
        size.ok_or_else(|| MongoError::location(28749, "$sample stage must specify a size"))?;
    Ok(vec![Box::new(SampleStage { size })])
}

/// A small xorshift generator seeded from the standard library's per-process
/// random hasher keys (no extra dependency needed for sampling).
struct Rng(u64);

impl Rng {
    fn new() -> Rng {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(0x9e37_79b9_7f4a_7c15);
        Rng(h.finish() | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn sample_all(size: u64, input: DocStream) -> MongoResult<Vec<Document>> {
    let k = usize::try_from(size).unwrap_or(usize::MAX);
    let mut rng = Rng::new();
    let mut res: Vec<Document> = Vec::new();
    let mut seen: u64 = 0;
    for r in input {
        let d = r?;
        seen += 1;
        if res.len() < k {
            res.push(d);
        } else {
            let j = rng.below(seen);
            if let Some(slot) = usize::try_from(j).ok().and_then(|j| res.get_mut(j)) {
                *slot = d;
            }
        }
    }
    // Shuffle so the output order is random too.
    for i in (1..res.len()).rev() {
        let j = usize::try_from(rng.below(i as u64 + 1)).unwrap_or(0);
        res.swap(i, j);
    }
    Ok(res)
}

impl Stage for SampleStage {
    fn run(self: Box<Self>, input: DocStream, _cx: &RunCtx) -> DocStream {
        let size = self.size;
        crate::agg::blocking(input, move |inp| sample_all(size, inp))
    }
}
