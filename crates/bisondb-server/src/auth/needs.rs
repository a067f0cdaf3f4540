//! What commands whose privileges depend on their body need
//! ([`Needs::Computed`](super::Needs::Computed) in their registry entry):
//! an aggregation's stages read and write other namespaces, a rename
//! touches two, the user and role commands touch the roles they grant.

use bisondb_error::MongoResult;
use bson::{RawBsonRef, RawDocument};

use super::privileges::{Action, Required};
use super::roles;
use super::users::Name;
use super::OwnedTarget;
use crate::request::CommandRequest;
use Action::*;

fn first_string<'a>(req: &'a CommandRequest<'_>) -> Option<&'a str> {
    match req.body.iter().next() {
        Some(Ok((_, RawBsonRef::String(s)))) => Some(s),
        _ => None,
    }
}

fn field<'a>(d: &'a RawDocument, k: &str) -> Option<RawBsonRef<'a>> {
    d.get(k).ok().flatten()
}

fn is_true(d: &RawDocument, k: &str) -> bool {
    matches!(field(d, k), Some(RawBsonRef::Boolean(true)))
}

/// `aggregate`: `find` on its collection (unless a stage that reads no
/// collection, or reads it differently, comes first) and what every stage
/// reads or writes, sub-pipelines included.
pub fn aggregate(req: &CommandRequest<'_>) -> MongoResult<Vec<Required>> {
    let mut out = Vec::new();
    let coll = first_string(req);
    let Some(RawBsonRef::Array(pipeline)) = field(req.body, "pipeline") else {
        // The command itself reports the missing pipeline.
        if let Some(c) = coll {
            out.push(Required::ns(&req.db, c, &[Find]));
        }
        return Ok(out);
    };
    let first_stage = pipeline
        .into_iter()
        .next()
        .and_then(|s| s.ok())
        .and_then(|s| s.as_document())
        .and_then(|d| d.iter().next())
        .and_then(|e| e.ok())
        .map(|(k, _)| k.to_string());
    let reads_itself = matches!(
        first_stage.as_deref(),
        Some(
            "$collStats"
                | "$indexStats"
                | "$currentOp"
                | "$listLocalSessions"
                | "$listSessions"
                | "$documents"
                | "$changeStream"
                | "$planCacheStats"
                | "$listSearchIndexes"
        )
    );
    if let (Some(c), false) = (coll, reads_itself) {
        out.push(Required::ns(&req.db, c, &[Find]));
    }
    let bypass = is_true(req.body, "bypassDocumentValidation");
    pipeline_needs(&req.db, coll.unwrap_or(""), pipeline, bypass, &mut out);
    Ok(out)
}

