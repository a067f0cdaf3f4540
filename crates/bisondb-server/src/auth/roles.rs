//! Roles: mongod's built-in ones and the user-defined roles of
//! `admin.system.roles`, and the role names commands accept.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{Bson, RawBsonRef};

use super::users::{self, Name};
use crate::state::ServerState;

/// Built-in roles defined on every database.
const EVERY_DB: &[&str] = &["dbAdmin", "dbOwner", "read", "readWrite", "userAdmin"];

/// Built-in roles defined on `admin` only.
const ADMIN_ONLY: &[&str] = &[
    "__system",
    "backup",
    "clusterAdmin",
    "clusterManager",
    "clusterMonitor",
    "dbAdminAnyDatabase",
    "directShardOperations",
    "enableSharding",
    "hostManager",
    "readAnyDatabase",
    "readWriteAnyDatabase",
    "restore",
    "root",
    "userAdminAnyDatabase",
];

/// Whether `role` is one of mongod's built-in roles.
pub fn is_builtin(role: &Name) -> bool {
    EVERY_DB.contains(&role.name.as_str())
        || (role.db == "admin" && ADMIN_ONLY.contains(&role.name.as_str()))
}

/// Whether the name belongs to the built-in namespace (no user-defined role
/// may take it).
pub fn is_builtin_name(name: &str) -> bool {
    EVERY_DB.contains(&name) || ADMIN_ONLY.contains(&name)
}

pub fn role_not_found(role: &Name) -> MongoError {
    MongoError::new(
        ErrorCode::RoleNotFound,
        format!("Could not find role: {role}"),
    )
}

/// Reads a `roles` array: names (of `db`'s roles) or `{role, db}`.
pub fn parse_role_names(
    cmd: &str,
    field: &str,
    v: RawBsonRef<'_>,
    db: &str,
) -> MongoResult<Vec<Name>> {
    let arr = crate::fields::as_array(cmd, field, v)?;
    let mut out = Vec::new();
    for el in arr {
        out.push(parse_name(
            el.map_err(crate::request::invalid_bson)?,
            "role",
            db,
        )?);
    }
    Ok(out)
}

/// One user or role name: a string (of `db`) or `{<key>: name, db}`.
pub fn parse_name(v: RawBsonRef<'_>, key: &str, db: &str) -> MongoResult<Name> {
    match v {
        RawBsonRef::String(s) => Ok(Name::new(s, db)),
        RawBsonRef::Document(d) => {
            let get = |k: &str| match d.get(k) {
                Ok(Some(RawBsonRef::String(s))) => Ok(s.to_string()),
                Ok(Some(_)) => Err(MongoError::bad_value(format!(
                    "'{k}' must be a string in a {key} name document"
                ))),
                _ => Err(MongoError::bad_value(format!(
                    "A {key} name document must contain the fields '{key}' and 'db'"
                ))),
            };
            Ok(Name::new(get(key)?, get("db")?))
        }
        _ => Err(MongoError::bad_value(
            "User and role names must be either strings or objects",
        )),
    }
}

/// Fails with 31 RoleNotFound unless every role exists (built in, or in
/// `admin.system.roles`).
pub fn check_exist(state: &ServerState, roles: &[Name]) -> MongoResult<()> {
    for r in roles {
        if !is_builtin(r) && users::get(&state.storage, users::ROLES, r)?.is_none() {
            return Err(role_not_found(r));
        }
    }
    Ok(())
}

/// Role names as stored: `[{role, db}]`.
pub fn to_bson(roles: &[Name]) -> Bson {
    Bson::Array(roles.iter().map(|r| Bson::Document(r.role_doc())).collect())
}
