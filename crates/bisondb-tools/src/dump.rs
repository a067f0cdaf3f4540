//! `bisondb dump`: what mongodump writes, for the same server state.
//!
//! Every database but `local` (and `config`, unless named with `--db`), every
//! collection `listCollections` reports except `system.*` ones (mongodump's
//! rule; `system.js` is kept). A collection's documents are copied byte for
//! byte in natural order from a `find` cursor; a view is written as its
//! definition only (metadata with `viewOn` and `pipeline`, no `.bson` file)
//! unless `--viewsAsCollections`; a time-series collection `X` as mongodump
//! before 8.3 writes it: its buckets, read from `system.buckets.X`, in
//! `system.buckets.X.bson`, and its options and indexes (as `listIndexes` on
//! `X` shows them) in `X.metadata.json` with `type: "timeseries"`. Users and
//! roles (`admin.system.users`, `admin.system.roles`) are not dumped.

use std::path::PathBuf;

use bson::spec::BinarySubtype;
use bson::{doc, Bson, Document, RawDocumentBuf};
use futures::TryStreamExt;
use mongodb::{Client, Database};

use crate::layout::{self, Kind, Metadata, Output};
use crate::{Result, ToolError};

/// What to dump and where.
#[derive(Clone, Debug)]
pub struct DumpOptions {
    pub uri: String,
    pub out: PathBuf,
    pub db: Option<String>,
    pub collection: Option<String>,
    pub gzip: bool,
    pub views_as_collections: bool,
}

/// What a dump wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DumpSummary {
    /// Collections and time-series collections.
    pub collections: u64,
    pub views: u64,
    pub documents: u64,
}

/// The bucket collections of time-series collections.
pub const BUCKETS_PREFIX: &str = "system.buckets.";

/// Writes the dump; see the module documentation.
pub async fn dump(opts: DumpOptions) -> Result<DumpSummary> {
    if opts.collection.is_some() && opts.db.is_none() {
        return Err(ToolError::new("--collection needs --db"));
    }
    if opts
        .collection
        .as_deref()
        .is_some_and(|c| c.starts_with(BUCKETS_PREFIX))
    {
        return Err(ToolError::new(
            "cannot dump a system.buckets collection: name the time-series collection, \
             whose buckets are dumped with it",
        ));
    }
    let client = Client::with_uri_str(&opts.uri).await?;
    let dbs = match &opts.db {
        Some(db) => vec![db.clone()],
        None => client
            .list_database_names()
            .await?
            .into_iter()
            .filter(|d| d != "local" && d != "config")
            .collect(),
    };
    std::fs::create_dir_all(&opts.out)
        .map_err(|e| ToolError::new(format!("cannot create {}: {e}", opts.out.display())))?;
    let mut summary = DumpSummary::default();
    for name in dbs {
        dump_database(&client.database(&name), &opts, &mut summary).await?;
    }
    Ok(summary)
}

/// One entry of `listCollections`.
struct CollectionInfo {
    name: String,
    kind: Kind,
    options: Document,
    uuid: Option<String>,
}

async fn dump_database(db: &Database, opts: &DumpOptions, summary: &mut DumpSummary) -> Result<()> {
    let mut filter = doc! {};
    if let Some(c) = &opts.collection {
        filter.insert("name", c.clone());
    }
    let infos: Vec<Document> = db
        .run_cursor_command(doc! {"listCollections": 1, "filter": filter})
        .await?
        .try_collect()
        .await?;
    // mongodump makes a database's folder even when nothing in it is dumped.
    std::fs::create_dir_all(opts.out.join(db.name()))?;
    for info in infos {
        let Some(c) = collection_info(&info) else {
            continue;
        };
        if skipped(&c.name) {
            continue;
        }
        dump_collection(db, c, opts, summary).await?;
    }
    Ok(())
}

