//! The user store: `admin.system.users`, one document per user in mongod's
//! shape (`_id: "<db>.<user>"`, `userId`, `user`, `db`, `credentials` per
//! mechanism, `roles`, optional `customData` and
//! `authenticationRestrictions`), never a password. It lives in an ordinary
//! collection, so users survive restarts and a copy of the dbpath copies
//! them; every change bumps the authorization generation
//! ([`super::AuthState::changed`]).

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_storage::{Durability, Modify, Storage};
use bson::{doc, Bson, Document, RawDocumentBuf};

use super::scram::{Credential, Mechanism};

pub const ADMIN: &str = "admin";
pub const USERS: &str = "system.users";
pub const ROLES: &str = "system.roles";

/// A user (or role) by name and database, shown `name@db` in messages.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name {
    pub name: String,
    pub db: String,
}

impl Name {
    pub fn new(name: impl Into<String>, db: impl Into<String>) -> Name {
        Name {
            name: name.into(),
            db: db.into(),
        }
    }

    /// The `_id` of its document: `<db>.<name>`.
    pub fn id(&self) -> String {
        format!("{}.{}", self.db, self.name)
    }

    pub fn user_doc(&self) -> Document {
        doc! {"user": &self.name, "db": &self.db}
    }

    pub fn role_doc(&self) -> Document {
        doc! {"role": &self.name, "db": &self.db}
    }
}

impl std::fmt::Display for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.name, self.db)
    }
}

pub fn user_not_found(name: &Name) -> MongoError {
    MongoError::new(
        ErrorCode::UserNotFound,
        format!(
            "Could not find user \"{}\" for db \"{}\"",
            name.name, name.db
        ),
    )
}

fn to_raw(d: &Document) -> MongoResult<RawDocumentBuf> {
    RawDocumentBuf::try_from(d).map_err(|e| MongoError::internal(e.to_string()))
}

fn to_doc(raw: &bson::RawDocument) -> MongoResult<Document> {
    Document::try_from(raw).map_err(|e| MongoError::internal(e.to_string()))
}

/// The stored document of `name` in `coll` (users or roles), if any.
pub fn get(storage: &Storage, coll: &str, name: &Name) -> MongoResult<Option<Document>> {
    let Some(c) = storage.collection(ADMIN, coll) else {
        return Ok(None);
    };
    let id = Bson::String(name.id());
    let raw = bson::RawBson::try_from(id).map_err(|e| MongoError::internal(e.to_string()))?;
    match c.get(raw.as_raw_bson_ref())? {
        Some(d) => Ok(Some(to_doc(&d)?)),
        None => Ok(None),
    }
}

/// Every stored document of `coll`, in `_id` order.
pub fn all(storage: &Storage, coll: &str) -> MongoResult<Vec<Document>> {
    let Some(c) = storage.collection(ADMIN, coll) else {
        return Ok(Vec::new());
    };
    c.scan(false)
        .map(|d| to_doc(&d.map_err(MongoError::from)?))
        .collect()
}

/// Whether any user exists (the localhost exception ends with the first).
pub fn any_user(storage: &Storage) -> bool {
    storage
        .collection(ADMIN, USERS)
        .is_some_and(|c| c.count() > 0)
}

/// Writes `doc` (whose `_id` is `name`'s) into `coll`: `create` refuses an
/// existing document with `exists`, otherwise a missing one is `missing`.
pub fn put(
    storage: &Storage,
    coll: &str,
    name: &Name,
    doc: &Document,
    create: bool,
    exists: impl Fn() -> MongoError,
    missing: impl Fn() -> MongoError,
) -> MongoResult<()> {
    let c = storage.get_or_create_collection(ADMIN, coll)?;
    let raw = to_raw(doc)?;
    let id = bson::RawBson::String(name.id());
    c.modify(
        id.as_raw_bson_ref(),
        Durability::Sync,
        &mut |current| match (current.is_some(), create) {
            (true, true) => Err(exists()),
            (false, false) => Err(missing()),
            (false, true) => Ok(Modify::Insert(raw.clone())),
            (true, false) => Ok(Modify::Replace(raw.clone())),
        },
    )?;
    Ok(())
}

/// Removes `name`'s document from `coll`; false when there was none.
pub fn remove(storage: &Storage, coll: &str, name: &Name) -> MongoResult<bool> {
    let Some(c) = storage.collection(ADMIN, coll) else {
        return Ok(false);
    };
    let id = bson::RawBson::String(name.id());
    Ok(c.delete(id.as_raw_bson_ref(), Durability::Sync)?)
}

/// The credential of a stored user for `mech`, if the user has one.
pub fn credential(user: &Document, mech: Mechanism) -> Option<Credential> {
    let creds = user.get_document("credentials").ok()?;
    Credential::from_document(creds.get_document(mech.name()).ok()?)
}

/// The mechanisms a stored user may authenticate with, mongod's order.
pub fn mechanisms(user: &Document) -> Vec<String> {
    user.get_document("credentials")
        .map(|c| c.keys().cloned().collect())
        .unwrap_or_default()
}

