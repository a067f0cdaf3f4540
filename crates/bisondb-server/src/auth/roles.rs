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

/// Reads a role's `privileges` array, checking each privilege and that a
/// role of a database other than `admin` names only that database.
pub fn parse_privileges(
    cmd: &str,
    v: RawBsonRef<'_>,
    role_db: &str,
) -> MongoResult<Vec<super::privileges::Privilege>> {
    use super::privileges::{Privilege, Resource};
    let mut out = Vec::new();
    for el in crate::fields::as_array(cmd, "privileges", v)? {
        let el = el.map_err(crate::request::invalid_bson)?;
        let d = crate::fields::to_document(crate::fields::as_doc(cmd, "privileges", el)?)?;
        let p = Privilege::from_document(&d)?;
        if role_db != "admin" {
            let ok = matches!(&p.resource, Resource::Ns { db, .. } if db == role_db);
            if !ok {
                return Err(MongoError::bad_value(format!(
                    "Roles on the '{role_db}' database cannot be granted privileges that target other databases or the cluster"
                )));
            }
        }
        out.push(p);
    }
    Ok(out)
}

pub fn privileges_to_bson(p: &[super::privileges::Privilege]) -> Bson {
    Bson::Array(p.iter().map(|p| Bson::Document(p.to_document())).collect())
}

/// A stored user-defined role, or 31 RoleNotFound (a built-in role cannot
/// be changed: 2 BadValue).
pub fn stored_role(state: &ServerState, role: &Name) -> MongoResult<bson::Document> {
    if is_builtin(role) {
        return Err(MongoError::bad_value(format!(
            "Cannot modify built-in role: {role}"
        )));
    }
    users::get(&state.storage, users::ROLES, role)?.ok_or_else(|| role_not_found(role))
}

/// Stores a changed role (or user, `coll`) document and bumps the
/// authorization generation.
pub fn save(state: &ServerState, coll: &str, name: &Name, d: &bson::Document) -> MongoResult<()> {
    users::put(
        &state.storage,
        coll,
        name,
        d,
        false,
        || role_not_found(name),
        || role_not_found(name),
    )?;
    state.auth.changed();
    Ok(())
}

/// Fails when granting `granted` to `role` would make a role inherit itself.
pub fn check_no_cycle(state: &ServerState, role: &Name, granted: &[Name]) -> MongoResult<()> {
    let closure = super::role_closure(state, granted)?;
    if closure.contains(role) {
        return Err(MongoError::new(
            ErrorCode::Other(17),
            format!("Granting roles to {role} would introduce a cycle in the role graph"),
        ));
    }
    Ok(())
}

/// Adds (`grant`) or removes roles in the `roles` array of a stored user or
/// role document.
pub fn change_roles(d: &mut bson::Document, roles: &[Name], grant: bool) {
    let mut current = users::roles_of(d);
    if grant {
        for r in roles {
            if !current.contains(r) {
                current.push(r.clone());
            }
        }
    } else {
        current.retain(|r| !roles.contains(r));
    }
    d.insert("roles", to_bson(&current));
}

/// The `rolesInfo` document of a role: built in or stored.
pub fn info(
    state: &ServerState,
    role: &Name,
    show_privileges: bool,
    show_restrictions: bool,
) -> MongoResult<Option<bson::Document>> {
    let mut own_restrictions = Bson::Array(Vec::new());
    let (direct_roles, own_privileges, builtin) = if let Some(p) = super::privileges::builtin(role)
    {
        (Vec::new(), p, true)
    } else {
        match users::get(&state.storage, users::ROLES, role)? {
            Some(d) => {
                let mut own = Vec::new();
                if let Ok(list) = d.get_array("privileges") {
                    for p in list.iter().filter_map(Bson::as_document) {
                        own.push(super::privileges::Privilege::from_document(p)?);
                    }
                }
                if let Some(r) = d.get("authenticationRestrictions") {
                    own_restrictions = r.clone();
                }
                (users::roles_of(&d), own, false)
            }
            None => return Ok(None),
        }
    };
    let inherited = super::resolve_roles(state, &direct_roles)?;
    let mut all = inherited.privileges.clone();
    all.extend(own_privileges.iter().cloned());
    let merged = super::privileges::Resolved {
        roles: Vec::new(),
        privileges: all,
        restrictions: Vec::new(),
    };
    let mut d = bson::doc! {
        "_id": role.id(),
        "role": &role.name,
        "db": &role.db,
    };
    if show_privileges {
        d.insert("privileges", privileges_to_bson(&own_privileges));
    }
    d.insert("roles", to_bson(&direct_roles));
    d.insert("inheritedRoles", to_bson(&inherited.roles));
    if show_privileges {
        d.insert("inheritedPrivileges", super::privileges_bson(&merged));
    }
    if show_restrictions {
        // Its own list, and one list per role it is or inherits that has any.
        let mut inherited = Vec::new();
        if matches!(&own_restrictions, Bson::Array(a) if !a.is_empty()) {
            inherited.push(own_restrictions.clone());
        }
        let mut lists = bson::Document::new();
        super::add_inherited(state, &direct_roles, &mut lists)?;
        if let Ok(more) = lists.get_array("inheritedAuthenticationRestrictions") {
            inherited.extend(more.iter().cloned());
        }
        d.insert("authenticationRestrictions", own_restrictions);
        d.insert("inheritedAuthenticationRestrictions", inherited);
    }
    d.insert("isBuiltin", builtin);
    Ok(Some(d))
}

