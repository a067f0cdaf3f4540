//! The fuzz targets: each a plain `fn(&[u8])` that must return for every
//! input; a panic (an `assert!` of an invariant included) is a finding.
//!
//! Targets other than `wire` and `bson` read their input in one of two modes,
//! chosen by the first byte: `0xFF` means "the rest is a BSON document" (a
//! wrapper such as `{filter: ..., docs: [...]}`, how the seeds state real
//! cases and how byte mutation of them reaches the parser), anything else
//! means "decode the rest as choices" ([`crate::gen`]), which turns every
//! input into valid BSON built from the target's vocabulary.
//!
//! Every target runs under an operation context with a deadline
//! ([`TIME_LIMIT_MS`]), as a command does in the server, so work that the
//! interruption checks bound ends with 50 MaxTimeMSExpired instead of hanging
//! the fuzzer; work that no check bounds still shows up as a slow input.

use std::sync::Arc;

use bisondb_error::interrupt::{self, OpCtx};
use bisondb_query::agg::{DocStream, Pipeline};
use bisondb_query::expr::{Expr, Vars};
use bisondb_query::matcher::Matcher;
use bisondb_query::update::UpdateSpec;
use bisondb_wire::{
    decode_frame, encode_op_msg_with_sequences, validate_bson, Frame, MessageCodec, Request,
};
use bson::raw::{RawBsonRef, RawDocument, RawDocumentBuf};
use bson::{Bson, Document};
use bytes::{Bytes, BytesMut};
use tokio_util::codec::Decoder;

use crate::gen::{Gen, Vocab, COMMON_FIELDS};

/// The deadline each execution runs under.
pub const TIME_LIMIT_MS: u64 = 2_000;

/// One fuzz target.
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]),
    /// Real inputs the driver starts from (and cargo-fuzz's seed corpus).
    pub seeds: fn() -> Vec<Vec<u8>>,
}

/// Every target, in the order the short CI run takes them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "wire",
        run: wire,
        seeds: crate::seeds::wire,
    },
    Target {
        name: "bson",
        run: bson_validate,
        seeds: crate::seeds::bson,
    },
    #[cfg(feature = "server")]
    Target {
        name: "command",
        run: crate::command::command,
        seeds: crate::seeds::command,
    },
    Target {
        name: "matcher",
        run: matcher,
        seeds: crate::seeds::matcher,
    },
    Target {
        name: "expr",
        run: expr,
        seeds: crate::seeds::expr,
    },
    Target {
        name: "pipeline",
        run: pipeline,
        seeds: crate::seeds::pipeline,
    },
    Target {
        name: "update",
        run: update,
        seeds: crate::seeds::update,
    },
];

pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// Runs `f` as an operation with the fuzzing deadline.
pub fn bounded<R>(f: impl FnOnce() -> R) -> R {
    let _op = interrupt::enter(Arc::new(OpCtx::with_max_time_ms(TIME_LIMIT_MS)));
    f()
}

/// The first byte's mode: a BSON document (validated as the wire layer does)
/// or generated choices.
pub enum Input<'a> {
    Raw(Document),
    Gen(Gen<'a>),
}

pub const RAW_MODE: u8 = 0xFF;

pub fn input(data: &[u8]) -> Option<Input<'_>> {
    match data.split_first() {
        Some((&RAW_MODE, rest)) => {
            validate_bson(rest).ok()?;
            let raw = RawDocument::from_bytes(rest).ok()?;
            Document::try_from(raw).ok().map(Input::Raw)
        }
        Some((_, rest)) => Some(Input::Gen(Gen::new(rest))),
        None => Some(Input::Gen(Gen::new(&[]))),
    }
}

/// Walks every element of a document, nested ones included.
pub fn walk(doc: &RawDocument) -> Result<(), bson::error::Error> {
    for el in doc {
        let (_, v) = el?;
        walk_value(v)?;
    }
    Ok(())
}

fn walk_value(v: RawBsonRef<'_>) -> Result<(), bson::error::Error> {
    match v {
        RawBsonRef::Document(d) => walk(d),
        RawBsonRef::Array(a) => {
            for x in a {
                walk_value(x?)?;
            }
            Ok(())
        }
        RawBsonRef::JavaScriptCodeWithScope(c) => walk(c.scope),
        _ => Ok(()),
    }
}

// -- wire ---------------------------------------------------------------------