fn pipeline_needs(
    db: &str,
    coll: &str,
    pipeline: &bson::RawArray,
    bypass: bool,
    out: &mut Vec<Required>,
) {
    for stage in pipeline.into_iter().flatten() {
        let Some(stage) = stage.as_document() else {
            continue;
        };
        let Some(Ok((name, spec))) = stage.iter().next() else {
            continue;
        };
        let name = name.as_str();
        match (name, spec) {
            ("$lookup" | "$graphLookup", RawBsonRef::Document(d)) => {
                match field(d, "from") {
                    Some(RawBsonRef::String(from)) => out.push(Required::ns(db, from, &[Find])),
                    Some(RawBsonRef::Document(f)) => {
                        if let (Some(RawBsonRef::String(fdb)), Some(RawBsonRef::String(fc))) =
                            (field(f, "db"), field(f, "coll"))
                        {
                            out.push(Required::ns(fdb, fc, &[Find]));
                        }
                    }
                    _ => {}
                }
                if let Some(RawBsonRef::Array(p)) = field(d, "pipeline") {
                    pipeline_needs(db, coll, p, bypass, out);
                }
            }
            ("$unionWith", RawBsonRef::String(c)) => out.push(Required::ns(db, c, &[Find])),
            ("$unionWith", RawBsonRef::Document(d)) => {
                if let Some(RawBsonRef::String(c)) = field(d, "coll") {
                    out.push(Required::ns(db, c, &[Find]));
                }
                if let Some(RawBsonRef::Array(p)) = field(d, "pipeline") {
                    pipeline_needs(db, coll, p, bypass, out);
                }
            }
            ("$facet", RawBsonRef::Document(d)) => {
                for sub in d.iter().flatten() {
                    if let RawBsonRef::Array(p) = sub.1 {
                        pipeline_needs(db, coll, p, bypass, out);
                    }
                }
            }
            ("$out" | "$merge", spec) => {
                let (tdb, tcoll) = match spec {
                    RawBsonRef::String(c) => (db.to_string(), c.to_string()),
                    RawBsonRef::Document(d) => {
                        let target = match field(d, "into") {
                            Some(RawBsonRef::Document(i)) => i,
                            Some(RawBsonRef::String(c)) => {
                                out.push(merge_or_out(name, db, c, bypass));
                                continue;
                            }
                            _ => d,
                        };
                        let tdb = match field(target, "db") {
                            Some(RawBsonRef::String(s)) => s.to_string(),
                            _ => db.to_string(),
                        };
                        match field(target, "coll") {
                            Some(RawBsonRef::String(c)) => (tdb, c.to_string()),
                            _ => continue,
                        }
                    }
                    _ => continue,
                };
                out.push(merge_or_out(name, &tdb, &tcoll, bypass));
            }
            ("$collStats", _) => out.push(Required::ns(db, coll, &[CollStats])),
            ("$indexStats", _) => out.push(Required::ns(db, coll, &[IndexStats])),
            ("$planCacheStats", _) => out.push(Required::ns(db, coll, &[PlanCacheRead])),
            ("$listSearchIndexes", _) => out.push(Required::ns(db, coll, &[ListSearchIndexes])),
            ("$changeStream", _) => out.push(Required::ns(db, coll, &[Find, ChangeStream])),
            // Without `allUsers` the stage lists the caller's own operations,
            // which needs no privilege (mongod's default is `false`).
            ("$currentOp", RawBsonRef::Document(d)) if is_true(d, "allUsers") => {
                out.push(Required::cluster(&[Inprog]))
            }
            ("$listLocalSessions" | "$listSessions", RawBsonRef::Document(d))
                if is_true(d, "allUsers") =>
            {
                out.push(Required::cluster(&[ListSessions]))
            }
            _ => {}
        }
    }
}

fn merge_or_out(stage: &str, db: &str, coll: &str, bypass: bool) -> Required {
    let mut actions = vec![Insert, Remove];
    if stage == "$merge" {
        actions = vec![Insert, Update];
    }
    if bypass {
        actions.push(BypassDocumentValidation);
    }
    Required::ns(db, coll, &actions)
}

/// `create`: `createCollection`, or `insert` (mongod accepts either: here
/// `createCollection`); a view also reads its source and the namespaces of
/// its pipeline.
pub fn create(req: &CommandRequest<'_>) -> MongoResult<Vec<Required>> {
    let Some(coll) = first_string(req) else {
        return Ok(vec![Required::db(&req.db, &[CreateCollection])]);
    };
    let mut out = vec![Required::ns(&req.db, coll, &[CreateCollection])];
    if let Some(RawBsonRef::String(on)) = field(req.body, "viewOn") {
        out.push(Required::ns(&req.db, on, &[Find]));
        if let Some(RawBsonRef::Array(p)) = field(req.body, "pipeline") {
            pipeline_needs(&req.db, on, p, false, &mut out);
        }
    }
    Ok(out)
}

/// `renameCollection` (on admin, namespaces `db.coll`): within a database
/// `renameCollectionSameDB` on it; across databases `find` and
/// `dropCollection` on the source, `insert` and `createIndex` on the
/// target; `dropTarget` adds `dropCollection` on the target.
pub fn rename_collection(req: &CommandRequest<'_>) -> MongoResult<Vec<Required>> {
    let split = |s: &str| {
        s.split_once('.')
            .map(|(d, c)| (d.to_string(), c.to_string()))
    };
    let from = first_string(req).and_then(split);
    let to = match field(req.body, "to") {
        Some(RawBsonRef::String(s)) => split(s),
        _ => None,
    };
    let (Some((fdb, fc)), Some((tdb, tc))) = (from, to) else {
        return Ok(vec![Required::cluster(&[])]);
    };
    let mut out = if fdb == tdb {
        vec![Required::db(&fdb, &[RenameCollectionSameDB])]
    } else {
        vec![
            Required::ns(&fdb, &fc, &[Find, DropCollection]),
            Required::ns(&tdb, &tc, &[Insert, CreateIndex]),
        ]
    };
    if is_true(req.body, "dropTarget") {
        out.push(Required::ns(&tdb, &tc, &[DropCollection]));
    }
    Ok(out)
}

