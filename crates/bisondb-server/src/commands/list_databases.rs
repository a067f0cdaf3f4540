//! `listDatabases`: every database with its size on disk.

use bisondb_error::MongoResult;
use bisondb_query::matcher::Matcher;
use bson::{doc, Bson, Document, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct ListDatabases {
    filter: Option<Matcher>,
    name_only: bool,
    /// `authorizedDatabases`: `Some(true)` lists only the databases the
    /// user has privileges on, `Some(false)` needs `listDatabases`; unset,
    /// a user without `listDatabases` gets the filtered list.
    authorized_databases: Option<bool>,
}

impl Command for ListDatabases {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let n = req.name;
        let mut l = ListDatabases {
            filter: None,
            name_only: false,
            authorized_databases: None,
        };
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "listDatabases" => {}
                "filter" => l.filter = Some(Matcher::parse(fields::as_doc(n, "filter", v)?)?),
                "nameOnly" => l.name_only = fields::as_bool(n, "nameOnly", v)?,
                "authorizedDatabases" => {
                    l.authorized_databases = Some(fields::as_bool(n, "authorizedDatabases", v)?);
                }
                other => fields::check_known(n, other, &[])?,
            }
        }
        Ok(l)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let state = ctx.state;
        let storage = &state.storage;
        let mut list = Vec::new();
        let mut total: u64 = 0;
        // mongod creates `admin`, `config` and `local` at startup (a fresh
        // standalone lists all three); BisonDB serves them whether or not
        // they hold a collection, so they are always listed, with the sizes
        // and emptiness measured like any other database's.
        let mut names = storage.list_databases();
        for always in ["admin", "config", "local"] {
            if !names.iter().any(|n| n == always) {
                names.push(always.to_string());
            }
        }
        names.sort();
        // With `--auth`, a user without `listDatabases` on the cluster (or
        // asking for `authorizedDatabases`) sees the databases it may use.
        let all = crate::auth::may_list_all_dbs(ctx)?;
        if !all && self.authorized_databases == Some(false) {
            return Err(bisondb_error::MongoError::new(
                bisondb_error::ErrorCode::Unauthorized,
                "not authorized on admin to execute command { listDatabases: 1, authorizedDatabases: false }",
            ));
        }
        if ctx.state.auth.enabled && (!all || self.authorized_databases == Some(true)) {
            let mut visible = Vec::with_capacity(names.len());
            for name in names {
                if crate::auth::may_see_db(ctx, &name)? {
                    visible.push(name);
                }
            }
            names = visible;
        }
        if !self.name_only {
            state.flush_for_sizes();
        }
        for name in names {
            let stats = storage.database_stats(&name);
            let size = stats.storage_size.saturating_add(stats.index_size);
            let entry: Document = if self.name_only {
                doc! {"name": name}
            } else {
                doc! {"name": name, "sizeOnDisk": size as i64, "empty": stats.objects == 0}
            };
            if let Some(f) = &self.filter {
                if !f.matches_doc(&entry) {
                    continue;
                }
            }
            total = total.saturating_add(size);
            list.push(Bson::Document(entry));
        }
        if self.name_only {
            reply::ok(doc! {"databases": list})
        } else {
            reply::ok(
                doc! {"databases": list, "totalSize": total as i64, "totalSizeMb": (total / (1024 * 1024)) as i64},
            )
        }
    }
}
