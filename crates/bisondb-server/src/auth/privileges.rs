//! Privileges: mongod's action types, resources, the privileges of the
//! built-in roles (the manual's "Built-In Roles"), what a command needs
//! ([`Needs`], a field of every `registry::CommandSpec`), and the check of
//! one against the other.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, Bson, Document};

use super::users::Name;

macro_rules! actions {
    ($($variant:ident = $name:literal,)*) => {
        /// One of mongod's action types (the manual's "Privilege Actions").
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[repr(u8)]
        pub enum Action { $($variant,)* }

        impl Action {
            pub const ALL: &'static [Action] = &[$(Action::$variant,)*];

            pub fn name(self) -> &'static str {
                match self { $(Action::$variant => $name,)* }
            }

            pub fn from_name(name: &str) -> Option<Action> {
                match name { $($name => Some(Action::$variant),)* _ => None }
            }
        }
    };
}

actions! {
    AdvanceClusterTime = "advanceClusterTime",
    AnyAction = "anyAction",
    AppendOplogNote = "appendOplogNote",
    ApplicationMessage = "applicationMessage",
    AuthSchemaUpgrade = "authSchemaUpgrade",
    BypassDocumentValidation = "bypassDocumentValidation",
    ChangeCustomData = "changeCustomData",
    ChangeOwnCustomData = "changeOwnCustomData",
    ChangeOwnPassword = "changeOwnPassword",
    ChangePassword = "changePassword",
    ChangeStream = "changeStream",
    CheckMetadataConsistency = "checkMetadataConsistency",
    CleanupOrphaned = "cleanupOrphaned",
    CloseAllDatabases = "closeAllDatabases",
    CollMod = "collMod",
    CollStats = "collStats",
    Compact = "compact",
    ConnPoolStats = "connPoolStats",
    ConnPoolSync = "connPoolSync",
    ConvertToCapped = "convertToCapped",
    CreateCollection = "createCollection",
    CreateIndex = "createIndex",
    CreateRole = "createRole",
    CreateSearchIndexes = "createSearchIndexes",
    CreateUser = "createUser",
    DbHash = "dbHash",
    DbStats = "dbStats",
    DropCollection = "dropCollection",
    DropDatabase = "dropDatabase",
    DropIndex = "dropIndex",
    DropRole = "dropRole",
    DropSearchIndex = "dropSearchIndex",
    DropUser = "dropUser",
    EnableProfiler = "enableProfiler",
    EnableSharding = "enableSharding",
    Find = "find",
    FlushRouterConfig = "flushRouterConfig",
    ForceUUID = "forceUUID",
    Fsync = "fsync",
    GetCmdLineOpts = "getCmdLineOpts",
    GetDefaultRWConcern = "getDefaultRWConcern",
    GetLog = "getLog",
    GetParameter = "getParameter",
    GetShardMap = "getShardMap",
    GrantRole = "grantRole",
    HostInfo = "hostInfo",
    IndexStats = "indexStats",
    Inprog = "inprog",
    Insert = "insert",
    InvalidateUserCache = "invalidateUserCache",
    KillAnyCursor = "killAnyCursor",
    KillAnySession = "killAnySession",
    KillCursors = "killCursors",
    Killop = "killop",
    ListCollections = "listCollections",
    ListDatabases = "listDatabases",
    ListIndexes = "listIndexes",
    ListSearchIndexes = "listSearchIndexes",
    ListSessions = "listSessions",
    ListShards = "listShards",
    LogRotate = "logRotate",
    Netstat = "netstat",
    PlanCacheIndexFilter = "planCacheIndexFilter",
    PlanCacheRead = "planCacheRead",
    PlanCacheWrite = "planCacheWrite",
    ReIndex = "reIndex",
    Remove = "remove",
    RenameCollectionSameDB = "renameCollectionSameDB",
    ReplSetConfigure = "replSetConfigure",
    ReplSetGetConfig = "replSetGetConfig",
    ReplSetGetStatus = "replSetGetStatus",
    ReplSetStateChange = "replSetStateChange",
    Resync = "resync",
    RevokeRole = "revokeRole",
    ServerStatus = "serverStatus",
    SetAuthenticationRestriction = "setAuthenticationRestriction",
    SetDefaultRWConcern = "setDefaultRWConcern",
    SetFeatureCompatibilityVersion = "setFeatureCompatibilityVersion",
    SetParameter = "setParameter",
    ShardingState = "shardingState",
    Shutdown = "shutdown",
    SplitVector = "splitVector",
    StorageDetails = "storageDetails",
    Top = "top",
    Touch = "touch",
    Unlock = "unlock",
    UpdateSearchIndex = "updateSearchIndex",
    Update = "update",
    UseUUID = "useUUID",
    Validate = "validate",
    ViewRole = "viewRole",
    ViewUser = "viewUser",
}

