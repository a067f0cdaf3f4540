//! `bisondb restore`: reads a dump directory as mongorestore does.
//!
//! Each folder of the directory is a database (with `--db X`, the directory
//! may also be that database's folder itself, as `mongorestore --db X
//! dump/X` takes it), each `<coll>.metadata.json`
//! and `<coll>.bson` (either gzipped) one collection, named by the
//! metadata's `collectionName` when there is one. Collections and time-series
//! collections are restored first, views after them (a view may be defined
//! on any of them). For each: `--drop` drops it; `create` makes it with the
//! dumped options (capped size and max, validator, collation, clustered
//! index, time-series options, `expireAfterSeconds`...) unless it exists or
//! `--noOptionsRestore`; its documents are inserted in batches of
//! `--batchSize` (1000) documents or 16 MiB, unordered unless
//! `--maintainInsertionOrder`, a duplicate key or a validation failure
//! counted and skipped unless `--stopOnError` (mongorestore's defaults);
//! then its indexes are built with one `createIndexes` of the dumped
//! specifications (the `_id` index and a clustered index come with the
//! collection). A time-series collection's buckets go to its
//! `system.buckets` collection as they are; where the server refuses that
//! (BisonDB), they are unpacked into measurements (`buckets.rs`) and inserted
//! into the time-series collection, which buckets them again.
//! `system.*` collections other than `system.js` are skipped, as are users
//! and roles (`admin.system.users`, `admin.system.roles`): not in scope.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bson::{doc, Bson, Document, RawDocumentBuf};
use mongodb::error::{ErrorKind, WriteFailure};
use mongodb::{Client, Collection, Database};

use crate::dump::BUCKETS_PREFIX;
use crate::layout::{self, BsonReader, Kind, Metadata};
use crate::{buckets, Result, ToolError};

/// What to restore and how.
#[derive(Clone, Debug)]
pub struct RestoreOptions {
    pub uri: String,
    pub dir: PathBuf,
    pub db: Option<String>,
    pub collection: Option<String>,
    pub drop: bool,
    pub maintain_insertion_order: bool,
    pub stop_on_error: bool,
    pub no_index_restore: bool,
    pub no_options_restore: bool,
    pub bypass_document_validation: bool,
    pub batch_size: usize,
}

impl RestoreOptions {
    /// mongorestore's defaults for `dir` into `uri`.
    pub fn new(uri: impl Into<String>, dir: impl Into<PathBuf>) -> RestoreOptions {
        RestoreOptions {
            uri: uri.into(),
            dir: dir.into(),
            db: None,
            collection: None,
            drop: false,
            maintain_insertion_order: false,
            stop_on_error: false,
            no_index_restore: false,
            no_options_restore: false,
            bypass_document_validation: false,
            batch_size: 1000,
        }
    }
}

/// What a restore did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RestoreSummary {
    /// Collections and time-series collections.
    pub collections: u64,
    pub views: u64,
    pub documents: u64,
    /// Documents the server refused (duplicate keys, validation).
    pub failed: u64,
}

/// The most bytes of documents one insert carries (mongod's largest message
/// holds 48 MB; the driver splits what exceeds it anyway).
const BATCH_BYTES: usize = 16 * 1024 * 1024;

/// InvalidNamespace: how BisonDB refuses writes to `system.buckets.*`.
const INVALID_NAMESPACE: i32 = 73;

/// One collection found in a database folder.
#[derive(Default)]
struct Entry {
    meta: Option<(PathBuf, String)>,
    data: Option<PathBuf>,
    /// The data file holds the buckets of a time-series collection.
    buckets: bool,
}

