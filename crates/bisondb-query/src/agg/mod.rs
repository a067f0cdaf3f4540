//! Aggregation pipelines: parsing stage specifications and running them as a
//! chain of iterators over documents.
//!
//! Stages live one per file in `stages/` and are registered in one sorted
//! table ([`STAGES`]), with the stages the server supplies (they read what
//! only it has: storage statistics, index usage, its session cache), which
//! run through the [`ServerStages`] it hands the pipeline; mongod stage names
//! BisonDB does not build yet are in a second table so they fail with
//! NotImplemented rather than as unknown.
//! Streaming stages pull one document at a time; blocking ones (`$group`,
//! `$sort`, `$count`) drain their input on the first pull.

pub mod accumulators;
pub mod output;
pub mod spill;
mod stages;
pub(crate) mod update_pipeline;

pub use stages::internal_unpack_bucket::{bucket_columns, try_unpack_bucket, unpack_bucket};

use crate::collation::Collation;
use crate::expr::Vars;
use bisondb_error::interrupt::Checked;
use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{Bson, DateTime, Document};
use std::fmt::Debug;
use std::sync::Arc;

/// A stream of documents (or the first error) flowing between stages.
pub type DocStream = Box<dyn Iterator<Item = MongoResult<Document>> + Send>;

/// Stored documents as the scan reads them, for a pipeline whose first stage
/// evaluates over raw BSON ([`Pipeline::reads_raw`]).
pub type RawDocStream = Box<dyn Iterator<Item = MongoResult<bson::RawDocumentBuf>> + Send>;

pub use stages::geo_near::GeoNearStage;

/// Gives stages that read other collections (`$lookup`, `$unionWith`) the
/// documents of a collection of the same database. Implemented by the server
/// over its storage; a missing collection reads as empty.
pub trait CollectionReader: Send + Sync {
    fn read(&self, collection: &str) -> MongoResult<DocStream>;
}

/// Sorts `input` by `spec` as `$sort` does, spilling to disk past the
/// limits (or when the operation's memory refuses its buffer): for the
/// server's `find`, whose in-memory sort hands its documents over here when
/// it may use the disk and the operation's memory runs out.
pub fn sort_spilling(
    spec: crate::sort::SortSpec,
    input: DocStream,
    limits: &spill::MemoryLimits,
) -> MongoResult<DocStream> {
    stages::sort::sort_external(spec, input, limits)
}

/// Runs a blocking stage: on the first pull, `all` consumes the whole input and
/// returns every output document (or the first error), which then stream out.
pub(crate) fn blocking<F>(input: DocStream, all: F) -> DocStream
where
    F: FnOnce(DocStream) -> MongoResult<Vec<Document>> + Send + 'static,
{
    let mut pending = Some((input, all));
    let mut out: std::vec::IntoIter<Document> = Vec::new().into_iter();
    Box::new(std::iter::from_fn(move || {
        if let Some((input, all)) = pending.take() {
            match all(input) {
                Ok(v) => out = v.into_iter(),
                Err(e) => return Some(Err(e)),
            }
        }
        out.next().map(Ok)
    }))
}

/// Like [`blocking`], for a stage whose output is itself a stream (a merge
/// of spilled runs): `all` consumes the input on the first pull.
pub(crate) fn blocking_stream<I, F>(input: I, all: F) -> DocStream
where
    I: Send + 'static,
    F: FnOnce(I) -> MongoResult<DocStream> + Send + 'static,
{
    let mut pending = Some((input, all));
    let mut out: Option<DocStream> = None;
    Box::new(std::iter::from_fn(move || {
        if let Some((input, all)) = pending.take() {
            match all(input) {
                Ok(s) => out = Some(s),
                Err(e) => return Some(Err(e)),
            }
        }
        out.as_mut()?.next()
    }))
}

/// The server's implementation of the stages the table lists as
/// [`StageImpl::Server`]: each is the first stage of an `aggregate` command's
/// pipeline and makes its input from what only the server has.
pub trait ServerStages: Send + Sync + Debug {
    /// The output of the server stage `name` (as the table spells it) with
    /// its argument `spec`.
    fn run(&self, name: &str, spec: &Bson) -> MongoResult<DocStream>;
}