/// A set of actions (mongod has fewer than 128).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ActionSet(u128);

impl ActionSet {
    pub const fn of(actions: &[Action]) -> ActionSet {
        let mut bits = 0u128;
        let mut i = 0;
        while i < actions.len() {
            bits |= 1u128 << (actions[i] as u8);
            i += 1;
        }
        ActionSet(bits)
    }

    pub fn contains(self, a: Action) -> bool {
        self.0 & (1u128 << (a as u8)) != 0 || self.0 & (1u128 << (Action::AnyAction as u8)) != 0
    }

    pub fn contains_all(self, other: ActionSet) -> bool {
        self.0 & (1u128 << (Action::AnyAction as u8)) != 0 || self.0 & other.0 == other.0
    }

    pub fn union(self, other: ActionSet) -> ActionSet {
        ActionSet(self.0 | other.0)
    }

    pub fn minus(self, other: ActionSet) -> ActionSet {
        ActionSet(self.0 & !other.0)
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn names(self) -> Vec<Bson> {
        Action::ALL
            .iter()
            .filter(|a| self.0 & (1u128 << (**a as u8)) != 0)
            .map(|a| Bson::String(a.name().to_string()))
            .collect()
    }
}

/// A resource pattern of a privilege, as mongod's `resource` documents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resource {
    /// `{anyResource: true}`: everything, system collections included.
    AnyResource,
    /// `{cluster: true}`.
    Cluster,
    /// `{db, collection}`; an empty `db` is every database, an empty
    /// `collection` every collection but the `system.` ones (and the
    /// database itself).
    Ns { db: String, collection: String },
}

impl Resource {
    pub fn ns(db: &str, collection: &str) -> Resource {
        Resource::Ns {
            db: db.to_string(),
            collection: collection.to_string(),
        }
    }

    pub fn to_document(&self) -> Document {
        match self {
            Resource::AnyResource => doc! {"anyResource": true},
            Resource::Cluster => doc! {"cluster": true},
            Resource::Ns { db, collection } => doc! {"db": db, "collection": collection},
        }
    }

    /// Reads a privilege's `resource` document.
    pub fn from_document(d: &Document) -> MongoResult<Resource> {
        if d.get_bool("anyResource").unwrap_or(false) {
            return Ok(Resource::AnyResource);
        }
        if d.get_bool("cluster").unwrap_or(false) {
            return Ok(Resource::Cluster);
        }
        match (d.get_str("db"), d.get_str("collection")) {
            (Ok(db), Ok(c)) => Ok(Resource::ns(db, c)),
            _ => Err(MongoError::new(
                ErrorCode::FailedToParse,
                format!("resource {d} must name a db and a collection, the cluster or anyResource"),
            )),
        }
    }

    fn matches(&self, target: &Target<'_>) -> bool {
        match (self, target) {
            (Resource::AnyResource, _) => true,
            (Resource::Cluster, Target::Cluster) => true,
            (Resource::Ns { db, collection }, Target::Db(t)) => {
                collection.is_empty() && (db.is_empty() || db == t)
            }
            (Resource::Ns { db, collection }, Target::Ns(tdb, tcoll)) => {
                (db.is_empty() || db == tdb)
                    && if collection.is_empty() {
                        !tcoll.starts_with("system.")
                    } else {
                        collection == tcoll
                    }
            }
            _ => false,
        }
    }