/// Restores the dump; see the module documentation.
pub async fn restore(opts: RestoreOptions) -> Result<RestoreSummary> {
    if opts.collection.is_some() && opts.db.is_none() {
        return Err(ToolError::new("--collection needs --db"));
    }
    let client = Client::with_uri_str(&opts.uri).await?;
    let mut summary = RestoreSummary::default();
    // `--db X` with the folder of one database, as `mongorestore --db X dump/X`.
    if let Some(db) = &opts.db {
        if holds_collections(&opts.dir)? {
            restore_database(&client.database(db), &opts.dir, &opts, &mut summary).await?;
            return Ok(summary);
        }
    }
    let mut dbs = Vec::new();
    for entry in std::fs::read_dir(&opts.dir)
        .map_err(|e| ToolError::new(format!("cannot read {}: {e}", opts.dir.display())))?
    {
        let entry = entry?;
        if !entry.file_type()?.is_dir() {
            // A top-level oplog.bson or archive: not restored.
            continue;
        }
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if opts.db.as_ref().is_none_or(|d| *d == name) {
            dbs.push((name, entry.path()));
        }
    }
    dbs.sort();
    for (name, path) in dbs {
        if name == "local" {
            continue;
        }
        restore_database(&client.database(&name), &path, &opts, &mut summary).await?;
    }
    Ok(summary)
}