/// What every stage gets when the pipeline is built.
#[derive(Clone)]
pub struct RunCtx {
    /// The pipeline's `$$NOW`.
    pub now: DateTime,
    pub reader: Option<Arc<dyn CollectionReader>>,
    /// The operation's collation (`None`: simple).
    pub collation: Option<Arc<Collation>>,
    /// Text scores of the documents a leading `$text` `$match` found, by
    /// `_id`, for `{$meta: "textScore"}`.
    pub text_scores: Option<Arc<crate::text::ScoresById>>,
    /// Blocking stages' memory limits and spill directory.
    pub memory: Arc<spill::MemoryLimits>,
    /// The server's stages, when it supplied them.
    pub server: Option<Arc<dyn ServerStages>>,
}

impl RunCtx {
    /// Top-level expression variables for this run: `$$NOW`, the collation
    /// and the text scores.
    pub(crate) fn vars(&self) -> Vars<'static> {
        Vars::with_collation(self.now, self.collation.clone())
            .with_text_scores(self.text_scores.clone())
    }

    /// Reads a foreign collection, or fails when no reader was supplied.
    pub(crate) fn read(&self, collection: &str, stage: &str) -> MongoResult<DocStream> {
        match &self.reader {
            // A join's inner reads are checked like any scan.
            Some(r) => Ok(Box::new(Checked::new(r.read(collection)?))),
            None => Err(MongoError::internal(format!(
                "{stage} ran without a collection reader"
            ))),
        }
    }
}

/// One parsed stage.
pub(crate) trait Stage: Debug + Send {
    /// Wraps the input stream.
    fn run(self: Box<Self>, input: DocStream, cx: &RunCtx) -> DocStream;

    /// Collections this stage (or its sub-pipelines) reads.
    fn foreign_collections(&self, _out: &mut Vec<String>) {}

    /// For `$limit`: its value, so a preceding `$sort` can keep only the top k.
    fn limit_value(&self) -> Option<u64> {
        None
    }

    /// For `$sort`: accepts a top-k bound from a following `$limit`.
    fn set_top_k(&mut self, _k: u64) -> bool {
        false
    }

    /// For `$match`: its filter.
    fn match_filter(&self) -> Option<&Document> {
        None
    }

    /// For `$sort`: its specification.
    fn sort_spec(&self) -> Option<&crate::sort::SortSpec> {
        None
    }

    /// For `$geoNear`: itself, so the server can resolve its geo field.
    fn geo_near_mut(&mut self) -> Option<&mut GeoNearStage> {
        None
    }

    /// For a stage the server supplies: its name.
    fn server_stage(&self) -> Option<&str> {
        None
    }

    /// For a stage whose output depends only on some top-level fields of
    /// its input (`$group`): adds them to `out` and returns `true`. The
    /// default, `false`, means it may read whole documents.
    fn top_level_deps(&self, _out: &mut Vec<String>) -> bool {
        false
    }

    /// Whether [`Stage::run_raw`] evaluates over the stored BSON itself
    /// (`$group`) rather than converting each input document.
    fn reads_raw(&self) -> bool {
        false
    }

    /// Wraps an input of raw documents; by default converts each into an
    /// owned document for [`Stage::run`].
    fn run_raw(self: Box<Self>, input: RawDocStream, cx: &RunCtx) -> DocStream {
        let owned = input.map(|r| r.and_then(|d| crate::expr::raw::owned_fields(&d, None)));
        self.run(Box::new(owned), cx)
    }
}

type ParseFn = fn(&Bson) -> MongoResult<Vec<Box<dyn Stage>>>;

/// Where a stage's implementation comes from.
#[derive(Clone, Copy)]
enum StageImpl {
    /// Built here from its specification.
    Parse(ParseFn),
    /// Supplied by the server at run time ([`ServerStages`]); valid only as
    /// the first stage of an `aggregate` command's pipeline
    /// ([`Pipeline::parse_command`]), which the server has checked.
    Server,
}

use StageImpl::{Parse, Server};