fn collection_info(info: &Document) -> Option<CollectionInfo> {
    let name = info.get_str("name").ok()?.to_owned();
    let options = info.get_document("options").cloned().unwrap_or_default();
    let kind = Kind::parse(info.get_str("type").ok(), &options);
    let uuid = match info.get_document("info").ok().and_then(|i| i.get("uuid")) {
        Some(Bson::Binary(b)) if b.subtype == BinarySubtype::Uuid => Some(
            b.bytes
                .iter()
                .map(|byte| format!("{byte:02x}"))
                .collect::<String>(),
        ),
        _ => None,
    };
    Some(CollectionInfo {
        name,
        kind,
        options,
        uuid,
    })
}

/// mongodump's rule: `system.*` collections are not dumped (a time-series
/// collection's buckets go with it), except `system.js`.
fn skipped(name: &str) -> bool {
    name.starts_with("system.") && name != "system.js"
}

async fn dump_collection(
    db: &Database,
    mut c: CollectionInfo,
    opts: &DumpOptions,
    summary: &mut DumpSummary,
) -> Result<()> {
    let stem = layout::file_stem(&c.name);
    let as_collection = c.kind == Kind::View && opts.views_as_collections;
    if as_collection {
        c.options.remove("viewOn");
        c.options.remove("pipeline");
        c.kind = Kind::Collection;
    }
    // Where the documents come from and go (a view has none).
    let data = match c.kind {
        Kind::Collection => Some((c.name.clone(), stem.clone())),
        Kind::Timeseries => Some((
            format!("{BUCKETS_PREFIX}{}", c.name),
            layout::file_stem(&format!("{BUCKETS_PREFIX}{}", c.name)),
        )),
        Kind::View => None,
    };
    let indexes = if c.kind == Kind::View || as_collection {
        Vec::new()
    } else {
        list_indexes(db, &c.name).await?
    };
    if let Some((source, file)) = data {
        let path = layout::path(&opts.out, db.name(), &file, ".bson", opts.gzip);
        summary.documents += copy_documents(db, &source, &path, opts.gzip).await?;
    }
    let meta = Metadata {
        options: c.options,
        indexes,
        uuid: c.uuid,
        collection_name: c.name,
        kind: c.kind,
    };
    let path = layout::path(&opts.out, db.name(), &stem, ".metadata.json", opts.gzip);
    let mut out = Output::create(&path, opts.gzip)?;
    out.write_all(meta.to_json()?.as_bytes())?;
    out.finish()?;
    match meta.kind {
        Kind::View => summary.views += 1,
        Kind::Collection | Kind::Timeseries => summary.collections += 1,
    }
    Ok(())
}

/// The collection's index specifications as `listIndexes` gives them (key
/// order kept).
async fn list_indexes(db: &Database, coll: &str) -> Result<Vec<Document>> {
    match db.run_cursor_command(doc! {"listIndexes": coll}).await {
        Ok(cursor) => Ok(cursor.try_collect().await?),
        // Dropped since listCollections: dumped without indexes, as mongodump does.
        Err(e) if matches!(*e.kind, mongodb::error::ErrorKind::Command(ref c) if c.code == 26) => {
            Ok(Vec::new())
        }
        Err(e) => Err(e.into()),
    }
}

/// Streams every document of `coll` into `path`, unchanged; returns how many.
async fn copy_documents(
    db: &Database,
    coll: &str,
    path: &std::path::Path,
    gzip: bool,
) -> Result<u64> {
    let mut out = Output::create(path, gzip)?;
    let mut cursor = db.collection::<RawDocumentBuf>(coll).find(doc! {}).await?;
    let mut n = 0u64;
    while cursor.advance().await? {
        out.write_all(cursor.current().as_bytes())
            .map_err(|e| ToolError::new(format!("{}: {e}", path.display())))?;
        n += 1;
    }
    out.finish()
        .map_err(|e| ToolError::new(format!("{}: {e}", path.display())))?;
    Ok(n)
}
