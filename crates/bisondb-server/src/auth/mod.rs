//! Authentication and authorization.
//!
//! Users live in `admin.system.users` ([`users`]), authenticate with
//! SCRAM-SHA-256 or SCRAM-SHA-1 ([`scram`]) through `saslStart` /
//! `saslContinue` or `hello`'s `speculativeAuthenticate`, and the
//! connection remembers who it is ([`ConnAuth`]). With `--auth`
//! ([`AuthState::enabled`]) the connection asks [`check`] before every
//! command; without it nothing here runs on the command path.
//!
//! Other ways of authenticating (MONGODB-X509 over TLS) end in
//! [`authenticate_as`], which marks a connection authenticated as a user
//! of the store.

pub mod needs;
pub mod privileges;
mod raw;
pub mod restrictions;
pub mod roles;
pub mod scram;
pub mod users;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use bisondb_error::{ErrorCode, MongoError, MongoResult};

use crate::context::{ConnectionInfo, Context};
pub use privileges::{Action, Needs, OwnedTarget, Required, Target};
pub use users::Name;

/// mongod's log id of "Authentication failed".
pub const LOG_AUTH_FAILED: u64 = 20249;
/// mongod's log id of "Successfully authenticated".
pub const LOG_AUTH_SUCCEEDED: u64 = 5286306;

/// mongod's default `scramIterationCount` (SCRAM-SHA-1).
pub const DEFAULT_SHA1_ITERATIONS: i32 = 10_000;
/// mongod's default `scramSHA256IterationCount`.
pub const DEFAULT_SHA256_ITERATIONS: i32 = 15_000;
/// The least iteration count mongod accepts for either.
pub const MIN_ITERATIONS: i32 = 5_000;

/// Reads a `scramIterationCount` / `scramSHA256IterationCount` value as
/// mongod bounds it (at least 5000).
pub fn parse_iteration_count(name: &str, value: &str) -> MongoResult<i32> {
    let n: i32 = value.trim().parse().map_err(|_| {
        MongoError::bad_value(format!(
            "Invalid value for parameter {name}: '{value}' is not a valid integer"
        ))
    })?;
    if n < MIN_ITERATIONS {
        return Err(MongoError::bad_value(format!(
            "Invalid value for parameter {name}: {n} is not greater than or equal to {MIN_ITERATIONS}"
        )));
    }
    Ok(n)
}

/// Server-wide authorization state.
pub struct AuthState {
    /// `--auth` / `security.authorization: enabled`.
    pub enabled: bool,
    /// Bumped by every change of a user or role: a connection's resolved
    /// privileges older than this are resolved again at its next command.
    generation: AtomicU64,
    sha1_iterations: AtomicI32,
    sha256_iterations: AtomicI32,
    /// Each user's privileges, resolved once per generation and shared by
    /// its connections.
    cache: Mutex<HashMap<Name, (u64, Arc<privileges::Resolved>)>>,
}

