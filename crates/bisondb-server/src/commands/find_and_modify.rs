//! `findAndModify`: update (or remove) one document chosen by `query` and `sort`, and
//! return it as it was before or, with `new: true`, after the change. On a
//! time-series collection the parsed command runs in `on_view/timeseries/update.rs`.

use bisondb_error::{MongoError, MongoResult};
use bisondb_query::matcher::Matcher;
use bisondb_query::projection::Projection;
use bisondb_query::sort::SortSpec;
use bisondb_query::update::UpdateSpec;
use bson::{doc, Bson, Document, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::fields::write::WriteConcern;
use crate::let_vars::LetVars;
use crate::plan;
use crate::reply;
use crate::request::CommandRequest;
use crate::state::OpCounters;
use crate::write;

pub struct FindAndModify {
    pub(crate) db: String,
    pub(crate) coll: String,
    pub(crate) query: Matcher,
    /// `query` as sent (after `let` substitution): lets a partial index serve it.
    pub(crate) query_doc: Document,
    pub(crate) sort: Option<SortSpec>,
    pub(crate) hint: Option<plan::Hint>,
    pub(crate) remove: bool,
    pub(crate) update: Option<UpdateSpec>,
    pub(crate) new: bool,
    pub(crate) fields: Option<Document>,
    pub(crate) upsert: bool,
    pub(crate) wc: WriteConcern,
    pub(crate) bypass_validation: bool,
    pub(crate) collation: crate::collation::Given,
}

impl Command for FindAndModify {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let n = req.name;
        let mut f = FindAndModify {
            db: req.db.clone(),
            coll: String::new(),
            query: Matcher::parse_doc(&Document::new())?,
            query_doc: Document::new(),
            sort: None,
            hint: None,
            remove: false,
            update: None,
            new: false,
            fields: None,
            upsert: false,
            wc: crate::fields::write::write_concern(n, req.body)?,
            bypass_validation: false,
            collation: None,
        };
        let mut have_coll = false;
        let mut update_raw = None;
        let mut array_filters = Vec::new();
        let lets = LetVars::from_body(n, req.body)?;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "findAndModify" | "findandmodify" => {
                    f.coll = fields::collection_name(n, v)?.to_string();
                    have_coll = true;
                }
                "query" => {
                    let q = lets.filter(&fields::to_document(fields::as_doc(n, "query", v)?)?);
                    f.query = Matcher::parse_doc(&q)?;
                    f.query_doc = q;
                }
                "sort" => {
                    let s = fields::to_document(fields::as_doc(n, "sort", v)?)?;
                    if !s.is_empty() {
                        f.sort = Some(SortSpec::parse(&s)?);
                    }
                }
                "remove" => f.remove = fields::as_bool(n, "remove", v)?,
                "update" => update_raw = Some(v),
                "new" => f.new = fields::as_bool(n, "new", v)?,
                "fields" => {
                    let p = fields::to_document(fields::as_doc(n, "fields", v)?)?;
                    if !p.is_empty() {
                        f.fields = Some(p);
                    }
                }
                "upsert" => f.upsert = fields::as_bool(n, "upsert", v)?,
                "hint" => f.hint = plan::Hint::parse(v)?,
                "collation" => f.collation = crate::collation::parse_arg(n, v)?,
                "arrayFilters" => array_filters = super::update::parse_array_filters(n, v)?,
                "bypassDocumentValidation" => {
                    f.bypass_validation = fields::as_bool(n, "bypassDocumentValidation", v)?;
                }
                "let" => {} // read by `LetVars::from_body`
                other => fields::check_known(n, other, &[])?,
            }
        }
        if !have_coll {
            return Err(fields::missing_field(n, "findAndModify"));
        }
        if let Some(v) = update_raw {
            let spec = super::update::parse_update_spec(n, "update", v, &array_filters, &lets)?;
            super::update::check_replacement(&spec)?;
            f.update = Some(spec);
        }
        if let Some(p) = &f.fields {
            Projection::parse_with_filter(p, &f.query)?;
        }
        match (f.remove, &f.update) {
            (true, Some(_)) => {
                return Err(MongoError::failed_to_parse("Cannot specify both an update and remove=true"))
            }
            (false, None) => {
                return Err(MongoError::failed_to_parse("Either an update or remove=true must be specified"))
            }
            (true, None) if f.upsert => {
                return Err(MongoError::failed_to_parse("Cannot specify both upsert=true and remove=true"))
            }
            (true, None) if f.new => {
                return Err(MongoError::failed_to_parse(
                    "Cannot specify both new=true and remove=true; 'remove' always returns the deleted document",
                ))
            }
            _ => {}
        }
        Ok(f)
    }

    fn execute(mut self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        // The query and sort compare strings with the command's collation,
        // else the collection's default.
        let target = ctx.state.storage.collection(&self.db, &self.coll);
        if let Some(c) = crate::collation::effective(&self.collation, target.as_ref())? {
            self.query = self.query.clone().with_collation(Some(c.clone()));
            self.sort = self.sort.take().map(|s| s.with_collation(Some(c)));
        }
        // `{$meta: "textScore"}` in the sort reads the query's `$text`.
        self.sort = match self.sort.take() {
            Some(s) => Some(s.with_text_score(self.query.text_score_source())?),
            None => None,
        };
        let fields = match &self.fields {
            Some(p) => Some(Projection::parse_with_filter(p, &self.query)?),
            None => None,
        };
        let project = |d: Option<Document>| project_value(d, fields.as_ref());
        let sel = write::Selection {
            matcher: &self.query,
            filter_doc: Some(&self.query_doc),
            sort: self.sort.as_ref(),
            hint: self.hint.as_ref(),
        };
        if self.remove {
            let coll = ctx.state.storage.collection(&self.db, &self.coll);
            let (n, image, run) =
                write::delete_planned(coll.as_ref(), sel, false, self.wc.durability, true)?;
            if let Some(run) = &run {
                ctx.conn.op.ran(&run.stats, &run.plan, false);
            }
            OpCounters::add(&ctx.state.opcounters.delete, n);
            crate::metrics::add(&ctx.state.metrics.document.deleted, n);
            return reply::ok(
                doc! {"lastErrorObject": {"n": reply::count(n)}, "value": project(image)?},
            );
        }
        let spec = self
            .update
            .as_ref()
            .ok_or_else(|| MongoError::internal("findAndModify without update"))?;
        let coll = ctx.state.storage.collection(&self.db, &self.coll);
        let validator =
            crate::validation::Validator::for_collection(coll.as_ref(), self.bypass_validation)?;
        let r = write::update(
            &ctx.state.storage,
            &self.db,
            &self.coll,
            sel,
            spec,
            false,
            self.upsert,
            self.wc.durability,
            true,
            validator.as_ref(),
        )?;
        OpCounters::add(&ctx.state.opcounters.update, 1);
        crate::metrics::note_update(ctx.state, r.modified, r.upserted_id.is_some());
        if let Some(run) = &r.plan {
            ctx.conn.op.ran(&run.stats, &run.plan, false);
        }
        let mut leo = doc! {"n": reply::count(r.matched + u64::from(r.upserted_id.is_some()))};
        leo.insert("updatedExisting", r.matched > 0);
        let value = if r.upserted_id.is_some() {
            if self.new {
                project(r.after)?
            } else {
                Bson::Null
            }
        } else if self.new {
            project(r.after)?
        } else {
            project(r.before)?
        };
        if let Some(id) = r.upserted_id {
            leo.insert("upserted", id);
        }
        reply::ok(doc! {"lastErrorObject": leo, "value": value})
    }
}

/// The reply's `value`: the document through the `fields` projection, or null
/// when there is none. Shared with the time-series `findAndModify`.
pub(crate) fn project_value(d: Option<Document>, fields: Option<&Projection>) -> MongoResult<Bson> {
    match (d, fields) {
        (None, _) => Ok(Bson::Null),
        (Some(d), Some(p)) => Ok(Bson::Document(p.apply(&d)?)),
        (Some(d), None) => Ok(Bson::Document(d)),
    }
}