/// `cloneCollectionAsCapped`: `find` on the source, `insert` and
/// `createCollection` on the target.
pub fn clone_collection_as_capped(req: &CommandRequest<'_>) -> MongoResult<Vec<Required>> {
    let mut out = Vec::new();
    if let Some(c) = first_string(req) {
        out.push(Required::ns(&req.db, c, &[Find]));
    }
    if let Some(RawBsonRef::String(to)) = field(req.body, "toCollection") {
        out.push(Required::ns(&req.db, to, &[Insert, CreateCollection]));
    }
    Ok(out)
}

/// `update`: `update`, and `insert` when a statement upserts.
pub fn update(req: &CommandRequest<'_>) -> MongoResult<Vec<Required>> {
    let coll = first_string(req).unwrap_or("");
    let mut actions = vec![Update];
    let upserts = |d: &RawDocument| is_true(d, "upsert");
    let mut any_upsert = false;
    if let Some(RawBsonRef::Array(a)) = field(req.body, "updates") {
        any_upsert = a
            .into_iter()
            .flatten()
            .any(|u| u.as_document().is_some_and(upserts));
    }
    for s in &req.sequences {
        any_upsert |= s.documents.iter().any(|d| upserts(d));
    }
    if any_upsert {
        actions.push(Insert);
    }
    if is_true(req.body, "bypassDocumentValidation") {
        actions.push(BypassDocumentValidation);
    }
    Ok(vec![Required::ns(&req.db, coll, &actions)])
}

/// `findAndModify`: `find` and `update` (`remove` with `remove: true`,
/// `insert` too with `upsert: true`).
pub fn find_and_modify(req: &CommandRequest<'_>) -> MongoResult<Vec<Required>> {
    let coll = first_string(req).unwrap_or("");
    let mut actions = vec![Find];
    if is_true(req.body, "remove") {
        actions.push(Remove);
    } else {
        actions.push(Update);
        if is_true(req.body, "upsert") {
            actions.push(Insert);
        }
    }
    if is_true(req.body, "bypassDocumentValidation") {
        actions.push(BypassDocumentValidation);
    }
    Ok(vec![Required::ns(&req.db, coll, &actions)])
}

/// `mapReduce`: `find` on its collection; with output to a collection,
/// `insert` and `remove` (replace) or `update` (merge, reduce) on that one,
/// and `bypassDocumentValidation` when asked (mongod's
/// `checkAuthForMapReduce`). An `out` it cannot read asks for `find` only:
/// the command then reports the error.
pub fn map_reduce(req: &CommandRequest<'_>) -> MongoResult<Vec<Required>> {
    let coll = first_string(req).unwrap_or("");
    let mut out = vec![Required::ns(&req.db, coll, &[Find])];
    let (second, target_db, target) = match field(req.body, "out") {
        Some(RawBsonRef::String(c)) => (Remove, None, c),
        Some(RawBsonRef::Document(d)) => {
            let named = |k| match field(d, k) {
                Some(RawBsonRef::String(c)) => Some(c),
                _ => None,
            };
            let target_db = named("db");
            match (named("replace"), named("merge").or(named("reduce"))) {
                (Some(c), _) => (Remove, target_db, c),
                (None, Some(c)) => (Update, target_db, c),
                (None, None) => return Ok(out),
            }
        }
        _ => return Ok(out),
    };
    let mut actions = vec![Insert, second];
    if is_true(req.body, "bypassDocumentValidation") {
        actions.push(BypassDocumentValidation);
    }
    out.push(Required::ns(target_db.unwrap_or(&req.db), target, &actions));
    Ok(out)
}

/// `listCollections`: `listCollections` on the database, unless it asks
/// only for the names of the collections the user may use
/// (`authorizedCollections` with `nameOnly`), which the command filters.
pub fn list_collections(req: &CommandRequest<'_>) -> MongoResult<Vec<Required>> {
    if is_true(req.body, "authorizedCollections") && is_true(req.body, "nameOnly") {
        return Ok(Vec::new());
    }
    Ok(vec![Required::db(&req.db, &[ListCollections])])
}