/// Stages BisonDB implements, sorted by name.
const STAGES: &[(&str, StageImpl)] = &[
    (
        "$_internalUnpackBucket",
        Parse(stages::internal_unpack_bucket::parse),
    ),
    ("$addFields", Parse(stages::add_fields::parse)),
    ("$bucket", Parse(stages::bucket::parse)),
    ("$bucketAuto", Parse(stages::bucket_auto::parse)),
    ("$changeStream", Server),
    ("$collStats", Server),
    ("$count", Parse(stages::count::parse)),
    ("$currentOp", Server),
    ("$densify", Parse(stages::densify::parse)),
    ("$documents", Parse(stages::documents::parse)),
    ("$facet", Parse(stages::facet::parse)),
    ("$fill", Parse(stages::fill::parse)),
    ("$geoNear", Parse(stages::geo_near::parse)),
    ("$graphLookup", Parse(stages::graph_lookup::parse)),
    ("$group", Parse(stages::group::parse)),
    ("$indexStats", Server),
    ("$limit", Parse(stages::limit::parse)),
    ("$listLocalSessions", Server),
    ("$lookup", Parse(stages::lookup::parse)),
    ("$match", Parse(stages::match_::parse)),
    ("$project", Parse(stages::project::parse)),
    ("$redact", Parse(stages::redact::parse)),
    (
        "$replaceRoot",
        Parse(stages::replace_root::parse_replace_root),
    ),
    (
        "$replaceWith",
        Parse(stages::replace_root::parse_replace_with),
    ),
    ("$sample", Parse(stages::sample::parse)),
    ("$set", Parse(stages::add_fields::parse_set)),
    ("$setWindowFields", Parse(stages::set_window_fields::parse)),
    ("$skip", Parse(stages::skip::parse)),
    ("$sort", Parse(stages::sort::parse)),
    ("$sortByCount", Parse(stages::sort_by_count::parse)),
    ("$unionWith", Parse(stages::union_with::parse)),
    ("$unset", Parse(stages::unset::parse)),
    ("$unwind", Parse(stages::unwind::parse)),
];

/// A server stage anywhere the server does not run it: later in a
/// pipeline, in a sub-pipeline, in a view's definition. `$indexStats` says
/// so as mongod does; the others keep the error BisonDB gave before it
/// served them.
fn misplaced_server_stage(name: &str) -> MongoError {
    match name {
        "$indexStats" | "$changeStream" => MongoError::location(
            40602,
            format!("{name} is only valid as the first stage in a pipeline"),
        ),
        _ => not_implemented(name),
    }
}

fn not_implemented(name: &str) -> MongoError {
    MongoError::new(
        ErrorCode::NotImplemented,
        format!("{name} is not supported by BisonDB yet"),
    )
}

/// A server stage in a pipeline: its name and argument, run by the
/// [`ServerStages`] in the run context. It reads no input.
#[derive(Debug)]
struct ServerStage {
    name: &'static str,
    spec: Bson,
}

impl Stage for ServerStage {
    fn run(self: Box<Self>, _input: DocStream, cx: &RunCtx) -> DocStream {
        let out = match &cx.server {
            Some(server) => server.run(self.name, &self.spec),
            None => Err(MongoError::internal(format!(
                "{} ran without the server's stages",
                self.name
            ))),
        };
        match out {
            Ok(docs) => docs,
            Err(e) => Box::new(std::iter::once(Err(e))),
        }
    }

    fn server_stage(&self) -> Option<&str> {
        Some(self.name)
    }
}

/// The last stage of a change stream's pipeline, which the server runs on
/// the events the pipeline returns (`change_stream::split`); anywhere else
/// it is refused.
pub const SPLIT_LARGE_EVENT: &str = "$changeStreamSplitLargeEvent";

/// mongod stages not built yet, sorted.
const NOT_IMPLEMENTED_STAGES: &[&str] = &[
    "$listSampledQueries",
    "$listSearchIndexes",
    "$listSessions",
    "$planCacheStats",
    "$querySettings",
    "$search",
    "$searchMeta",
    "$shardedDataDistribution",
    "$vectorSearch",
];

/// Whether `name` is a stage mongod has (built here, supplied by the server,
/// an output stage or one not built yet), as opposed to an unknown name.
pub fn is_stage_name(name: &str) -> bool {
    name == "$out"
        || name == "$merge"
        || name == SPLIT_LARGE_EVENT
        || STAGES.binary_search_by(|(n, _)| n.cmp(&name)).is_ok()
        || NOT_IMPLEMENTED_STAGES.binary_search(&name).is_ok()
}

/// A parsed aggregation pipeline.
#[derive(Debug)]
pub struct Pipeline {
    stages: Vec<Box<dyn Stage>>,
    now: DateTime,
    output: Option<output::OutputStage>,
    /// The operation's collation (`None`: simple).
    collation: Option<Arc<Collation>>,
    /// See [`Pipeline::set_text_scores`].
    text_scores: Option<Arc<crate::text::ScoresById>>,
    /// See [`Pipeline::set_memory_limits`].
    memory: Arc<spill::MemoryLimits>,
    /// See [`Pipeline::set_server_stages`].
    server: Option<Arc<dyn ServerStages>>,
}