/// Message framing: the codec over the input as a byte stream, then the input
/// as one message. A decoded message's documents must be readable to the end
/// (the server trusts the one validation the wire layer does), and an OP_MSG
/// re-encodes to a message that decodes to the same body and sequences.
pub fn wire(data: &[u8]) {
    bounded(|| {
        let mut codec = MessageCodec::with_max_message_size(1 << 20);
        let mut buf = BytesMut::from(data);
        let mut frames = 0;
        while let Ok(Some(frame)) = codec.decode(&mut buf) {
            check_frame(frame);
            frames += 1;
            if frames > 16 {
                break;
            }
        }
        if let Ok(frame) = Frame::parse(Bytes::copy_from_slice(data)) {
            check_frame(frame);
        }
    })
}

fn check_frame(frame: Frame) {
    let Ok(incoming) = decode_frame(frame) else {
        return;
    };
    match &incoming.request {
        Request::Msg(msg) => {
            let body = msg.body();
            assert!(walk(body).is_ok(), "decoded OP_MSG body does not read back");
            let mut seqs: Vec<(&str, Vec<&RawDocument>)> = Vec::new();
            for s in msg.sequences() {
                let docs: Vec<&RawDocument> = s.documents().collect();
                assert_eq!(docs.len(), s.len(), "sequence length disagrees");
                for d in &docs {
                    assert!(
                        walk(d).is_ok(),
                        "decoded sequence document does not read back"
                    );
                }
                seqs.push((s.identifier(), docs));
            }
            let seq_refs: Vec<(&str, &[&RawDocument])> =
                seqs.iter().map(|(i, d)| (*i, d.as_slice())).collect();
            let again = encode_op_msg_with_sequences(1, 0, 0, body, &seq_refs, None)
                .expect("a decoded OP_MSG re-encodes");
            let frame = Frame::parse(again).expect("a re-encoded OP_MSG frames");
            let Request::Msg(back) = decode_frame(frame)
                .expect("a re-encoded OP_MSG decodes")
                .request
            else {
                panic!("OP_MSG re-encoded as another opcode");
            };
            assert_eq!(back.body().as_bytes(), body.as_bytes());
            assert_eq!(back.sequences().len(), msg.sequences().len());
        }
        Request::Query(q) => {
            assert!(
                walk(&q.query).is_ok(),
                "decoded OP_QUERY does not read back"
            );
            if let Some(f) = &q.return_fields_selector {
                assert!(
                    walk(f).is_ok(),
                    "decoded OP_QUERY selector does not read back"
                );
            }
        }
    }
}

// -- bson ---------------------------------------------------------------------

/// The structural validator: whatever it accepts, the `bson` crate reads to
/// the end (the server relies on that after validating once). Generated
/// documents, which the `bson` crate wrote, must be accepted.
pub fn bson_validate(data: &[u8]) {
    if validate_bson(data).is_ok() {
        let raw = RawDocument::from_bytes(data).expect("validated BSON opens");
        assert!(walk(raw).is_ok(), "validated BSON does not read to the end");
    }
    // The same bytes as choices: a document the bson crate writes must pass.
    let mut g = Gen::new(data);
    let d = g.doc(&ALL_VOCAB, 4);
    if let Ok(bytes) = RawDocumentBuf::try_from(&d) {
        assert!(
            validate_bson(bytes.as_bytes()).is_ok(),
            "the validator refuses a document the bson crate wrote: {d:?}"
        );
    }
}

// -- matcher ------------------------------------------------------------------

pub const QUERY_OPS: &[&str] = &[
    "$all",
    "$alwaysFalse",
    "$alwaysTrue",
    "$and",
    "$bitsAllClear",
    "$bitsAllSet",
    "$bitsAnyClear",
    "$bitsAnySet",
    "$box",
    "$center",
    "$centerSphere",
    "$comment",
    "$elemMatch",
    "$eq",
    "$exists",
    "$expr",
    "$geoIntersects",
    "$geoWithin",
    "$geometry",
    "$gt",
    "$gte",
    "$in",
    "$jsonSchema",
    "$lt",
    "$lte",
    "$maxDistance",
    "$minDistance",
    "$mod",
    "$ne",
    "$near",
    "$nearSphere",
    "$nin",
    "$nor",
    "$not",
    "$options",
    "$or",
    "$polygon",
    "$regex",
    "$sampleRate",
    "$size",
    "$text",
    "$search",
    "$language",
    "$caseSensitive",
    "$type",
    "bsonType",
    "properties",
    "required",
    "minimum",
    "maxLength",
    "items",
    "enum",
    "coordinates",
    "type",
];