    /// Whether a privilege on this resource concerns database `db` at all
    /// (`listDatabases` shows a user the databases it may use).
    fn touches_db(&self, target_db: &str) -> bool {
        match self {
            Resource::AnyResource => true,
            Resource::Cluster => false,
            Resource::Ns { db, .. } => db.is_empty() || db == target_db,
        }
    }
}

/// What a command touches: a collection, a database or the cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target<'a> {
    Ns(&'a str, &'a str),
    Db(&'a str),
    Cluster,
}

/// One privilege: actions on a resource.
#[derive(Clone, Debug, PartialEq)]
pub struct Privilege {
    pub resource: Resource,
    pub actions: ActionSet,
}

impl Privilege {
    fn new(resource: Resource, actions: &[Action]) -> Privilege {
        Privilege {
            resource,
            actions: ActionSet::of(actions),
        }
    }

    pub fn to_document(&self) -> Document {
        doc! {"resource": self.resource.to_document(), "actions": self.actions.names()}
    }

    /// Reads one entry of a role's `privileges`.
    pub fn from_document(d: &Document) -> MongoResult<Privilege> {
        let resource = Resource::from_document(d.get_document("resource").map_err(|_| {
            MongoError::new(
                ErrorCode::FailedToParse,
                "privilege must have a resource document",
            )
        })?)?;
        let mut actions = ActionSet::default();
        for a in d.get_array("actions").map_err(|_| {
            MongoError::new(
                ErrorCode::FailedToParse,
                "privilege must have an actions array",
            )
        })? {
            let name = a.as_str().unwrap_or_default();
            let action = Action::from_name(name).ok_or_else(|| {
                MongoError::new(
                    ErrorCode::FailedToParse,
                    format!("Unrecognized action privilege string: {name}"),
                )
            })?;
            actions = actions.union(ActionSet::of(&[action]));
        }
        Ok(Privilege { resource, actions })
    }
}