impl Pipeline {
    /// The text scores of the input documents (recorded by the caller as it
    /// feeds them), for `{$meta: "textScore"}` in the stages.
    pub fn set_text_scores(&mut self, scores: Arc<crate::text::ScoresById>) {
        self.text_scores = Some(scores);
    }

    /// The memory limits of the blocking stages, `allowDiskUse` and the spill
    /// directory (default: mongod's 100 MiB, spilling allowed).
    pub fn set_memory_limits(&mut self, limits: spill::MemoryLimits) {
        self.memory = Arc::new(limits);
    }

    /// The server's implementation of the stages it supplies.
    pub fn set_server_stages(&mut self, server: Arc<dyn ServerStages>) {
        self.server = Some(server);
    }

    /// The name of the server stage the pipeline starts with, if any: it
    /// makes the pipeline's input, so the caller scans nothing.
    pub fn leading_server_stage(&self) -> Option<&str> {
        self.stages.first().and_then(|s| s.server_stage())
    }

    /// Parses the stages of a pipeline: a sub-pipeline, a view's definition,
    /// an update pipeline. A stage the server supplies is refused.
    pub fn parse(stages: &[Document]) -> MongoResult<Pipeline> {
        Pipeline::parse_stages(stages, false)
    }

    /// Parses an `aggregate` command's `pipeline`, whose first stage may be
    /// one the server supplies (its namespace and argument checked by the
    /// server).
    pub fn parse_command(stages: &[Document]) -> MongoResult<Pipeline> {
        Pipeline::parse_stages(stages, true)
    }

    fn parse_stages(stages: &[Document], server_first: bool) -> MongoResult<Pipeline> {
        // A time-series read: the part of a `$match` right after the unpacking
        // that buckets can answer runs before it too, so the planner scans
        // only the buckets that may hold matches.
        let pushed;
        let stages = match stages {
            [first, second, ..] => match (
                first.get_document("$_internalUnpackBucket"),
                second.get_document("$match"),
            ) {
                (Ok(spec), Ok(filter)) => {
                    let pre = stages::internal_unpack_bucket::bucket_filter(spec, filter);
                    if pre.is_empty() {
                        stages
                    } else {
                        pushed = std::iter::once(bson::doc! {"$match": pre})
                            .chain(stages.iter().cloned())
                            .collect::<Vec<_>>();
                        pushed.as_slice()
                    }
                }
                _ => stages,
            },
            _ => stages,
        };
        // ... and buckets decode only the columns the rest reads.
        let included;
        let stages = match stages::internal_unpack_bucket::with_include(stages) {
            Some(rewritten) => {
                included = rewritten;
                included.as_slice()
            }
            None => stages,
        };
        let mut out: Vec<Box<dyn Stage>> = Vec::with_capacity(stages.len());
        let mut output = None;
        for (pos, spec) in stages.iter().enumerate() {
            let mut it = spec.iter();
            let (Some((name, arg)), None) = (it.next(), it.next()) else {
                return Err(MongoError::location(
                    40323,
                    "A pipeline stage specification object must contain exactly one field.",
                ));
            };
            if name == "$geoNear" && pos != 0 {
                return Err(MongoError::location(
                    40603,
                    "$geoNear was not the first stage in the pipeline.",
                ));
            }
            if name == "$documents" && pos != 0 {
                return Err(MongoError::location(
                    40602,
                    "$documents is only valid as the first stage in a pipeline",
                ));
            }
            if name == "$out" || name == "$merge" {
                if pos + 1 != stages.len() {
                    return Err(MongoError::location(
                        40601,
                        format!("{name} can only be the final stage in the pipeline"),
                    ));
                }
                output = Some(output::OutputStage::parse(name, arg)?);
                continue;
            }
            match STAGES.binary_search_by(|(n, _)| n.cmp(&name.as_str())) {
                Ok(i) => match STAGES.get(i) {
                    Some((_, Parse(parse))) => out.extend(parse(arg)?),
                    Some((name, Server)) if server_first && pos == 0 => {
                        out.push(Box::new(ServerStage {
                            name,
                            spec: arg.clone(),
                        }));
                    }
                    Some((name, Server)) => return Err(misplaced_server_stage(name)),
                    None => return Err(MongoError::internal("stage table")),
                },
                Err(_) if NOT_IMPLEMENTED_STAGES.binary_search(&name.as_str()).is_ok() => {
                    return Err(not_implemented(name));
                }
                Err(_) if name == SPLIT_LARGE_EVENT => {
                    return Err(MongoError::new(
                        ErrorCode::IllegalOperation,
                        "$changeStreamSplitLargeEvent can only be used in a $changeStream pipeline.",
                    ));
                }
                Err(_) => {
                    return Err(MongoError::location(
                        40324,
                        format!("Unrecognized pipeline stage name: '{name}'"),
                    ));
                }
            }
        }
        // $sort directly followed by $limit only needs the top k documents.
        for i in 1..out.len() {
            let k = out.get(i).and_then(|s| s.limit_value());
            if let (Some(k), Some(prev)) = (k, out.get_mut(i - 1)) {
                prev.set_top_k(k);
            }
        }
        Ok(Pipeline {
            stages: out,
            now: DateTime::now(),
            output,
            collation: None,
            text_scores: None,
            memory: Arc::default(),
            server: None,
        })
    }