/// The roles a stored user or role document names (`roles`), as names.
pub fn roles_of(d: &Document) -> Vec<Name> {
    d.get_array("roles")
        .map(|a| {
            a.iter()
                .filter_map(|r| {
                    let r = r.as_document()?;
                    Some(Name::new(r.get_str("role").ok()?, r.get_str("db").ok()?))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A new random UUID (version 4), as mongod's `userId`.
pub fn new_uuid() -> Bson {
    use rand::RngCore;
    let mut b = [0u8; 16];
    rand::rng().fill_bytes(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    Bson::Binary(bson::Binary {
        subtype: bson::spec::BinarySubtype::Uuid,
        bytes: b.to_vec(),
    })
}

/// Reads a `mechanisms` array of a user command.
pub fn parse_mechanisms(cmd: &str, v: bson::RawBsonRef<'_>) -> MongoResult<Vec<Mechanism>> {
    let mut out = Vec::new();
    for el in crate::fields::as_array(cmd, "mechanisms", v)? {
        let el = el.map_err(crate::request::invalid_bson)?;
        let name = crate::fields::as_str(cmd, "mechanisms", el)?;
        let m = Mechanism::from_name(name)
            .ok_or_else(|| MongoError::bad_value(format!("Unknown auth mechanism '{name}'")))?;
        if !out.contains(&m) {
            out.push(m);
        }
    }
    if out.is_empty() {
        return Err(MongoError::bad_value("mechanisms field must not be empty"));
    }
    Ok(out)
}

/// The `credentials` document for `password` (`digested`: SCRAM-SHA-1's
/// digest computed by the client, `digestPassword: false`).
pub fn credentials(
    state: &crate::state::ServerState,
    user: &str,
    password: &str,
    digested: bool,
    mechanisms: &[Mechanism],
) -> MongoResult<Document> {
    if password.is_empty() {
        return Err(MongoError::bad_value("User passwords must not be empty"));
    }
    let mut d = Document::new();
    for &m in [Mechanism::Sha1, Mechanism::Sha256].iter() {
        if !mechanisms.contains(&m) {
            continue;
        }
        if digested && m == Mechanism::Sha256 {
            return Err(MongoError::bad_value(
                "Use of SCRAM-SHA-256 requires undigested passwords",
            ));
        }
        let prepared = m.prepare_password(user, password, digested)?;
        let c = Credential::new(m, &prepared, state.auth.iterations(m));
        d.insert(m.name(), c.to_document());
    }
    Ok(d)
}

/// The fields `createUser` and `updateUser` share, as sent.
pub struct UserFields {
    pub name: Name,
    pub pwd: Option<String>,
    /// `digestPassword` (true unless the client digested a SHA-1 password).
    pub digest_password: bool,
    pub custom_data: Option<Document>,
    pub roles: Option<Vec<Name>>,
    pub mechanisms: Option<Vec<Mechanism>>,
    pub restrictions: Option<Bson>,
}

impl UserFields {
    /// Writes the user document `d` built from these fields (its
    /// `customData` and `authenticationRestrictions` set here): a new user
    /// (`create`: 51003 if one exists) or a changed one (11 if gone).
    pub fn store(
        self,
        state: &crate::state::ServerState,
        mut d: Document,
        create: bool,
    ) -> MongoResult<()> {
        if let Some(cd) = self.custom_data {
            d.insert("customData", cd);
        }
        if let Some(r) = self.restrictions {
            d.insert("authenticationRestrictions", r);
        }
        let name = &self.name;
        put(
            &state.storage,
            USERS,
            name,
            &d,
            create,
            || {
                MongoError::new(
                    ErrorCode::Other(51003),
                    format!("User \"{name}\" already exists"),
                )
            },
            || user_not_found(name),
        )?;
        state.auth.changed();
        Ok(())
    }

    pub fn parse(req: &crate::request::CommandRequest<'_>) -> MongoResult<UserFields> {
        use crate::fields;
        let n = req.name;
        let mut u = UserFields {
            name: Name::new("", req.db.clone()),
            pwd: None,
            digest_password: true,
            custom_data: None,
            roles: None,
            mechanisms: None,
            restrictions: None,
        };
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                k if k == n => u.name.name = fields::as_str(n, n, v)?.to_string(),
                "pwd" => u.pwd = Some(fields::as_str(n, "pwd", v)?.to_string()),
                "digestPassword" => u.digest_password = fields::as_bool(n, "digestPassword", v)?,
                "customData" => {
                    u.custom_data = Some(fields::to_document(fields::as_doc(n, "customData", v)?)?)
                }
                "roles" => u.roles = Some(super::roles::parse_role_names(n, "roles", v, &req.db)?),
                "mechanisms" => u.mechanisms = Some(parse_mechanisms(n, v)?),
                "authenticationRestrictions" => {
                    fields::as_array(n, "authenticationRestrictions", v)?;
                    let r = fields::to_bson(v)?;
                    super::restrictions::parse(&r)?;
                    u.restrictions = Some(r);
                }
                other => fields::check_known(n, other, &[])?,
            }
        }
        Ok(u)
    }
}