/// Every built-in role of database `db`.
pub fn builtin_of(db: &str) -> Vec<Name> {
    let mut v: Vec<Name> = EVERY_DB.iter().map(|r| Name::new(*r, db)).collect();
    if db == "admin" {
        v.extend(ADMIN_ONLY.iter().map(|r| Name::new(*r, db)));
    }
    v.sort();
    v
}

/// The body of `grantRolesToUser`, `revokeRolesFromUser`,
/// `grantRolesToRole` and `revokeRolesFromRole`: `{<cmd>: name, roles}`.
pub struct RoleGrant {
    pub name: Name,
    pub roles: Vec<Name>,
}

impl RoleGrant {
    pub fn parse(req: &crate::request::CommandRequest<'_>) -> MongoResult<RoleGrant> {
        let n = req.name;
        let mut name = Name::new("", req.db.clone());
        let mut roles = None;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                k if k == n => name.name = crate::fields::as_str(n, n, v)?.to_string(),
                "roles" => roles = Some(parse_role_names(n, "roles", v, &req.db)?),
                other => crate::fields::check_known(n, other, &[])?,
            }
        }
        let roles = roles.ok_or_else(|| crate::fields::missing_field(n, "roles"))?;
        Ok(RoleGrant { name, roles })
    }

    /// Grants (or revokes) the roles to the user (`to_user`) or role.
    pub fn apply(self, state: &ServerState, to_user: bool, grant: bool) -> MongoResult<()> {
        check_exist(state, &self.roles)?;
        let (coll, mut d) = if to_user {
            let d = users::get(&state.storage, users::USERS, &self.name)?
                .ok_or_else(|| users::user_not_found(&self.name))?;
            (users::USERS, d)
        } else {
            (users::ROLES, stored_role(state, &self.name)?)
        };
        if grant && !to_user {
            check_no_cycle(state, &self.name, &self.roles)?;
        }
        change_roles(&mut d, &self.roles, grant);
        save(state, coll, &self.name, &d)
    }
}

/// The body of `grantPrivilegesToRole` / `revokePrivilegesFromRole`.
pub struct PrivilegeGrant {
    pub name: Name,
    pub privileges: Vec<super::privileges::Privilege>,
}

impl PrivilegeGrant {
    pub fn parse(req: &crate::request::CommandRequest<'_>) -> MongoResult<PrivilegeGrant> {
        let n = req.name;
        let mut name = Name::new("", req.db.clone());
        let mut privileges = None;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                k if k == n => name.name = crate::fields::as_str(n, n, v)?.to_string(),
                "privileges" => privileges = Some(parse_privileges(n, v, &req.db)?),
                other => crate::fields::check_known(n, other, &[])?,
            }
        }
        let privileges = privileges.ok_or_else(|| crate::fields::missing_field(n, "privileges"))?;
        Ok(PrivilegeGrant { name, privileges })
    }

    /// Adds the privileges to the role (merging actions on one resource),
    /// or takes their actions away.
    pub fn apply(self, state: &ServerState, grant: bool) -> MongoResult<()> {
        use super::privileges::Privilege;
        let mut d = stored_role(state, &self.name)?;
        let mut current: Vec<Privilege> = Vec::new();
        if let Ok(list) = d.get_array("privileges") {
            for p in list.iter().filter_map(Bson::as_document) {
                current.push(Privilege::from_document(p)?);
            }
        }
        for p in self.privileges {
            match current.iter_mut().find(|c| c.resource == p.resource) {
                Some(c) if grant => c.actions = c.actions.union(p.actions),
                Some(c) => c.actions = c.actions.minus(p.actions),
                None if grant => current.push(p),
                None => {}
            }
        }
        current.retain(|p| !p.actions.is_empty());
        d.insert("privileges", privileges_to_bson(&current));
        save(state, users::ROLES, &self.name, &d)
    }
}