    /// Removes a leading `$match` and returns its filter, for a caller that
    /// applies it during the scan itself (avoids matching every document twice).
    pub fn take_leading_match(&mut self) -> Option<Document> {
        let filter = self.leading_match()?.clone();
        if !self.stages.is_empty() {
            self.stages.remove(0);
        }
        Some(filter)
    }

    /// Where a `$sort` that the scan could provide would sit: first, or right
    /// after a leading `$match`.
    fn leading_sort_position(&self) -> usize {
        usize::from(self.leading_match().is_some())
    }

    /// The `$sort` at the start of the pipeline (after a leading `$match`), so
    /// the caller can ask the planner for documents already in that order.
    pub fn leading_sort(&self) -> Option<&crate::sort::SortSpec> {
        self.stages
            .get(self.leading_sort_position())
            .and_then(|s| s.sort_spec())
    }

    /// Removes the `$sort` that [`Pipeline::leading_sort`] returned, for a
    /// caller whose scan already yields that order (an index scan). A `$limit`
    /// that followed it stays and still applies.
    pub fn remove_leading_sort(&mut self) {
        let at = self.leading_sort_position();
        if self.stages.get(at).is_some_and(|s| s.sort_spec().is_some()) {
            self.stages.remove(at);
        }
    }

    /// A leading `$geoNear`, whose geo field the caller resolves from the
    /// collection's indexes before running the pipeline.
    pub fn geo_near_mut(&mut self) -> Option<&mut GeoNearStage> {
        self.stages.first_mut().and_then(|s| s.geo_near_mut())
    }

    /// The filter of a leading `$match`, so the caller can filter during the scan.
    pub fn leading_match(&self) -> Option<&Document> {
        self.stages.first().and_then(|s| s.match_filter())
    }

    /// The top-level fields the pipeline reads from its input documents, when
    /// that is known (it starts with `$group`); `None` means whole documents.
    /// The caller may then hand the pipeline documents holding only these
    /// fields, which spares converting the rest out of stored BSON.
    pub fn needed_fields(&self) -> Option<Vec<String>> {
        let mut out = Vec::new();
        match self.stages.first() {
            Some(first) if first.top_level_deps(&mut out) => Some(out),
            _ => None,
        }
    }

    /// Whether the pipeline's first stage evaluates over raw documents, so
    /// the caller should hand it the stored BSON ([`Pipeline::run_raw_with_reader`]).
    pub fn reads_raw(&self) -> bool {
        self.raw_filters().is_some()
    }

    /// The filters of the `$match` stages in front of a stage that reads raw
    /// documents (the matcher runs over raw BSON too), or `None` when the
    /// pipeline does not start with such a stage. A `$text` filter is left
    /// to the `$match` stage, which reports it out of place.
    fn raw_filters(&self) -> Option<Vec<&Document>> {
        let mut filters = Vec::new();
        for st in &self.stages {
            match st.match_filter() {
                Some(f) if !f.contains_key("$text") => filters.push(f),
                Some(_) => return None,
                None => return st.reads_raw().then_some(filters),
            }
        }
        None
    }