/// `currentOp`: `inprog` on the cluster, unless it asks only for the
/// caller's own operations (`$ownOps: true`), which any authenticated user
/// may see.
pub fn current_op(req: &CommandRequest<'_>) -> MongoResult<Vec<Required>> {
    if is_true(req.body, "$ownOps") {
        return Ok(Vec::new());
    }
    Ok(vec![Required::cluster(&[Inprog])])
}

/// `checkMetadataConsistency`: its action on the cluster (on `admin`, the
/// whole cluster), on the database, or on the collection it names (a string
/// first value, or the `coll` field).
pub fn check_metadata_consistency(req: &CommandRequest<'_>) -> MongoResult<Vec<Required>> {
    let coll = first_string(req).or(match field(req.body, "coll") {
        Some(RawBsonRef::String(s)) => Some(s),
        _ => None,
    });
    Ok(vec![match coll {
        Some(c) => Required::ns(&req.db, c, &[CheckMetadataConsistency]),
        None if req.db == "admin" => Required::cluster(&[CheckMetadataConsistency]),
        None => Required::db(&req.db, &[CheckMetadataConsistency]),
    }])
}

/// `bulkWrite` (on admin): per namespace of `nsInfo`, the actions of the
/// operations aimed at it.
pub fn bulk_write(req: &CommandRequest<'_>) -> MongoResult<Vec<Required>> {
    let mut namespaces = Vec::new();
    if let Some(RawBsonRef::Array(a)) = field(req.body, "nsInfo") {
        for ns in a.into_iter().flatten() {
            let ns = ns.as_document().and_then(|d| match field(d, "ns") {
                Some(RawBsonRef::String(s)) => s
                    .split_once('.')
                    .map(|(d, c)| (d.to_string(), c.to_string())),
                _ => None,
            });
            namespaces.push(ns);
        }
    }
    let mut out = Vec::new();
    let mut ops: Vec<&RawDocument> = Vec::new();
    if let Some(RawBsonRef::Array(a)) = field(req.body, "ops") {
        ops.extend(a.into_iter().flatten().filter_map(|o| o.as_document()));
    }
    for s in &req.sequences {
        ops.extend(s.documents.iter().copied());
    }
    for op in ops {
        let Some(Ok((kind, idx))) = op.iter().next() else {
            continue;
        };
        let kind = kind.as_str();
        let idx = match idx {
            RawBsonRef::Int32(i) => i as usize,
            RawBsonRef::Int64(i) => i as usize,
            _ => continue,
        };
        let Some(Some((db, coll))) = namespaces.get(idx) else {
            continue;
        };
        let mut actions = match kind {
            "insert" => vec![Insert],
            "update" => vec![Update],
            "delete" => vec![Remove],
            _ => continue,
        };
        if kind == "update" && is_true(op, "upsert") {
            actions.push(Insert);
        }
        out.push(Required::ns(db, coll, &actions));
    }
    Ok(out)
}

/// The roles a user or role command names, each needing `grantRole` (or
/// `revokeRole`) on its database.
fn role_grants(
    req: &CommandRequest<'_>,
    key: &str,
    action: Action,
    out: &mut Vec<Required>,
) -> MongoResult<()> {
    if let Some(v) = field(req.body, key) {
        if let Ok(names) = roles::parse_role_names(req.name, key, v, &req.db) {
            for r in names {
                out.push(Required::db(&r.db, &[action]));
            }
        }
    }
    Ok(())
}

/// `createUser`: `createUser` on the database and `grantRole` on the
/// database of every role granted.
pub fn create_user(req: &CommandRequest<'_>) -> MongoResult<Vec<Required>> {
    let mut out = vec![Required::db(&req.db, &[CreateUser])];
    role_grants(req, "roles", GrantRole, &mut out)?;
    Ok(out)
}

/// `updateUser`: `changePassword` (a user's own: being that user),
/// `changeCustomData`, `grantRole`/`revokeRole` for new roles.
pub fn update_user(req: &CommandRequest<'_>) -> MongoResult<Vec<Required>> {
    let own = first_string(req).map(|u| Name::new(u, req.db.clone()));
    let mut out = Vec::new();
    let target = |a: Action| match &own {
        Some(u) => Required {
            target: OwnedTarget::OwnUser(u.clone()),
            actions: super::privileges::ActionSet::of(&[a]),
        },
        None => Required::db(&req.db, &[a]),
    };
    if field(req.body, "pwd").is_some() {
        out.push(target(ChangePassword));
    }
    if field(req.body, "customData").is_some() {
        out.push(target(ChangeCustomData));
    }
    if field(req.body, "roles").is_some() {
        out.push(Required::db(&req.db, &[RevokeRole]));
        role_grants(req, "roles", GrantRole, &mut out)?;
    }
    if field(req.body, "authenticationRestrictions").is_some()
        || field(req.body, "mechanisms").is_some()
    {
        out.push(Required::db(&req.db, &[SetAuthenticationRestriction]));
    }
    Ok(out)
}