/// Whether `dir` is the folder of one database: it holds dump files itself.
fn holds_collections(dir: &Path) -> Result<bool> {
    for f in std::fs::read_dir(dir)
        .map_err(|e| ToolError::new(format!("cannot read {}: {e}", dir.display())))?
    {
        let name = f?.file_name();
        let name = name.to_string_lossy();
        let plain = name.strip_suffix(".gz").unwrap_or(&name);
        if plain.ends_with(".bson") || plain.ends_with(".metadata.json") {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The collections a database folder holds, by file stem.
fn scan(dir: &Path) -> Result<BTreeMap<String, Entry>> {
    let mut found: BTreeMap<String, Entry> = BTreeMap::new();
    for f in std::fs::read_dir(dir)? {
        let f = f?;
        let Some(file) = f.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let plain = file.strip_suffix(".gz").unwrap_or(&file);
        if let Some(stem) = plain.strip_suffix(".metadata.json") {
            let entry = found.entry(stem.to_owned()).or_default();
            entry.meta = Some((f.path(), stem.to_owned()));
        } else if let Some(stem) = plain.strip_suffix(".bson") {
            match stem.strip_prefix(BUCKETS_PREFIX) {
                Some(ts) => {
                    let entry = found.entry(ts.to_owned()).or_default();
                    entry.data = Some(f.path());
                    entry.buckets = true;
                }
                None => found.entry(stem.to_owned()).or_default().data = Some(f.path()),
            }
        }
    }
    Ok(found)
}

async fn restore_database(
    db: &Database,
    dir: &Path,
    opts: &RestoreOptions,
    summary: &mut RestoreSummary,
) -> Result<()> {
    let mut views = Vec::new();
    for (stem, entry) in scan(dir)? {
        let fallback = layout::query_unescape(&stem).unwrap_or_else(|| stem.clone());
        let meta = match &entry.meta {
            Some((path, _)) => Some(
                Metadata::from_json(&layout::read_to_string(path)?, &fallback)
                    .map_err(|e| ToolError::new(format!("{}: {}", path.display(), e.message)))?,
            ),
            None => None,
        };
        let name = meta
            .as_ref()
            .map(|m| m.collection_name.clone())
            .unwrap_or(fallback);
        if name.starts_with("system.") && name != "system.js" {
            continue;
        }
        if opts.collection.as_ref().is_some_and(|c| *c != name) {
            continue;
        }
        let kind = match (&meta, entry.buckets) {
            (Some(m), _) => m.kind,
            (None, true) => {
                return Err(ToolError::new(format!(
                    "the time-series collection {}.{name} has buckets but no metadata file",
                    db.name()
                )))
            }
            (None, false) => Kind::Collection,
        };
        if kind == Kind::View {
            views.push((name, meta));
            continue;
        }
        restore_collection(
            db,
            &name,
            kind,
            meta.as_ref(),
            entry.data.as_deref(),
            opts,
            summary,
        )
        .await?;
    }
    for (name, meta) in views {
        if opts.drop {
            db.collection::<Document>(&name).drop().await?;
        }
        if exists(db, &name).await? {
            eprintln!(
                "bisondb restore: {}.{name} exists, view not restored",
                db.name()
            );
            continue;
        }
        let options = meta.map(|m| m.options).unwrap_or_default();
        create(db, &name, &options).await?;
        summary.views += 1;
    }
    Ok(())
}

async fn exists(db: &Database, name: &str) -> Result<bool> {
    Ok(!db
        .list_collection_names()
        .filter(doc! {"name": name})
        .await?
        .is_empty())
}

/// `create` with the dumped options (less the ones a server does not take
/// back: none of mongod's listCollections options are refused by create).
async fn create(db: &Database, name: &str, options: &Document) -> Result<()> {
    let mut cmd = doc! {"create": name};
    for (k, v) in options {
        cmd.insert(k.clone(), v.clone());
    }
    db.run_command(cmd)
        .await
        .map_err(|e| ToolError::new(format!("cannot create {}.{name}: {e}", db.name())))?;
    Ok(())
}

async fn restore_collection(
    db: &Database,
    name: &str,
    kind: Kind,
    meta: Option<&Metadata>,
    data: Option<&Path>,
    opts: &RestoreOptions,
    summary: &mut RestoreSummary,
) -> Result<()> {
    if opts.drop {
        db.collection::<Document>(name).drop().await?;
    }
    let options = meta.map(|m| m.options.clone()).unwrap_or_default();
    if kind == Kind::Timeseries && opts.no_options_restore {
        return Err(ToolError::new(
            "cannot restore a time-series collection with --noOptionsRestore",
        ));
    }
    if !exists(db, name).await? && (!opts.no_options_restore || kind == Kind::Timeseries) {
        create(db, name, &options).await?;
    }
    if let Some(path) = data {
        let mut target = match kind {
            Kind::Timeseries => Target::Buckets {
                buckets: db.collection(&format!("{BUCKETS_PREFIX}{name}")),
                measurements: db.collection(name),
                time_field: options
                    .get_document("timeseries")
                    .and_then(|t| t.get_str("timeField"))
                    .map_err(|_| {
                        ToolError::new(format!(
                            "the time-series collection {}.{name} has no timeField in its metadata",
                            db.name()
                        ))
                    })?
                    .to_owned(),
                meta_field: options
                    .get_document("timeseries")
                    .ok()
                    .and_then(|t| t.get_str("metaField").ok())
                    .map(str::to_owned),
                unpack: false,
            },
            _ => Target::Plain(db.collection(name)),
        };
        insert_file(path, &mut target, opts, summary).await?;
    }
    if !opts.no_index_restore {
        if let Some(m) = meta {
            create_indexes(db, name, &m.indexes).await?;
        }
    }
    summary.collections += 1;
    Ok(())
}

/// Where a collection's documents go.
enum Target {
    Plain(Collection<RawDocumentBuf>),
    /// A time-series collection's buckets: into `buckets`, or, once the
    /// server refused that, unpacked into `measurements`.
    Buckets {
        buckets: Collection<RawDocumentBuf>,
        measurements: Collection<RawDocumentBuf>,
        time_field: String,
        meta_field: Option<String>,
        unpack: bool,
    },
}

/// Streams a `.bson` file into the target in batches.
async fn insert_file(
    path: &Path,
    target: &mut Target,
    opts: &RestoreOptions,
    summary: &mut RestoreSummary,
) -> Result<()> {
    let mut reader = BsonReader::open(path)?;
    let mut batch = Vec::new();
    let mut bytes = 0;
    loop {
        let next = reader.next_document()?;
        let end = next.is_none();
        if let Some(d) = next {
            bytes += d.as_bytes().len();
            batch.push(d);
        }
        if !batch.is_empty() && (end || batch.len() >= opts.batch_size || bytes >= BATCH_BYTES) {
            let n = batch.len() as u64;
            let failed = insert_batch(target, std::mem::take(&mut batch), opts).await?;
            summary.documents += n - failed.min(n);
            summary.failed += failed;
            bytes = 0;
        }
        if end {
            return Ok(());
        }
    }
}

/// Inserts one batch; returns how many documents the server refused one by
/// one (errors are fatal with `--stopOnError`).
async fn insert_batch(
    target: &mut Target,
    batch: Vec<RawDocumentBuf>,
    opts: &RestoreOptions,
) -> Result<u64> {
    match target {
        Target::Plain(coll) => Ok(insert_many(coll, batch, opts).await?),
        Target::Buckets {
            buckets,
            measurements,
            time_field,
            meta_field,
            unpack,
        } => {
            if !*unpack {
                match insert_many(buckets, batch.clone(), opts).await {
                    Err(BatchError::Refused(code, _)) if code == INVALID_NAMESPACE => {
                        *unpack = true;
                    }
                    other => return other.map_err(Into::into),
                }
            }
            let mut rows = Vec::new();
            for bucket in &batch {
                rows.extend(buckets::unpack(bucket, time_field, meta_field.as_deref())?);
            }
            let mut failed = 0;
            // A bucket holds up to 1000 measurements: insert them in bounded batches.
            for chunk in rows.chunks(opts.batch_size) {
                let raw = chunk
                    .iter()
                    .map(RawDocumentBuf::try_from)
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                failed += insert_many(measurements, raw, opts).await?;
            }
            Ok(failed)
        }
    }
}

/// Why a batch failed as a whole.
enum BatchError {
    /// The server refused the command with this code.
    Refused(i32, ToolError),
    Other(ToolError),
}

impl From<BatchError> for ToolError {
    fn from(e: BatchError) -> ToolError {
        match e {
            BatchError::Refused(_, e) | BatchError::Other(e) => e,
        }
    }
}

async fn insert_many(
    coll: &Collection<RawDocumentBuf>,
    batch: Vec<RawDocumentBuf>,
    opts: &RestoreOptions,
) -> std::result::Result<u64, BatchError> {
    let mut insert = coll
        .insert_many(batch)
        .ordered(opts.maintain_insertion_order);
    if opts.bypass_document_validation {
        insert = insert.bypass_document_validation(true);
    }
    let Err(e) = insert.await else {
        return Ok(0);
    };
    let ns = coll.namespace();
    match e.kind.as_ref() {
        ErrorKind::Command(c) if c.code == INVALID_NAMESPACE => Err(BatchError::Refused(
            c.code,
            ToolError::new(format!("{ns}: {e}")),
        )),
        ErrorKind::InsertMany(im)
            if im.write_concern_error.is_none()
                && im.write_errors.as_ref().is_some_and(|w| !w.is_empty()) =>
        {
            let errors = im.write_errors.as_deref().unwrap_or_default();
            let first = &errors[0];
            if opts.stop_on_error {
                return Err(BatchError::Other(ToolError::new(format!(
                    "{ns}: {} ({})",
                    first.message, first.code
                ))));
            }
            eprintln!(
                "bisondb restore: {ns}: {} document(s) refused, the first: {} ({})",
                errors.len(),
                first.message,
                first.code
            );
            Ok(errors.len() as u64)
        }
        ErrorKind::Write(WriteFailure::WriteError(w)) if !opts.stop_on_error => {
            eprintln!("bisondb restore: {ns}: {} ({})", w.message, w.code);
            Ok(1)
        }
        _ => Err(BatchError::Other(ToolError::new(format!("{ns}: {e}")))),
    }
}

/// One `createIndexes` with the dumped specifications, less the `_id` index
/// and a clustered index (made with the collection) and the `ns` field
/// servers before 4.4 listed.
async fn create_indexes(db: &Database, name: &str, specs: &[Document]) -> Result<()> {
    let specs: Vec<Bson> = specs
        .iter()
        .filter(|s| !layout::is_id_index(s) && !s.get_bool("clustered").unwrap_or(false))
        .map(|s| {
            let mut s = s.clone();
            s.remove("ns");
            Bson::Document(s)
        })
        .collect();
    if specs.is_empty() {
        return Ok(());
    }
    db.run_command(doc! {"createIndexes": name, "indexes": specs})
        .await
        .map_err(|e| {
            ToolError::new(format!(
                "cannot build the indexes of {}.{name}: {e}",
                db.name()
            ))
        })?;
    Ok(())
}
