//! `listCollections`: the collections of a database as a cursor, with filter and
//! `nameOnly`. A clustered collection has no `idIndex` (its clustered index,
//! in `options.clusteredIndex`, takes the `_id` index's place), as in mongod.

use bisondb_error::MongoResult;
use bisondb_query::matcher::Matcher;
use bson::{doc, Bson, Document, RawDocumentBuf};

use super::{Command, Context};
use crate::cursor::{Cursor, DocSource};
use crate::fields;
use crate::request::CommandRequest;

pub struct ListCollections {
    db: String,
    filter: Option<Matcher>,
    name_only: bool,
    batch_size: Option<usize>,
    /// `authorizedCollections` (with `nameOnly`): with `--auth`, only the
    /// collections the user has privileges on.
    authorized_collections: bool,
}

impl Command for ListCollections {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let n = req.name;
        let mut l = ListCollections {
            db: req.db.clone(),
            filter: None,
            name_only: false,
            batch_size: None,
            authorized_collections: false,
        };
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "listCollections" => {}
                "filter" => {
                    if !matches!(v, bson::RawBsonRef::Null) {
                        l.filter = Some(Matcher::parse(fields::as_doc(n, "filter", v)?)?);
                    }
                }
                "nameOnly" => l.name_only = fields::as_bool(n, "nameOnly", v)?,
                "authorizedCollections" => {
                    l.authorized_collections = fields::as_bool(n, k.as_str(), v)?;
                }
                "includePendingDrops" => {
                    fields::as_bool(n, k.as_str(), v)?;
                }
                "cursor" => {
                    let c = fields::as_doc(n, "cursor", v)?;
                    if let Some(b) = c.get("batchSize").map_err(crate::request::invalid_bson)? {
                        l.batch_size =
                            Some(fields::as_non_negative(n, "cursor.batchSize", b)? as usize);
                    }
                }
                other => fields::check_known(n, other, &[])?,
            }
        }
        Ok(l)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let mut out: Vec<RawDocumentBuf> = Vec::new();
        let only_authorized =
            self.authorized_collections && self.name_only && ctx.state.auth.enabled;
        for info in ctx.state.storage.list_collections(&self.db) {
            if only_authorized && !crate::auth::may_see_collection(ctx, &self.db, &info.name)? {
                continue;
            }
            let is_view = crate::namespaces::views::view_of_options(&info.options).is_some();
            let is_ts =
                crate::namespaces::timeseries::TsOptions::of(&info.name, &info.options).is_some();
            let kind = if is_view {
                "view"
            } else if is_ts {
                "timeseries"
            } else {
                info.kind
            };
            let full: Document = if is_ts {
                // As mongod 8 shows a time-series collection: no UUID, no idIndex.
                doc! {
                    "name": info.name.clone(),
                    "type": kind,
                    "options": info.options.clone(),
                    "info": {"readOnly": false},
                }
            } else if is_view {
                doc! {
                    "name": info.name.clone(),
                    "type": kind,
                    "options": info.options.clone(),
                    "info": {"readOnly": true},
                }
            } else {
                let mut d = doc! {
                    "name": info.name.clone(),
                    "type": kind,
                    "options": info.options.clone(),
                    "info": {"readOnly": false, "uuid": Bson::from(info.uuid)},
                };
                if crate::namespaces::clustered::Clustered::of_options(&info.options).is_none() {
                    d.insert("idIndex", crate::namespaces::id_index_spec());
                }
                d
            };
            if let Some(f) = &self.filter {
                if !f.matches_doc(&full) {
                    continue;
                }
            }
            let entry = if self.name_only {
                doc! {"name": info.name, "type": kind}
            } else {
                full
            };
            out.push(crate::reply::to_raw(&entry)?);
        }
        let ns = crate::namespaces::ns(&self.db, "$cmd.listCollections");
        let src: DocSource = Box::new(out.into_iter().map(Ok));
        let mut cursor = Cursor::new(ns.clone(), src, None);
        cursor.knows_end = true; // the listing is built in memory
        let batch = cursor.next_batch(self.batch_size)?;
        crate::cursor::finish_first_batch(ctx.state, &ns, cursor, batch, false)
    }
}