impl AuthState {
    pub fn new(config: &crate::config::ServerConfig) -> AuthState {
        AuthState {
            // As in mongod, a key file turns access control on.
            enabled: config.auth || config.key_file.is_some(),
            generation: AtomicU64::new(1),
            sha1_iterations: AtomicI32::new(config.scram_iteration_count),
            sha256_iterations: AtomicI32::new(config.scram_sha256_iteration_count),
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// A user or role changed: every resolved privilege set is stale.
    pub fn changed(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.cache.lock().clear();
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The iteration count new credentials of `mech` get.
    pub fn iterations(&self, mech: scram::Mechanism) -> i32 {
        match mech {
            scram::Mechanism::Sha1 => self.sha1_iterations.load(Ordering::Relaxed),
            scram::Mechanism::Sha256 => self.sha256_iterations.load(Ordering::Relaxed),
        }
    }

    /// `setParameter` of `scramIterationCount` / `scramSHA256IterationCount`.
    pub fn set_iterations(&self, mech: scram::Mechanism, n: i32) {
        match mech {
            scram::Mechanism::Sha1 => self.sha1_iterations.store(n, Ordering::Relaxed),
            scram::Mechanism::Sha256 => self.sha256_iterations.store(n, Ordering::Relaxed),
        }
    }
}

/// What a connection knows about its authentication.
#[derive(Debug, Default, Clone)]
pub struct ConnAuth {
    /// The user this connection is authenticated as (mongod 8 allows one),
    /// shared with the cursors it opens and its `currentOp` entry.
    pub user: Option<Arc<Name>>,
    /// A SCRAM conversation between `saslStart` and its last `saslContinue`.
    conversation: Option<scram::Conversation>,
    /// The user's privileges and the authorization generation they were
    /// resolved at ([`AuthState::generation`]).
    resolved: Option<(u64, Arc<privileges::Resolved>)>,
}

/// Marks `conn` authenticated as `user` (after SCRAM, or for MONGODB-X509
/// once the client certificate's subject named a `$external` user).
pub fn authenticate_as(conn: &mut ConnectionInfo, user: Name) {
    conn.auth.conversation = None;
    conn.auth.resolved = None;
    let user = Arc::new(user);
    if let Some(c) = &conn.client {
        c.set_user(Some(user.clone()));
    }
    conn.auth.user = Some(user);
}

thread_local! {
    /// The user of the command running on this thread (set by [`check`]
    /// under `--auth`): the owner of the cursors it opens.
    static RUNNING_AS: std::cell::RefCell<Option<Arc<Name>>> = const { std::cell::RefCell::new(None) };
}

/// The user the command running on this thread is authenticated as (`None`
/// without `--auth` or before authentication): a cursor belongs to it.
pub fn running_as() -> Option<Arc<Name>> {
    RUNNING_AS.with(|r| r.borrow().clone())
}

/// Notes `user` as the running command's ([`running_as`]); the common case,
/// the same connection's user as the last command on this thread, touches
/// no reference count.
fn run_as(user: &Option<Arc<Name>>) {
    RUNNING_AS.with(|r| {
        let mut r = r.borrow_mut();
        let same = match (&*r, user) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if !same {
            r.clone_from(user);
        }
    });
}

/// Whether the connection may use what user `owner` made (a cursor, an
/// operation): mongod's "coauthorized" test. Without `--auth` everything
/// is everyone's; otherwise the same user, or both unauthenticated.
pub fn is_coauthorized_with(ctx: &Context<'_>, owner: Option<&Name>) -> bool {
    !ctx.state.auth.enabled || ctx.conn.auth.user.as_deref() == owner
}

/// Whose operations a connection sees as its own (`$currentOp` without
/// `allUsers`, `currentOp` with `$ownOps`, `killOp` without `killop`): its
/// user's under `--auth`, everyone's without.
pub fn own_ops(ctx: &Context<'_>) -> crate::op_ctx::Whose {
    if ctx.state.auth.enabled {
        crate::op_ctx::Whose::Of(ctx.conn.auth.user.clone())
    } else {
        crate::op_ctx::Whose::All
    }
}

/// Whether the connection's user holds `action` on the cluster (always,
/// without `--auth`).
pub fn has_cluster_action(ctx: &mut Context<'_>, action: Action) -> MongoResult<bool> {
    if !ctx.state.auth.enabled {
        return Ok(true);
    }
    if ctx.conn.auth.user.is_none() {
        return Ok(false);
    }
    with_resolved(ctx, |r| {
        r.allows(&Target::Cluster, privileges::ActionSet::of(&[action]))
    })
}

/// Whether the connection's user holds `action` on the collection `db.coll`
/// (always, without `--auth`).
pub fn has_ns_action(
    ctx: &mut Context<'_>,
    db: &str,
    coll: &str,
    action: Action,
) -> MongoResult<bool> {
    if !ctx.state.auth.enabled {
        return Ok(true);
    }
    if ctx.conn.auth.user.is_none() {
        return Ok(false);
    }
    with_resolved(ctx, |r| {
        r.allows(&Target::Ns(db, coll), privileges::ActionSet::of(&[action]))
    })
}

/// Whether the connection comes from this host: loopback TCP or the Unix
/// socket (the localhost exception).
pub fn is_local(peer: &str) -> bool {
    if peer.starts_with("unix:") {
        return true;
    }
    peer.parse::<std::net::SocketAddr>()
        .is_ok_and(|a| a.ip().is_loopback())
}

/// Commands the localhost exception allows while no user exists: the first
/// user or role, and `replSetInitiate` (mongod's tutorials initiate a set
/// with access control this way, since no user can be created before a
/// member is primary).
const LOCALHOST_EXCEPTION: &[&str] = &["createUser", "createRole", "replSetInitiate"];

/// Whether the connection may run the command `name` (as sent), which
/// `needs` what its spec states, on a server with `--auth`: 13 Unauthorized
/// with mongod's messages otherwise.
pub fn check(
    name: &str,
    needs: &Needs,
    req: &crate::request::CommandRequest<'_>,
    ctx: &mut Context<'_>,
) -> MongoResult<()> {
    if matches!(needs, Needs::Nothing) {
        return Ok(());
    }
    if ctx.conn.auth.user.is_none() {
        if LOCALHOST_EXCEPTION.contains(&name)
            && is_local(&ctx.conn.peer)
            && !users::any_user(&ctx.state.storage)
        {
            return Ok(());
        }
        return Err(MongoError::new(
            ErrorCode::Unauthorized,
            format!("Command {name} requires authentication"),
        ));
    }
    run_as(&ctx.conn.auth.user);
    // The common cases name one target the request holds: checked against
    // the connection's resolved privileges in place, with no allocation
    // (this runs before every command under `--auth`).
    let (target, actions) = match needs {
        Needs::Nothing | Needs::Authenticated | Needs::Explained => return Ok(()),
        Needs::Collection(a) => match raw::first_string(req.body) {
            Some(coll) => (Target::Ns(&req.db, coll), privileges::ActionSet::of(a)),
            None => (Target::Db(&req.db), privileges::ActionSet::of(a)),
        },
        Needs::CollectionAnd(a, flags) => {
            let target = match raw::first_string(req.body) {
                Some(coll) => Target::Ns(&req.db, coll),
                None => Target::Db(&req.db),
            };
            let base = privileges::ActionSet::of(a);
            let every = flags.iter().fold(base, |s, (_, action)| {
                s.union(privileges::ActionSet::of(&[*action]))
            });
            // A user who holds the flags' actions too need not look for the
            // flags in the body (the common case of a privileged user).
            if with_resolved(ctx, |r| r.allows(&target, every))? {
                return Ok(());
            }
            let mut actions = base;
            for (field, action) in flags.iter() {
                if raw::flag_is_true(req.body, field) {
                    actions = actions.union(privileges::ActionSet::of(&[*action]));
                }
            }
            (target, actions)
        }
        Needs::Database(a) => (Target::Db(&req.db), privileges::ActionSet::of(a)),
        Needs::Cluster(a) => (Target::Cluster, privileges::ActionSet::of(a)),
        Needs::Computed(f) => return check_computed(&f(req)?, req, ctx),
    };
    if with_resolved(ctx, |r| r.allows(&target, actions))? {
        Ok(())
    } else {
        Err(not_authorized(req))
    }
}

/// Whether the connection's user holds every requirement a command's body
/// computed (`Needs::Computed`).
fn check_computed(
    required: &[Required],
    req: &crate::request::CommandRequest<'_>,
    ctx: &mut Context<'_>,
) -> MongoResult<()> {
    let resolved = resolved(ctx)?;
    let me = ctx.conn.auth.user.as_deref();
    for r in required {
        let ok = match &r.target {
            OwnedTarget::Ns(db, coll) => resolved.allows(&Target::Ns(db, coll), r.actions),
            OwnedTarget::Db(db) => resolved.allows(&Target::Db(db), r.actions),
            OwnedTarget::Cluster => resolved.allows(&Target::Cluster, r.actions),
            OwnedTarget::OwnUser(u) => {
                me == Some(u) || resolved.allows(&Target::Db(&u.db), r.actions)
            }
        };
        if !ok {
            return Err(not_authorized(req));
        }
    }
    Ok(())
}

/// mongod's 13 for an authenticated user without the privileges.
pub fn not_authorized(req: &crate::request::CommandRequest<'_>) -> MongoError {
    let shown = bson::Document::try_from(req.body)
        .map(|d| d.to_string())
        .unwrap_or_else(|_| format!("{{ {}: ... }}", req.name));
    MongoError::new(
        ErrorCode::Unauthorized,
        format!("not authorized on {} to execute command {shown}", req.db),
    )
}

/// Runs `f` over the connection's user's privileges, borrowed in place
/// when they are current (the per-command path: no reference count
/// touched), resolved again first when a user or role changed.
fn with_resolved<T>(
    ctx: &mut Context<'_>,
    f: impl FnOnce(&privileges::Resolved) -> T,
) -> MongoResult<T> {
    if let Some((g, r)) = &ctx.conn.auth.resolved {
        if *g == ctx.state.auth.generation() {
            return Ok(f(r));
        }
    }
    let r = resolved(ctx)?;
    Ok(f(&r))
}

/// The connection's user's privileges, current with the last change of
/// any user or role (`None` when nobody is authenticated).
pub fn resolved(ctx: &mut Context<'_>) -> MongoResult<Arc<privileges::Resolved>> {
    let Some(user) = ctx.conn.auth.user.as_deref().cloned() else {
        return Ok(Arc::new(privileges::Resolved::default()));
    };
    let generation = ctx.state.auth.generation();
    if let Some((g, r)) = &ctx.conn.auth.resolved {
        if *g == generation {
            return Ok(r.clone());
        }
    }
    let cached = ctx.state.auth.cache.lock().get(&user).cloned();
    let r = match cached {
        Some((g, r)) if g == generation => r,
        _ => {
            let r = Arc::new(resolve_user(ctx.state, &user)?);
            ctx.state
                .auth
                .cache
                .lock()
                .insert(user.clone(), (generation, r.clone()));
            r
        }
    };
    // A user or role changed: restrictions added since the login apply
    // from the next command, as mongod drops a user whose updated
    // restrictions the connection no longer meets.
    if !restrictions_met(ctx.conn, &r) {
        tracing::info!(target: "ACCESS", conn = ctx.conn.id, user = %user.name, db = %user.db,
            "Removed user with unmet authentication restrictions from the connection");
        logout(ctx.conn);
        return Ok(Arc::new(privileges::Resolved::default()));
    }
    ctx.conn.auth.resolved = Some((generation, r.clone()));
    Ok(r)
}

/// Reads a user's roles and their privileges from the store. A user that
/// no longer exists has none (its connections keep their identity and
/// lose every privilege, as on mongod).
fn resolve_user(
    state: &crate::state::ServerState,
    user: &Name,
) -> MongoResult<privileges::Resolved> {
    let (direct, own) = match users::get(&state.storage, users::USERS, user)? {
        Some(d) => (users::roles_of(&d), restrictions::of_document(&d)),
        None => (Vec::new(), Vec::new()),
    };
    let mut r = resolve_roles(state, &direct)?;
    if !own.is_empty() {
        r.restrictions.insert(0, own);
    }
    Ok(r)
}

/// Whether the connection meets every authentication restriction in `r`
/// (the user's own and its roles').
fn restrictions_met(conn: &ConnectionInfo, r: &privileges::Resolved) -> bool {
    if r.restrictions.is_empty() {
        return true;
    }
    let client = restrictions::peer_ip(&conn.peer);
    let server = conn.client.as_ref().and_then(|c| c.local_ip());
    r.restrictions
        .iter()
        .all(|list| restrictions::met(list, client, server))
}

/// At the end of a successful authentication as `user`: whether the
/// connection meets the user's and its roles' authentication restrictions
/// (mongod then fails the login with 18, logging why).
pub fn may_authenticate_as(ctx: &Context<'_>, user: &Name) -> MongoResult<bool> {
    let r = resolve_user(ctx.state, user)?;
    let ok = restrictions_met(ctx.conn, &r);
    if !ok {
        tracing::info!(target: "ACCESS", id = 20240u64, conn = ctx.conn.id,
            user = %user.name, db = %user.db, remote = %ctx.conn.peer,
            "Failed to acquire user because of unmet authentication restrictions");
    }
    Ok(ok)
}

/// The roles `direct` grants (inherited ones included) and their privileges.
pub fn resolve_roles(
    state: &crate::state::ServerState,
    direct: &[Name],
) -> MongoResult<privileges::Resolved> {
    let roles = role_closure(state, direct)?;
    let mut privileges = Vec::new();
    let mut restrictions = Vec::new();
    for r in &roles {
        match privileges::builtin(r) {
            Some(p) => privileges.extend(p),
            None => {
                if let Some(d) = users::get(&state.storage, users::ROLES, r)? {
                    if let Ok(list) = d.get_array("privileges") {
                        for p in list.iter().filter_map(bson::Bson::as_document) {
                            privileges.push(privileges::Privilege::from_document(p)?);
                        }
                    }
                    let own = restrictions::of_document(&d);
                    if !own.is_empty() {
                        restrictions.push(own);
                    }
                }
            }
        }
    }
    Ok(privileges::Resolved {
        roles,
        privileges,
        restrictions,
    })
}

/// What `saslStart` (or a speculative one in `hello`) answers.
pub struct SaslReply {
    pub payload: Vec<u8>,
    pub done: bool,
}

fn log_failure(
    ctx: &Context<'_>,
    mech: &str,
    user: &str,
    db: &str,
    speculative: bool,
    e: &MongoError,
) {
    tracing::info!(target: "ACCESS", id = LOG_AUTH_FAILED, conn = ctx.conn.id,
        mechanism = mech, speculative, principalName = user, authenticationDatabase = db,
        remote = %ctx.conn.peer, error = %format!("{}: {}", e.code.name(), e.message),
        "Authentication failed");
}

fn log_success(ctx: &Context<'_>, mech: &str, user: &Name, speculative: bool) {
    tracing::info!(target: "ACCESS", id = LOG_AUTH_SUCCEEDED, conn = ctx.conn.id,
        mechanism = mech, speculative, principalName = %user.name,
        authenticationDatabase = %user.db, remote = %ctx.conn.peer,
        "Successfully authenticated");
}

/// The first step of SCRAM: the client-first message of `mechanism` for a
/// user of `db`.
pub fn sasl_start(
    ctx: &mut Context<'_>,
    db: &str,
    mechanism: &str,
    payload: &[u8],
    skip_empty_exchange: bool,
    speculative: bool,
) -> MongoResult<SaslReply> {
    let Some(mech) = scram::Mechanism::from_name(mechanism) else {
        return Err(MongoError::new(
            ErrorCode::MechanismUnavailable,
            format!(
                "Received authentication for mechanism {mechanism} which is unknown or not enabled"
            ),
        ));
    };
    ctx.conn.auth.conversation = None;
    let user = scram::client_first_user(payload)?;
    let name = Name::new(user, db);
    let stored = users::get(&ctx.state.storage, users::USERS, &name)?;
    let credential = match stored.as_ref() {
        None => {
            let e = scram::auth_failed();
            log_failure(ctx, mech.name(), &name.name, db, speculative, &MongoError::new(
                ErrorCode::UserNotFound,
                format!("Could not find user \"{}\" for db \"{}\"", name.name, db),
            ));
            return Err(e);
        }
        Some(u) => users::credential(u, mech).ok_or_else(|| {
            MongoError::new(
                ErrorCode::MechanismUnavailable,
                format!(
                    "Unable to use {} based authentication for user without any {} credentials registered",
                    mech.name(),
                    mech.name()
                ),
            )
        })?,
    };
    let (conversation, reply) =
        scram::Conversation::start(mech, db, payload, credential, skip_empty_exchange)?;
    ctx.conn.auth.conversation = Some(conversation);
    Ok(SaslReply {
        payload: reply,
        done: false,
    })
}

/// A later step of the conversation `saslStart` began.
pub fn sasl_continue(
    ctx: &mut Context<'_>,
    conversation_id: i32,
    payload: &[u8],
) -> MongoResult<SaslReply> {
    let Some(mut conversation) = ctx.conn.auth.conversation.take() else {
        return Err(MongoError::new(
            ErrorCode::ProtocolError,
            "No SASL session state found",
        ));
    };
    if conversation_id != 1 {
        return Err(MongoError::new(
            ErrorCode::ProtocolError,
            "sasl: Mismatched conversation id",
        ));
    }
    match conversation.step(payload) {
        Ok(step) => {
            if step.done {
                let user = Name::new(conversation.user.clone(), conversation.db.clone());
                if !may_authenticate_as(ctx, &user)? {
                    return Err(scram::auth_failed());
                }
                log_success(ctx, conversation.mechanism.name(), &user, false);
                authenticate_as(ctx.conn, user);
            } else {
                ctx.conn.auth.conversation = Some(conversation);
            }
            Ok(SaslReply {
                payload: step.payload,
                done: step.done,
            })
        }
        Err(e) => {
            log_failure(
                ctx,
                conversation.mechanism.name(),
                &conversation.user,
                &conversation.db,
                false,
                &e,
            );
            Err(e)
        }
    }
}

/// Every role `direct` grants, the roles they inherit included (built-in
/// roles inherit none), each once.
pub fn role_closure(state: &crate::state::ServerState, direct: &[Name]) -> MongoResult<Vec<Name>> {
    let mut seen: Vec<Name> = Vec::new();
    let mut todo: Vec<Name> = direct.to_vec();
    while let Some(r) = todo.pop() {
        if seen.contains(&r) {
            continue;
        }
        if !roles::is_builtin(&r) {
            if let Some(d) = users::get(&state.storage, users::ROLES, &r)? {
                todo.extend(users::roles_of(&d));
            }
        }
        seen.push(r);
    }
    seen.sort();
    Ok(seen)
}

/// `usersInfo`'s and `rolesInfo`'s `showPrivileges` fields: the roles and
/// privileges inherited through `direct`.
pub fn add_inherited(
    state: &crate::state::ServerState,
    direct: &[Name],
    out: &mut bson::Document,
) -> MongoResult<()> {
    let resolved = resolve_roles(state, direct)?;
    out.insert("inheritedRoles", roles::to_bson(&resolved.roles));
    out.insert("inheritedPrivileges", privileges_bson(&resolved));
    // One list per role that has any, as mongod shows them.
    let mut inherited = Vec::new();
    for r in resolved.roles.iter().filter(|r| !roles::is_builtin(r)) {
        if let Some(d) = users::get(&state.storage, users::ROLES, r)? {
            match d.get("authenticationRestrictions") {
                Some(bson::Bson::Array(a)) if !a.is_empty() => {
                    inherited.push(bson::Bson::Array(a.clone()));
                }
                _ => {}
            }
        }
    }
    out.insert(
        "inheritedAuthenticationRestrictions",
        bson::Bson::Array(inherited),
    );
    Ok(())
}

/// Privileges as mongod lists them: `[{resource, actions}]`, merged by
/// resource.
pub fn privileges_bson(r: &privileges::Resolved) -> bson::Bson {
    bson::Bson::Array(
        r.merged()
            .iter()
            .map(|p| bson::Bson::Document(p.to_document()))
            .collect(),
    )
}

/// Whether the connection may see database `db` in `listDatabases`
/// (`authorizedDatabases`): any privilege on it.
pub fn may_see_db(ctx: &mut Context<'_>, db: &str) -> MongoResult<bool> {
    Ok(resolved(ctx)?.any_on_db(db))
}

/// Whether `listDatabases` shows every database: auth is off, or the user
/// has `listDatabases` on the cluster.
pub fn may_list_all_dbs(ctx: &mut Context<'_>) -> MongoResult<bool> {
    if !ctx.state.auth.enabled {
        return Ok(true);
    }
    Ok(resolved(ctx)?.allows(
        &Target::Cluster,
        privileges::ActionSet::of(&[Action::ListDatabases]),
    ))
}

/// Whether the connection may see collection `db.coll` in
/// `listCollections` with `authorizedCollections`.
pub fn may_see_collection(ctx: &mut Context<'_>, db: &str, coll: &str) -> MongoResult<bool> {
    if !ctx.state.auth.enabled {
        return Ok(true);
    }
    Ok(resolved(ctx)?.any_on_collection(db, coll))
}

/// `connectionStatus`'s `authInfo`.
pub fn connection_status(ctx: &Context<'_>, show_privileges: bool) -> MongoResult<bson::Document> {
    let mut users_list = Vec::new();
    let mut roles_list = Vec::new();
    if let Some(user) = &ctx.conn.auth.user {
        users_list.push(bson::Bson::Document(user.user_doc()));
        let direct = match users::get(&ctx.state.storage, users::USERS, user)? {
            Some(d) => users::roles_of(&d),
            None => Vec::new(),
        };
        roles_list = role_closure(ctx.state, &direct)?;
    }
    let privileges = if show_privileges && ctx.conn.auth.user.is_some() {
        let direct = match ctx.conn.auth.user.as_deref() {
            Some(u) => users::get(&ctx.state.storage, users::USERS, u)?
                .map(|d| users::roles_of(&d))
                .unwrap_or_default(),
            None => Vec::new(),
        };
        privileges_bson(&resolve_roles(ctx.state, &direct)?)
    } else {
        bson::Bson::Array(Vec::new())
    };
    let mut auth = bson::doc! {
        "authenticatedUsers": users_list,
        "authenticatedUserRoles": roles::to_bson(&roles_list),
    };
    if show_privileges {
        auth.insert("authenticatedUserPrivileges", privileges);
    }
    Ok(auth)
}

/// `logout`: the connection is no longer authenticated.
pub fn logout(conn: &mut ConnectionInfo) {
    conn.auth = ConnAuth::default();
    if let Some(c) = &conn.client {
        c.set_user(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_peers() {
        assert!(is_local("127.0.0.1:5000"));
        assert!(is_local("[::1]:5000"));
        assert!(is_local("unix:/tmp/x.sock"));
        assert!(!is_local("10.0.0.1:5000"));
        assert!(!is_local("garbage"));
    }
}