    /// Like [`Pipeline::run_with_reader`], over stored documents as they are:
    /// the first stage reads them raw when it can ([`Pipeline::reads_raw`]),
    /// else each is converted (only the fields the pipeline reads, when
    /// [`Pipeline::needed_fields`] knows them).
    pub fn run_raw_with_reader(
        mut self,
        input: RawDocStream,
        reader: Option<Arc<dyn CollectionReader>>,
    ) -> DocStream {
        if !self.reads_raw() {
            let fields = self.needed_fields();
            let owned = input.map(move |r| {
                r.and_then(|d| crate::expr::raw::owned_fields(&d, fields.as_deref()))
            });
            return self.run_with_reader(Box::new(owned), reader);
        }
        let cx = self.run_ctx(reader);
        let mut matchers = Vec::new();
        for filter in self.raw_filters().unwrap_or_default() {
            match crate::matcher::Matcher::parse_doc(filter) {
                Ok(m) => matchers.push(m.with_collation(cx.collation.clone())),
                Err(e) => return Box::new(std::iter::once(Err(e))),
            }
        }
        self.stages.drain(..matchers.len());
        let first = self.stages.remove(0);
        let input: RawDocStream = if matchers.is_empty() {
            input
        } else {
            Box::new(input.filter(move |r| match r {
                Ok(d) => matchers.iter().all(|m| m.matches(d)),
                Err(_) => true,
            }))
        };
        let stream = first.run_raw(Box::new(Checked::new(input)), &cx);
        Box::new(FuseOnError {
            inner: self.run_stages(stream, &cx),
            failed: false,
        })
    }

    /// Runs every stage under `collation` (`None`: simple): `$match`, `$sort`,
    /// `$group` keys, accumulators and expression comparisons use it.
    pub fn with_collation(mut self, collation: Option<Arc<Collation>>) -> Pipeline {
        self.collation = collation;
        self
    }

    /// In-place form of [`Pipeline::with_collation`].
    pub fn set_collation(&mut self, collation: Option<Arc<Collation>>) {
        self.collation = collation;
    }

    /// The pipeline's collation (`None`: simple).
    pub fn collation(&self) -> Option<&Arc<Collation>> {
        self.collation.as_ref()
    }

    /// Uses `now` as `$$NOW` instead of the parse time.
    pub fn with_now(mut self, now: DateTime) -> Pipeline {
        self.now = now;
        self
    }

    /// Number of stages after parsing (`$sortByCount` counts as two).
    pub fn len(&self) -> usize {
        self.stages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.stages.is_empty()
    }

    /// Builds the streaming pipeline over `input`. The returned stream ends
    /// after the first error. Stages that read other collections fail; use
    /// [`Pipeline::run_with_reader`] for those.
    pub fn run(self, input: DocStream) -> DocStream {
        self.run_with_reader(input, None)
    }

    /// Like [`Pipeline::run`], with access to the database's other
    /// collections for `$lookup` and `$unionWith`.
    pub fn run_with_reader(
        self,
        input: DocStream,
        reader: Option<Arc<dyn CollectionReader>>,
    ) -> DocStream {
        let cx = self.run_ctx(reader);
        Box::new(FuseOnError {
            inner: self.run_stages(input, &cx),
            failed: false,
        })
    }

    fn run_ctx(&self, reader: Option<Arc<dyn CollectionReader>>) -> RunCtx {
        RunCtx {
            now: self.now,
            reader,
            collation: self.collation.clone(),
            text_scores: self.text_scores.clone(),
            memory: self.memory.clone(),
            server: self.server.clone(),
        }
    }

    pub(crate) fn run_stages(self, input: DocStream, cx: &RunCtx) -> DocStream {
        // Every stage pulls its input through the operation's check, so a
        // stage (a join, a group, a sort) stops at its next input document
        // once the operation is killed or past its deadline.
        let mut stream = input;
        for st in self.stages {
            stream = st.run(Box::new(Checked::new(stream)), cx);
        }
        stream
    }

    /// The collections `$lookup`/`$unionWith` stages read (for the server's
    /// authorization and existence checks).
    pub fn foreign_collections(&self) -> Vec<String> {
        let mut out = Vec::new();
        for st in &self.stages {
            st.foreign_collections(&mut out);
        }
        out.sort();
        out.dedup();
        out
    }
}

struct FuseOnError {
    inner: DocStream,
    failed: bool,
}

impl Iterator for FuseOnError {
    type Item = MongoResult<Document>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let r = self.inner.next();
        if matches!(r, Some(Err(_))) {
            self.failed = true;
        }
        r
    }
}

/// Turns a value into a `Document` input for a stage that needs an object spec.
pub(crate) fn spec_doc(
    arg: &Bson,
    code: i32,
    msg: impl FnOnce(&Bson) -> String,
) -> MongoResult<&Document> {
    match arg {
        Bson::Document(d) => Ok(d),
        other => Err(MongoError::location(code, msg(other))),
    }
}

#[cfg(test)]
mod tests;