/// `usersInfo`: `viewUser` on the database of every user asked for (a
/// user may always see itself).
pub fn users_info(req: &CommandRequest<'_>) -> MongoResult<Vec<Required>> {
    let Some(v) = field(req.body, "usersInfo") else {
        return Ok(vec![Required::db(&req.db, &[ViewUser])]);
    };
    let one = |v: RawBsonRef<'_>| -> MongoResult<Required> {
        let n = roles::parse_name(v, "user", &req.db)?;
        Ok(Required {
            target: OwnedTarget::OwnUser(n),
            actions: super::privileges::ActionSet::of(&[ViewUser]),
        })
    };
    match v {
        RawBsonRef::Array(a) => a
            .into_iter()
            .map(|e| one(e.map_err(crate::request::invalid_bson)?))
            .collect(),
        RawBsonRef::String(_) => Ok(vec![one(v)?]),
        // Every database's users: `viewUser` on every database.
        RawBsonRef::Document(d) if field(d, "forAllDBs").is_some() => {
            Ok(vec![Required::db("", &[ViewUser])])
        }
        RawBsonRef::Document(_) => Ok(vec![one(v)?]),
        _ => Ok(vec![Required::db(&req.db, &[ViewUser])]),
    }
}

/// `grantRolesToUser` / `grantRolesToRole`: `grantRole` on each role's db.
pub fn grant_roles(req: &CommandRequest<'_>) -> MongoResult<Vec<Required>> {
    let mut out = Vec::new();
    role_grants(req, "roles", GrantRole, &mut out)?;
    Ok(out)
}

/// `revokeRolesFromUser` / `revokeRolesFromRole`: `revokeRole` on each
/// role's db.
pub fn revoke_roles(req: &CommandRequest<'_>) -> MongoResult<Vec<Required>> {
    let mut out = Vec::new();
    role_grants(req, "roles", RevokeRole, &mut out)?;
    Ok(out)
}

/// `createRole`: `createRole` on the database, `grantRole`
/// on every inherited role's db (and on the database for privileges).
pub fn create_role(req: &CommandRequest<'_>) -> MongoResult<Vec<Required>> {
    let mut out = vec![Required::db(&req.db, &[CreateRole])];
    role_grants(req, "roles", GrantRole, &mut out)?;
    if field(req.body, "privileges").is_some() {
        out.push(Required::db(&req.db, &[GrantRole]));
    }
    Ok(out)
}

/// `updateRole`: what `createRole` needs for the new roles and privileges
/// (without `createRole`), and, as its manual page says, "the ability to
/// revoke any role in the system" (`revokeRole` on every database): the
/// roles and privileges it replaces are not known beforehand.
pub fn update_role(req: &CommandRequest<'_>) -> MongoResult<Vec<Required>> {
    let mut out = vec![Required::db("", &[RevokeRole])];
    role_grants(req, "roles", GrantRole, &mut out)?;
    if field(req.body, "privileges").is_some() {
        out.push(Required::db(&req.db, &[GrantRole]));
    }
    Ok(out)
}

/// `rolesInfo`: `viewRole` on the database of every role asked for (a
/// user may see the roles it holds; here: `viewRole` on the database).
pub fn roles_info(req: &CommandRequest<'_>) -> MongoResult<Vec<Required>> {
    let mut out = Vec::new();
    match field(req.body, "rolesInfo") {
        Some(RawBsonRef::Array(a)) => {
            for e in a.into_iter().flatten() {
                let n = roles::parse_name(e, "role", &req.db)?;
                out.push(Required::db(&n.db, &[ViewRole]));
            }
        }
        Some(v @ RawBsonRef::Document(_)) => {
            let n = roles::parse_name(v, "role", &req.db)?;
            out.push(Required::db(&n.db, &[ViewRole]));
        }
        _ => out.push(Required::db(&req.db, &[ViewRole])),
    }
    Ok(out)
}