const QUERY_VOCAB: Vocab = Vocab {
    ops: QUERY_OPS,
    fields: COMMON_FIELDS,
    strings: &[],
};

fn docs_of(v: Option<&Bson>) -> Vec<Document> {
    match v {
        Some(Bson::Array(a)) => a
            .iter()
            .filter_map(|d| match d {
                Bson::Document(d) => Some(d.clone()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Filter parse, then match over a few documents.
pub fn matcher(data: &[u8]) {
    let Some(inp) = input(data) else { return };
    let (filter, docs) = match inp {
        Input::Raw(d) => (
            d.get_document("filter").cloned().unwrap_or_default(),
            docs_of(d.get("docs")),
        ),
        Input::Gen(mut g) => {
            let mut f = Document::new();
            for _ in 0..=g.below(3) {
                let k = if g.below(4) == 0 {
                    g.pick(&["$and", "$or", "$nor", "$expr", "$comment", "$text"])
                        .to_string()
                } else {
                    g.key(&QUERY_VOCAB)
                };
                let v = match g.below(3) {
                    0 => g.scalar(&QUERY_VOCAB),
                    _ => g.value(&QUERY_VOCAB, 4),
                };
                f.insert(k, v);
            }
            (f, g.data_docs(4))
        }
    };
    run_matcher(&filter, &docs);
}

fn run_matcher(filter: &Document, docs: &[Document]) {
    let Ok(raw_filter) = RawDocumentBuf::try_from(filter) else {
        return;
    };
    bounded(|| {
        if let Ok(m) = Matcher::parse(&raw_filter) {
            for d in docs {
                if let Ok(raw) = RawDocumentBuf::try_from(d) {
                    let a = m.matches(&raw);
                    let b = m.matches_doc(d);
                    if !interrupt::interrupted() {
                        assert_eq!(a, b, "raw and owned matching disagree on {d:?}");
                    }
                }
            }
        }
    })
}

// -- expressions --------------------------------------------------------------

pub const EXPR_OPS: &[&str] = &[
    "$abs",
    "$acos",
    "$acosh",
    "$add",
    "$allElementsTrue",
    "$and",
    "$anyElementTrue",
    "$arrayElemAt",
    "$arrayToObject",
    "$asin",
    "$asinh",
    "$atan",
    "$atanh",
    "$avg",
    "$binarySize",
    "$bitAnd",
    "$bitNot",
    "$bitOr",
    "$bitXor",
    "$bsonSize",
    "$ceil",
    "$cmp",
    "$concat",
    "$concatArrays",
    "$cond",
    "$convert",
    "$cos",
    "$cosh",
    "$dateAdd",
    "$dateDiff",
    "$dateFromParts",
    "$dateFromString",
    "$dateSubtract",
    "$dateToParts",
    "$dateToString",
    "$dateTrunc",
    "$dayOfMonth",
    "$dayOfWeek",
    "$dayOfYear",
    "$degreesToRadians",
    "$divide",
    "$eq",
    "$exp",
    "$filter",
    "$first",
    "$firstN",
    "$floor",
    "$getField",
    "$gt",
    "$gte",
    "$hour",
    "$ifNull",
    "$in",
    "$indexOfArray",
    "$indexOfBytes",
    "$indexOfCP",
    "$isArray",
    "$isNumber",
    "$isoDayOfWeek",
    "$isoWeek",
    "$isoWeekYear",
    "$last",
    "$lastN",
    "$let",
    "$literal",
    "$ln",
    "$log",
    "$log10",
    "$lt",
    "$lte",
    "$ltrim",
    "$map",
    "$max",
    "$maxN",
    "$median",
    "$mergeObjects",
    "$meta",
    "$millisecond",
    "$min",
    "$minN",
    "$minute",
    "$mod",
    "$month",
    "$multiply",
    "$ne",
    "$not",
    "$objectToArray",
    "$or",
    "$percentile",
    "$pow",
    "$radiansToDegrees",
    "$rand",
    "$range",
    "$reduce",
    "$regexFind",
    "$regexFindAll",
    "$regexMatch",
    "$replaceAll",
    "$replaceOne",
    "$reverseArray",
    "$round",
    "$rtrim",
    "$second",
    "$setDifference",
    "$setEquals",
    "$setField",
    "$setIntersection",
    "$setIsSubset",
    "$setUnion",
    "$sin",
    "$sinh",
    "$size",
    "$slice",
    "$sortArray",
    "$split",
    "$sqrt",
    "$stdDevPop",
    "$stdDevSamp",
    "$strLenBytes",
    "$strLenCP",
    "$strcasecmp",
    "$substr",
    "$substrBytes",
    "$substrCP",
    "$subtract",
    "$sum",
    "$switch",
    "$tan",
    "$tanh",
    "$toBool",
    "$toDate",
    "$toDecimal",
    "$toDouble",
    "$toHashedIndexKey",
    "$toInt",
    "$toLong",
    "$toLower",
    "$toObjectId",
    "$toString",
    "$toUpper",
    "$trim",
    "$trunc",
    "$tsIncrement",
    "$tsSecond",
    "$type",
    "$unsetField",
    "$week",
    "$year",
    "$zip",
];

pub const EXPR_FIELDS: &[&str] = &[
    "input",
    "n",
    "date",
    "unit",
    "amount",
    "startDate",
    "endDate",
    "format",
    "timezone",
    "onError",
    "onNull",
    "to",
    "vars",
    "in",
    "as",
    "cond",
    "if",
    "then",
    "else",
    "regex",
    "options",
    "find",
    "replacement",
    "inputs",
    "useLongestLength",
    "defaults",
    "sortBy",
    "year",
    "month",
    "day",
    "hour",
    "isoWeekYear",
    "binSize",
    "startOfWeek",
    "branches",
    "case",
    "default",
    "initialValue",
    "each",
    "field",
    "value",
    "chars",
    "limit",
    "p",
    "method",
    "dateString",
    "size",
    "a",
    "b",
    "c",
    "_id",
    "x",
];

pub const EXPR_STRINGS: &[&str] = &[
    "$$this",
    "$$value",
    "$$x",
    "$$ROOT",
    "$a",
    "$b.c",
    "%Y-%m-%dT%H:%M:%S.%LZ",
    "%G-W%V-%u",
    "%j",
    "%%",
    "%Z",
    "%z",
    "millisecond",
    "second",
    "minute",
    "quarter",
    "monday",
    "sunday",
    "approximate",
    "textScore",
    "indexKey",
    "randVal",
    "searchScore",
    "int",
    "objectId",
    "2021-02-29",
    "1970-01-01T00:00:00Z",
    "America/New_York",
    "Asia/Kolkata",
    "+14:00",
    "-23:59",
];

const EXPR_VOCAB: Vocab = Vocab {
    ops: EXPR_OPS,
    fields: EXPR_FIELDS,
    strings: EXPR_STRINGS,
};

/// Expression parse, then evaluation against one document.
pub fn expr(data: &[u8]) {
    let Some((e, doc)) = expr_case(data) else {
        return;
    };
    bounded(|| {
        if let Ok(parsed) = Expr::parse(&e) {
            let _ = parsed.eval(&doc, &Vars::new());
        }
    })
}

/// The expression and document an `expr` input stands for.
pub fn expr_case(data: &[u8]) -> Option<(Bson, Document)> {
    let inp = input(data)?;
    Some(match inp {
        Input::Raw(d) => (
            d.get("expr").cloned().unwrap_or(Bson::Null),
            d.get_document("doc").cloned().unwrap_or_default(),
        ),
        Input::Gen(mut g) => {
            let e = if g.below(4) == 0 {
                g.value(&EXPR_VOCAB, 5)
            } else {
                Bson::Document(g.op_doc(&EXPR_VOCAB, 5))
            };
            (e, g.data_doc())
        }
    })
}

// -- pipelines ----------------------------------------------------------------

pub const STAGES: &[&str] = &[
    "$addFields",
    "$bucket",
    "$bucketAuto",
    "$count",
    "$densify",
    "$documents",
    "$facet",
    "$fill",
    "$geoNear",
    "$graphLookup",
    "$group",
    "$limit",
    "$lookup",
    "$match",
    "$project",
    "$redact",
    "$replaceRoot",
    "$replaceWith",
    "$sample",
    "$set",
    "$setWindowFields",
    "$skip",
    "$sort",
    "$sortByCount",
    "$unionWith",
    "$unset",
    "$unwind",
    "$out",
    "$merge",
];

pub const STAGE_FIELDS: &[&str] = &[
    "_id",
    "groupBy",
    "boundaries",
    "default",
    "output",
    "buckets",
    "granularity",
    "field",
    "range",
    "step",
    "bounds",
    "partitionByFields",
    "partitionBy",
    "sortBy",
    "window",
    "documents",
    "range",
    "unit",
    "method",
    "value",
    "near",
    "distanceField",
    "spherical",
    "key",
    "from",
    "localField",
    "foreignField",
    "as",
    "pipeline",
    "let",
    "connectFromField",
    "connectToField",
    "startWith",
    "maxDepth",
    "depthField",
    "newRoot",
    "path",
    "includeArrayIndex",
    "preserveNullAndEmptyArrays",
    "size",
    "count",
    "a",
    "b",
    "c",
    "x",
    "total",
    "$sum",
    "$avg",
    "$push",
    "$addToSet",
    "$first",
    "$last",
    "$max",
    "$min",
    "$count",
    "$top",
    "$bottom",
    "$topN",
    "$bottomN",
    "$firstN",
    "$lastN",
    "$maxN",
    "$minN",
    "$median",
    "$percentile",
    "$stdDevPop",
    "$stdDevSamp",
    "$mergeObjects",
    "$rank",
    "$denseRank",
    "$documentNumber",
    "$shift",
    "$derivative",
    "$integral",
    "$expMovingAvg",
    "$covariancePop",
    "$covarianceSamp",
    "$locf",
    "$linearFill",
    "documents",
];

pub const PIPELINE_STRINGS: &[&str] = &[
    "$a",
    "$b",
    "$c",
    "$arr",
    "$tags",
    "$x",
    "$_id",
    "$$ROOT",
    "$$KEEP",
    "$$PRUNE",
    "$$DESCEND",
    "full",
    "partition",
    "R5",
    "1-2-5",
    "E12",
    "POWERSOF2",
    "unbounded",
    "current",
    "linear",
    "locf",
    "c",
    "other",
];

const PIPELINE_VOCAB: Vocab = Vocab {
    ops: EXPR_OPS,
    fields: STAGE_FIELDS,
    strings: PIPELINE_STRINGS,
};

/// Pipeline parse, then a run over a few documents.
pub fn pipeline(data: &[u8]) {
    let Some(inp) = input(data) else { return };
    let (stages, docs) = match inp {
        Input::Raw(d) => (docs_of(d.get("pipeline")), docs_of(d.get("docs"))),
        Input::Gen(mut g) => {
            let mut stages = Vec::new();
            for _ in 0..=g.below(3) {
                let mut s = Document::new();
                let name = g.pick(STAGES);
                let arg = match name {
                    "$match" => Bson::Document(g.doc(&QUERY_VOCAB, 3)),
                    "$limit" | "$skip" | "$sample" | "$count" | "$unwind" | "$sortByCount" => {
                        g.value(&PIPELINE_VOCAB, 2)
                    }
                    _ => Bson::Document(g.doc(&PIPELINE_VOCAB, 4)),
                };
                s.insert(name, arg);
                stages.push(s);
            }
            (stages, g.data_docs(6))
        }
    };
    bounded(|| {
        if let Ok(p) = Pipeline::parse(&stages) {
            let input: DocStream = Box::new(docs.into_iter().map(Ok));
            let _ = p.run(input).take(10_000).count();
        }
    })
}

// -- updates ------------------------------------------------------------------

/// The modifiers the update parser knows: its own table, so the fuzzer
/// follows it.
pub const UPDATE_OPS: &[&str] = bisondb_query::update::MODIFIERS;

pub const UPDATE_PATHS: &[&str] = &[
    "a",
    "a.b",
    "a.0",
    "a.$",
    "a.$[]",
    "a.$[x]",
    "a.$[y].b",
    "arr.$[]",
    "arr.$[x]",
    "b.1.c",
    "c",
    "a.5",
    "_id",
    "_id.a",
    "tags",
    "tags.$",
    "n",
    "x.y.z",
    "a.b.$[]",
    "$each",
    "$slice",
    "$sort",
    "$position",
    "and",
    "or",
    "xor",
    "$type",
    "$in",
    "$gt",
    "x",
    "x.a",
    "y",
];

const UPDATE_VOCAB: Vocab = Vocab {
    ops: UPDATE_OPS,
    fields: UPDATE_PATHS,
    strings: &["timestamp", "date", "a", "b", "x.y"],
};

const FILTER_VOCAB: Vocab = Vocab {
    ops: &[
        "$gt",
        "$lt",
        "$in",
        "$eq",
        "$ne",
        "$exists",
        "$elemMatch",
        "$type",
        "$regex",
    ],
    fields: &["x", "y", "x.a", "y.b", "a", "a.b", "arr"],
    strings: &[],
};

/// Update parse and application: a failed update leaves the document as it
/// was.
pub fn update(data: &[u8]) {
    let Some(inp) = input(data) else { return };
    let (u, array_filters, doc, query, inserting) = match inp {
        Input::Raw(d) => (
            d.get("u").cloned().unwrap_or(Bson::Null),
            docs_of(d.get("arrayFilters")),
            d.get_document("doc").cloned().unwrap_or_default(),
            d.get_document("q").cloned().unwrap_or_default(),
            d.get_bool("upsert").unwrap_or(false),
        ),
        Input::Gen(mut g) => {
            let u = if g.below(5) == 0 {
                let mut stages = Vec::new();
                for _ in 0..=g.below(2) {
                    let mut s = Document::new();
                    let name = g.pick(&[
                        "$set",
                        "$addFields",
                        "$project",
                        "$unset",
                        "$replaceRoot",
                        "$replaceWith",
                        "$group",
                    ]);
                    s.insert(name, g.value(&EXPR_VOCAB, 3));
                    stages.push(Bson::Document(s));
                }
                Bson::Array(stages)
            } else {
                let mut u = Document::new();
                for _ in 0..=g.below(3) {
                    let m = g.pick(UPDATE_OPS);
                    let mut inner = match u.get(m) {
                        Some(Bson::Document(x)) => x.clone(),
                        _ => Document::new(),
                    };
                    let k = g.key(&UPDATE_VOCAB);
                    let v = if g.below(3) == 0 {
                        Bson::Document(g.doc(&UPDATE_VOCAB, 2))
                    } else {
                        g.value(&UPDATE_VOCAB, 3)
                    };
                    inner.insert(k, v);
                    u.insert(m, inner);
                }
                Bson::Document(u)
            };
            let mut filters = Vec::new();
            for _ in 0..g.below(3) {
                filters.push(g.doc(&FILTER_VOCAB, 2));
            }
            let q = if g.bool() {
                g.doc(&FILTER_VOCAB, 2)
            } else {
                Document::new()
            };
            let inserting = g.bool();
            (u, filters, g.data_doc(), q, inserting)
        }
    };
    bounded(|| {
        let spec = match &u {
            Bson::Document(d) => UpdateSpec::parse_with_array_filters(d, &array_filters),
            Bson::Array(a) => UpdateSpec::parse_pipeline(&docs_of(Some(&Bson::Array(a.clone())))),
            _ => return,
        };
        let Ok(spec) = spec else { return };
        let matcher = RawDocumentBuf::try_from(&query)
            .ok()
            .and_then(|q| Matcher::parse(&q).ok());
        let mut target = doc.clone();
        let r = spec.apply_with_query(&mut target, inserting, matcher.as_ref());
        if r.is_err() {
            // Compared as bytes: a NaN is not equal to itself as a `Bson`.
            let bytes = |d: &Document| RawDocumentBuf::try_from(d).map(|r| r.into_bytes()).ok();
            assert_eq!(
                bytes(&target),
                bytes(&doc),
                "a failed update changed the document"
            );
        }
    })
}

/// Every vocabulary at once (the BSON target's generated documents).
pub const ALL_VOCAB: Vocab = Vocab {
    ops: EXPR_OPS,
    fields: STAGE_FIELDS,
    strings: EXPR_STRINGS,
};

#[cfg(test)]
mod tests {
    /// Prints the case of an input file (`BISONDB_FUZZ_SHOW=path`).
    #[test]
    fn show() {
        if let Ok(path) = std::env::var("BISONDB_FUZZ_SHOW") {
            let data = std::fs::read(path).unwrap_or_default();
            println!("{:?}", super::expr_case(&data));
        }
    }
}