/// What a command needs, stated in its `registry::CommandSpec`.
#[derive(Clone, Copy)]
pub enum Needs {
    /// Runs before authentication (mongod's `requiresAuth() == false`).
    Nothing,
    /// Any authenticated user; the command shows only what that user may
    /// see (`listDatabases`) or concerns only the connection itself.
    Authenticated,
    /// These actions on the collection the command names (its first value).
    Collection(&'static [Action]),
    /// The first actions on the collection the command names, and each
    /// listed action whose boolean field the body sets to true (`insert`'s
    /// `bypassDocumentValidation`): checked without allocating, as the
    /// hottest commands need.
    CollectionAnd(&'static [Action], &'static [(&'static str, Action)]),
    /// These actions on the command's database.
    Database(&'static [Action]),
    /// These actions on the cluster.
    Cluster(&'static [Action]),
    /// What the command's body asks for decides (`aggregate`'s stages,
    /// `renameCollection`'s two namespaces, the user and role commands).
    Computed(fn(&crate::request::CommandRequest<'_>) -> MongoResult<Vec<Required>>),
    /// Those of the command `explain` explains.
    Explained,
}

/// One requirement: actions on a target (owned names).
#[derive(Clone, Debug, PartialEq)]
pub struct Required {
    pub target: OwnedTarget,
    pub actions: ActionSet,
}

#[derive(Clone, Debug, PartialEq)]
pub enum OwnedTarget {
    Ns(String, String),
    Db(String),
    Cluster,
    /// The user itself (a user may always see itself and change its own
    /// password): satisfied by being that user, or by the actions on its
    /// database.
    OwnUser(Name),
}

impl Required {
    pub fn ns(db: &str, coll: &str, actions: &[Action]) -> Required {
        Required {
            target: OwnedTarget::Ns(db.to_string(), coll.to_string()),
            actions: ActionSet::of(actions),
        }
    }

    pub fn db(db: &str, actions: &[Action]) -> Required {
        Required {
            target: OwnedTarget::Db(db.to_string()),
            actions: ActionSet::of(actions),
        }
    }

    pub fn cluster(actions: &[Action]) -> Required {
        Required {
            target: OwnedTarget::Cluster,
            actions: ActionSet::of(actions),
        }
    }
}

/// A user's privileges, resolved from its roles.
#[derive(Debug, Default)]
pub struct Resolved {
    pub roles: Vec<Name>,
    pub privileges: Vec<Privilege>,
    /// The `authenticationRestrictions` of the user and of each of its
    /// roles that has any: every list must be met (`restrictions.rs`).
    pub restrictions: Vec<Vec<super::restrictions::Restriction>>,
}

impl Resolved {
    /// Whether the actions are granted on `target` (together, possibly by
    /// several privileges).
    pub fn allows(&self, target: &Target<'_>, actions: ActionSet) -> bool {
        let mut granted = ActionSet::default();
        for p in &self.privileges {
            if p.resource.matches(target) {
                granted = granted.union(p.actions);
                if granted.contains_all(actions) {
                    return true;
                }
            }
        }
        granted.contains_all(actions)
    }

    /// Whether any privilege concerns database `db` (`listDatabases`).
    pub fn any_on_db(&self, db: &str) -> bool {
        self.privileges
            .iter()
            .any(|p| !p.actions.is_empty() && p.resource.touches_db(db))
    }

    /// Whether any privilege concerns the collection `db.coll`
    /// (`listCollections` with `authorizedCollections`).
    pub fn any_on_collection(&self, db: &str, coll: &str) -> bool {
        self.privileges
            .iter()
            .any(|p| !p.actions.is_empty() && p.resource.matches(&Target::Ns(db, coll)))
    }

    /// Privileges merged by resource, as `connectionStatus` and
    /// `usersInfo`'s `showPrivileges` list them.
    pub fn merged(&self) -> Vec<Privilege> {
        let mut out: Vec<Privilege> = Vec::new();
        for p in &self.privileges {
            match out.iter_mut().find(|o| o.resource == p.resource) {
                Some(o) => o.actions = o.actions.union(p.actions),
                None => out.push(p.clone()),
            }
        }
        out
    }
}

use Action::*;

const READ: &[Action] = &[
    ChangeStream,
    CollStats,
    DbHash,
    DbStats,
    Find,
    KillCursors,
    ListCollections,
    ListIndexes,
    ListSearchIndexes,
];

const READ_WRITE: &[Action] = &[
    ChangeStream,
    CollStats,
    ConvertToCapped,
    CreateCollection,
    CreateIndex,
    CreateSearchIndexes,
    DbHash,
    DbStats,
    DropCollection,
    DropIndex,
    DropSearchIndex,
    Find,
    Insert,
    KillCursors,
    ListCollections,
    ListIndexes,
    ListSearchIndexes,
    Remove,
    RenameCollectionSameDB,
    Update,
    UpdateSearchIndex,
];

const DB_ADMIN: &[Action] = &[
    BypassDocumentValidation,
    CollMod,
    CollStats,
    Compact,
    ConvertToCapped,
    CreateCollection,
    CreateIndex,
    DbStats,
    DropCollection,
    DropDatabase,
    DropIndex,
    EnableProfiler,
    ListCollections,
    ListIndexes,
    ListSearchIndexes,
    PlanCacheIndexFilter,
    PlanCacheRead,
    PlanCacheWrite,
    ReIndex,
    RenameCollectionSameDB,
    StorageDetails,
    Validate,
];

const DB_ADMIN_PROFILE: &[Action] = &[
    ChangeStream,
    CollStats,
    ConvertToCapped,
    CreateCollection,
    DbHash,
    DbStats,
    DropCollection,
    Find,
    KillCursors,
    ListCollections,
    ListIndexes,
    PlanCacheRead,
];

const USER_ADMIN: &[Action] = &[
    ChangeCustomData,
    ChangePassword,
    CreateRole,
    CreateUser,
    DropRole,
    DropUser,
    GrantRole,
    RevokeRole,
    SetAuthenticationRestriction,
    ViewRole,
    ViewUser,
];

const CLUSTER_MONITOR: &[Action] = &[
    ConnPoolStats,
    GetCmdLineOpts,
    GetDefaultRWConcern,
    GetLog,
    GetParameter,
    GetShardMap,
    HostInfo,
    Inprog,
    ListDatabases,
    ListSessions,
    ListShards,
    Netstat,
    ReplSetGetConfig,
    ReplSetGetStatus,
    ServerStatus,
    ShardingState,
    Top,
];

const CLUSTER_MONITOR_ANY_DB: &[Action] = &[CollStats, DbStats, IndexStats];

const HOST_MANAGER: &[Action] = &[
    ApplicationMessage,
    CloseAllDatabases,
    ConnPoolSync,
    FlushRouterConfig,
    Fsync,
    InvalidateUserCache,
    KillAnyCursor,
    KillAnySession,
    Killop,
    LogRotate,
    Resync,
    SetParameter,
    Shutdown,
    Touch,
    Unlock,
];

const CLUSTER_MANAGER: &[Action] = &[
    AppendOplogNote,
    ApplicationMessage,
    CheckMetadataConsistency,
    CleanupOrphaned,
    FlushRouterConfig,
    GetDefaultRWConcern,
    ListSessions,
    ListShards,
    ReplSetConfigure,
    ReplSetGetConfig,
    ReplSetGetStatus,
    ReplSetStateChange,
    Resync,
    SetDefaultRWConcern,
    SetFeatureCompatibilityVersion,
];

const BACKUP_CLUSTER: &[Action] = &[AppendOplogNote, GetParameter, ListDatabases, ServerStatus];

const RESTORE_ANY: &[Action] = &[
    BypassDocumentValidation,
    ChangeCustomData,
    ChangePassword,
    CollMod,
    ConvertToCapped,
    CreateCollection,
    CreateIndex,
    CreateRole,
    CreateUser,
    DropCollection,
    DropRole,
    DropUser,
    GrantRole,
    Insert,
    RevokeRole,
    ViewRole,
    ViewUser,
];

/// The user and role collections a user administrator of any database reads.
fn auth_collections(actions: &[Action]) -> Vec<Privilege> {
    ["system.users", "system.roles", "system.version"]
        .iter()
        .map(|c| Privilege::new(Resource::ns("admin", c), actions))
        .collect()
}

/// The privileges of a built-in role (`None`: not a built-in role).
pub fn builtin(role: &Name) -> Option<Vec<Privilege>> {
    if !super::roles::is_builtin(role) {
        return None;
    }
    let db = role.db.as_str();
    let on_db = |a: &[Action]| Privilege::new(Resource::ns(db, ""), a);
    let any_db = |a: &[Action]| Privilege::new(Resource::ns("", ""), a);
    let cluster = |a: &[Action]| Privilege::new(Resource::Cluster, a);
    let read_system = |db: &str| {
        vec![
            Privilege::new(Resource::ns(db, "system.js"), READ),
            Privilege::new(Resource::ns(db, "system.views"), READ),
        ]
    };
    let mut p = match role.name.as_str() {
        "read" => {
            let mut v = vec![on_db(READ)];
            v.extend(read_system(db));
            v
        }
        "readWrite" => {
            let mut v = vec![on_db(READ_WRITE)];
            v.push(Privilege::new(Resource::ns(db, "system.js"), READ_WRITE));
            v.push(Privilege::new(Resource::ns(db, "system.views"), READ));
            v
        }
        "dbAdmin" => vec![
            on_db(DB_ADMIN),
            Privilege::new(Resource::ns(db, "system.profile"), DB_ADMIN_PROFILE),
            Privilege::new(Resource::ns(db, "system.views"), READ),
        ],
        "userAdmin" => vec![on_db(USER_ADMIN)],
        "dbOwner" => {
            let mut v = Vec::new();
            for r in ["readWrite", "dbAdmin", "userAdmin"] {
                v.extend(builtin(&Name::new(r, db)).unwrap_or_default());
            }
            v
        }
        "readAnyDatabase" => vec![
            any_db(READ),
            cluster(&[ListDatabases]),
            Privilege::new(Resource::ns("", "system.js"), READ),
            Privilege::new(Resource::ns("", "system.views"), READ),
        ],
        "readWriteAnyDatabase" => vec![
            any_db(READ_WRITE),
            cluster(&[ListDatabases]),
            Privilege::new(Resource::ns("", "system.js"), READ_WRITE),
            Privilege::new(Resource::ns("", "system.views"), READ),
        ],
        "dbAdminAnyDatabase" => vec![
            any_db(DB_ADMIN),
            cluster(&[ListDatabases]),
            Privilege::new(Resource::ns("", "system.profile"), DB_ADMIN_PROFILE),
        ],
        "userAdminAnyDatabase" => {
            let mut v = vec![
                any_db(USER_ADMIN),
                cluster(&[AuthSchemaUpgrade, InvalidateUserCache, ListDatabases]),
            ];
            v.extend(auth_collections(&[Find, CollStats, DbHash, ListIndexes]));
            v
        }
        "clusterMonitor" => vec![cluster(CLUSTER_MONITOR), any_db(CLUSTER_MONITOR_ANY_DB)],
        "hostManager" => vec![cluster(HOST_MANAGER), any_db(&[KillCursors, KillAnyCursor])],
        "clusterManager" => vec![
            cluster(CLUSTER_MANAGER),
            // mongod 7.0+: the database- and collection-level forms of
            // checkMetadataConsistency anywhere.
            any_db(&[CheckMetadataConsistency]),
            Privilege::new(Resource::ns("config", ""), READ_WRITE),
            Privilege::new(Resource::ns("local", ""), READ_WRITE),
        ],
        "clusterAdmin" => {
            let mut v = Vec::new();
            for r in ["clusterManager", "clusterMonitor", "hostManager"] {
                v.extend(builtin(&Name::new(r, "admin")).unwrap_or_default());
            }
            v.push(any_db(&[DropDatabase]));
            v
        }
        // mongod's backup: find on every normal collection, collStats and
        // the listings everywhere; no dbStats nor dbHash.
        "backup" => vec![
            cluster(BACKUP_CLUSTER),
            any_db(&[ListCollections, ListIndexes, CollStats, Find]),
            Privilege::new(
                Resource::AnyResource,
                &[ListCollections, ListIndexes, CollStats, Find],
            ),
        ],
        "restore" => {
            // listCollections on anyResource: mongorestore lists what exists.
            let mut v = vec![
                any_db(RESTORE_ANY),
                cluster(&[GetParameter]),
                Privilege::new(Resource::AnyResource, &[ListCollections]),
            ];
            v.extend(auth_collections(&[
                Find,
                Insert,
                Update,
                Remove,
                CreateIndex,
                CreateCollection,
                DropCollection,
            ]));
            v.push(Privilege::new(Resource::ns("", "system.js"), READ_WRITE));
            v
        }
        "root" => {
            let mut v = Vec::new();
            for r in [
                "readWriteAnyDatabase",
                "dbAdminAnyDatabase",
                "userAdminAnyDatabase",
                "clusterAdmin",
                "restore",
                "backup",
            ] {
                v.extend(builtin(&Name::new(r, "admin")).unwrap_or_default());
            }
            v.push(Privilege::new(
                Resource::ns("", "system.profile"),
                &[Validate],
            ));
            v
        }
        "__system" => vec![Privilege::new(Resource::AnyResource, &[AnyAction])],
        // enableSharding, directShardOperations: sharding only.
        "enableSharding" => vec![any_db(&[EnableSharding])],
        _ => Vec::new(),
    };
    p.retain(|x| !x.actions.is_empty());
    Some(p)
}
