//! Authorization with `--auth`: every registered command refused to an
//! unauthenticated connection unless mongod runs it before authentication;
//! a matrix of the main commands against each built-in role, expected as
//! mongod's manual documents ("Built-In Roles"); a `read` user on one
//! database that cannot see, read or write another through any command,
//! stage or view; privileges that follow user changes at the next command.

use bisondb_server::auth::Needs;
use bisondb_server::registry::{Run, COMMANDS};
use bson::{doc, Document};
use mongodb::Client;

use crate::common::{self, error_code, raw_command};

async fn as_user(port: u16, user: &str, pwd: &str, db: &str) -> Client {
    Client::with_uri_str(format!(
        "mongodb://{user}:{pwd}@127.0.0.1:{port}/?authSource={db}&serverSelectionTimeoutMS=5000"
    ))
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// A server with `--auth`, a root user, and `app.c` / `other.c` holding a
/// document each.
async fn server() -> (common::TestServer, Client) {
    let s = common::start_with(|c| c.auth = true).await;
    s.tcp
        .database("admin")
        .run_command(doc! {"createUser": "root", "pwd": "pw", "roles": ["root"]})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let root = as_user(s.server.port(), "root", "pw", "admin").await;
    for db in ["app", "other"] {
        root.database(db)
            .collection::<Document>("c")
            .insert_one(doc! {"_id": 1, "x": db})
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    (s, root)
}

/// Whether running `cmd` on `db` was refused for want of privileges.
async fn refused(c: &Client, db: &str, cmd: Document) -> bool {
    match c.database(db).run_command(cmd.clone()).await {
        Ok(_) => false,
        Err(e) => error_code(&e) == Some(13),
    }
}

#[tokio::test]
async fn every_command_but_the_handshake_needs_authentication() {
    let (s, _root) = server().await;
    let mut conn = s.raw_tcp().await;
    let mut checked = 0;
    for spec in COMMANDS {
        // `shutdown` must not run even if a bug let it through; it is
        // checked below through a refusal only.
        let body = doc! {spec.name: 1, "$db": "admin"};
        let r = raw_command(&mut conn, body).await;
        let code = r.get_i32("code").ok();
        let runs_unauthenticated = matches!(spec.privileges, Needs::Nothing);
        if runs_unauthenticated {
            assert_ne!(
                code,
                Some(13),
                "{} runs before authentication: {r}",
                spec.name
            );
        } else if matches!(spec.run, Run::Handler(_)) {
            assert_eq!(code, Some(13), "{} needs authentication: {r}", spec.name);
            let msg = r.get_str("errmsg").unwrap_or_default();
            assert_eq!(
                msg,
                format!("Command {} requires authentication", spec.name)
            );
        }
        checked += 1;
    }
    assert!(checked > 50);
    // mongod's list of commands that run before authentication.
    let mut before: Vec<&str> = COMMANDS
        .iter()
        .filter(|c| matches!(c.privileges, Needs::Nothing) && c.alias_of.is_none())
        .map(|c| c.name)
        .collect();
    before.sort_unstable();
    assert_eq!(
        before,
        [
            "authenticate",
            "buildInfo",
            "connectionStatus",
            "endSessions",
            "hello",
            "listCommands",
            "logout",
            "ping",
            "saslContinue",
            "saslStart",
        ]
    );
}

/// The main commands, each with the built-in roles (of `app`, or of
/// `admin` for the any-database and cluster roles) that may run it, as
/// mongod's "Built-In Roles" page lists their privileges.
fn documented() -> Vec<(&'static str, Document, &'static [&'static str])> {
    const READERS: &[&str] = &[
        "read",
        "readWrite",
        "dbOwner",
        "readAnyDatabase",
        "readWriteAnyDatabase",
        "backup",
        "root",
    ];
    const WRITERS: &[&str] = &[
        "readWrite",
        "dbOwner",
        "readWriteAnyDatabase",
        "restore",
        "root",
    ];
    // Who may see a database's statistics, and list what it holds.
    const STATS: &[&str] = &[
        "read",
        "readWrite",
        "dbAdmin",
        "dbOwner",
        "clusterMonitor",
        "clusterAdmin",
        "readAnyDatabase",
        "readWriteAnyDatabase",
        "dbAdminAnyDatabase",
        "backup",
        "root",
    ];
    const LISTERS: &[&str] = &[
        "read",
        "readWrite",
        "dbAdmin",
        "dbOwner",
        "readAnyDatabase",
        "readWriteAnyDatabase",
        "dbAdminAnyDatabase",
        "backup",
        "root",
    ];
    // Who may add and drop collections and indexes.
    const SHAPERS: &[&str] = &[
        "readWrite",
        "dbAdmin",
        "dbOwner",
        "readWriteAnyDatabase",
        "dbAdminAnyDatabase",
        "restore",
        "root",
    ];
    vec![
        ("app", doc! {"find": "c"}, READERS),
        ("app", doc! {"count": "c"}, READERS),
        ("app", doc! {"distinct": "c", "key": "x"}, READERS),
        (
            "app",
            doc! {"aggregate": "c", "pipeline": [], "cursor": {}},
            READERS,
        ),
        ("app", doc! {"listIndexes": "c"}, LISTERS),
        ("app", doc! {"listCollections": 1}, LISTERS),
        ("app", doc! {"dbStats": 1}, STATS),
        ("app", doc! {"collStats": "c"}, STATS),
        (
            "app",
            doc! {"insert": "c", "documents": [{"y": 1}]},
            WRITERS,
        ),
        (
            "app",
            doc! {"update": "c", "updates": [{"q": {}, "u": {"$set": {"z": 1}}}]},
            &["readWrite", "dbOwner", "readWriteAnyDatabase", "root"],
        ),
        (
            "app",
            doc! {"delete": "c", "deletes": [{"q": {"y": 1}, "limit": 1}]},
            &["readWrite", "dbOwner", "readWriteAnyDatabase", "root"],
        ),
        (
            "app",
            doc! {"createIndexes": "c", "indexes": [{"key": {"x": 1}, "name": "x_1"}]},
            SHAPERS,
        ),
        (
            "app",
            doc! {"collMod": "c"},
            &[
                "dbAdmin",
                "dbOwner",
                "dbAdminAnyDatabase",
                "restore",
                "root",
            ],
        ),
        (
            "app",
            doc! {"validate": "c"},
            &["dbAdmin", "dbOwner", "dbAdminAnyDatabase", "root"],
        ),
        (
            "app",
            doc! {"profile": -1},
            &["dbAdmin", "dbOwner", "dbAdminAnyDatabase", "root"],
        ),
        (
            "app",
            doc! {"createUser": "u1", "pwd": "p", "roles": []},
            &[
                "dbOwner",
                "userAdmin",
                "userAdminAnyDatabase",
                "restore",
                "root",
            ],
        ),
        (
            "app",
            doc! {"usersInfo": 1},
            &[
                "dbOwner",
                "userAdmin",
                "userAdminAnyDatabase",
                "restore",
                "root",
            ],
        ),
        (
            "admin",
            doc! {"serverStatus": 1},
            &["clusterMonitor", "clusterAdmin", "backup", "root"],
        ),
        (
            "admin",
            doc! {"hostInfo": 1},
            &["clusterMonitor", "clusterAdmin", "root"],
        ),
        (
            "admin",
            doc! {"getCmdLineOpts": 1},
            &["clusterMonitor", "clusterAdmin", "root"],
        ),
        (
            "admin",
            doc! {"getLog": "global"},
            &["clusterMonitor", "clusterAdmin", "root"],
        ),
        (
            "admin",
            doc! {"getParameter": 1, "logLevel": 1},
            &[
                "clusterMonitor",
                "clusterAdmin",
                "backup",
                "restore",
                "root",
            ],
        ),
        (
            "admin",
            doc! {"setParameter": 1, "logLevel": 0},
            &["hostManager", "clusterAdmin", "root"],
        ),
        (
            "admin",
            doc! {"logRotate": 1},
            &["hostManager", "clusterAdmin", "root"],
        ),
        (
            "app",
            doc! {"renameCollection": "app.c", "to": "app.c2"},
            &[
                "readWrite",
                "dbAdmin",
                "dbOwner",
                "readWriteAnyDatabase",
                "dbAdminAnyDatabase",
                "root",
            ],
        ),
        ("app", doc! {"drop": "c2"}, SHAPERS),
        (
            "app",
            doc! {"dropDatabase": 1},
            &[
                "dbAdmin",
                "dbOwner",
                "clusterAdmin",
                "dbAdminAnyDatabase",
                "root",
            ],
        ),
    ]
}

#[tokio::test]
async fn built_in_roles_allow_what_mongod_documents() {
    let roles = [
        ("read", "app"),
        ("readWrite", "app"),
        ("dbAdmin", "app"),
        ("dbOwner", "app"),
        ("userAdmin", "app"),
        ("clusterMonitor", "admin"),
        ("hostManager", "admin"),
        ("clusterManager", "admin"),
        ("clusterAdmin", "admin"),
        ("readAnyDatabase", "admin"),
        ("readWriteAnyDatabase", "admin"),
        ("userAdminAnyDatabase", "admin"),
        ("dbAdminAnyDatabase", "admin"),
        ("backup", "admin"),
        ("restore", "admin"),
        ("root", "admin"),
    ];
    for (role, role_db) in roles {
        // A fresh server per role: the allowed commands change the data.
        let (s, root) = server().await;
        root.database("admin")
            .run_command(
                doc! {"createUser": "u", "pwd": "p", "roles": [{"role": role, "db": role_db}]},
            )
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        // The `renameCollection` and `drop` rows need `app.c2` only when
        // allowed; the rename is on admin.
        let c = as_user(s.server.port(), "u", "p", "admin").await;
        for (db, cmd, allowed) in documented() {
            let on = if cmd.contains_key("renameCollection") {
                "admin"
            } else {
                db
            };
            let was_refused = refused(&c, on, cmd.clone()).await;
            assert_eq!(
                was_refused,
                !allowed.contains(&role),
                "{role}@{role_db} running {cmd} on {on}"
            );
        }
    }
}

#[tokio::test]
async fn a_read_user_of_one_database_cannot_reach_another() {
    let (s, root) = server().await;
    root.database("app")
        .run_command(doc! {"create": "v", "viewOn": "c", "pipeline": [{"$match": {}}]})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    root.database("app")
        .run_command(doc! {"createUser": "reader", "pwd": "p", "roles": ["read"]})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let c = as_user(s.server.port(), "reader", "p", "app").await;
    // What it may do on app.
    for cmd in [
        doc! {"find": "c"},
        doc! {"find": "v"},
        doc! {"aggregate": "c", "pipeline": [{"$lookup": {"from": "c", "pipeline": [], "as": "j"}}, {"$unionWith": "v"}], "cursor": {}},
        doc! {"explain": {"find": "c"}},
        // mapReduce inline needs find only (mongod's checkAuthForMapReduce).
        doc! {"mapReduce": "c", "map": "function() {}", "reduce": "function() {}", "out": {"inline": 1}},
    ] {
        c.database("app")
            .run_command(cmd.clone())
            .await
            .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    }
    // Nothing of other.
    for (db, cmd) in [
        ("other", doc! {"find": "c"}),
        ("other", doc! {"count": "c"}),
        ("other", doc! {"distinct": "c", "key": "x"}),
        (
            "other",
            doc! {"aggregate": "c", "pipeline": [], "cursor": {}},
        ),
        ("other", doc! {"listCollections": 1}),
        ("other", doc! {"listIndexes": "c"}),
        ("other", doc! {"collStats": "c"}),
        ("other", doc! {"dbStats": 1}),
        ("other", doc! {"explain": {"find": "c"}}),
        ("other", doc! {"insert": "c", "documents": [{}]}),
        (
            "other",
            doc! {"create": "v2", "viewOn": "c", "pipeline": []},
        ),
        ("app", doc! {"insert": "c", "documents": [{}]}),
        (
            "app",
            doc! {"update": "c", "updates": [{"q": {}, "u": {"$set": {"a": 1}}}]},
        ),
        (
            "app",
            doc! {"delete": "c", "deletes": [{"q": {}, "limit": 0}]},
        ),
        (
            "app",
            doc! {"findAndModify": "c", "query": {}, "update": {"$set": {"a": 1}}},
        ),
        (
            "app",
            doc! {"aggregate": "c", "pipeline": [{"$out": {"db": "other", "coll": "stolen"}}], "cursor": {}},
        ),
        (
            "app",
            doc! {"aggregate": "c", "pipeline": [{"$merge": {"into": {"db": "other", "coll": "c"}}}], "cursor": {}},
        ),
        (
            "app",
            doc! {"aggregate": "c", "pipeline": [{"$facet": {"a": [{"$unionWith": "system.users"}]}}], "cursor": {}},
        ),
        (
            "app",
            doc! {"aggregate": "c", "pipeline": [{"$out": "copy"}], "cursor": {}},
        ),
        // Into a collection, mapReduce also needs insert and remove (replace)
        // or update (merge, reduce) on it.
        (
            "other",
            doc! {"mapReduce": "c", "map": "function() {}", "reduce": "function() {}", "out": {"inline": 1}},
        ),
        (
            "app",
            doc! {"mapReduce": "c", "map": "function() {}", "reduce": "function() {}", "out": "copy"},
        ),
        (
            "app",
            doc! {"mapReduce": "c", "map": "function() {}", "reduce": "function() {}", "out": {"merge": "c"}},
        ),
        (
            "app",
            doc! {"mapReduce": "c", "map": "function() {}", "reduce": "function() {}", "out": {"reduce": "c", "db": "other"}},
        ),
        ("app", doc! {"create": "v3", "viewOn": "c", "pipeline": []}),
        ("app", doc! {"drop": "c"}),
        (
            "admin",
            doc! {"renameCollection": "app.c", "to": "other.c9"},
        ),
        ("admin", doc! {"find": "system.users"}),
        ("admin", doc! {"usersInfo": {"forAllDBs": true}}),
        ("admin", doc! {"serverStatus": 1}),
        (
            "admin",
            doc! {"listDatabases": 1, "authorizedDatabases": false},
        ),
    ] {
        assert!(
            refused(&c, db, cmd.clone()).await,
            "{cmd} on {db} must be refused"
        );
    }
    // listDatabases shows app only; listCollections with authorizedCollections
    // and nameOnly filters.
    let names = c
        .list_database_names()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(names, ["app"]);
    let r = c
        .database("other")
        .run_command(doc! {"listCollections": 1, "nameOnly": true, "authorizedCollections": true})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(common::first_batch(&r).len(), 0, "{r}");
    let r = c
        .database("app")
        .run_command(doc! {"listCollections": 1, "nameOnly": true, "authorizedCollections": true})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(common::first_batch(&r).len(), 2, "c and v: {r}");
    // The user sees itself, not others.
    c.database("app")
        .run_command(doc! {"usersInfo": "reader"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(refused(&c, "admin", doc! {"usersInfo": "root"}).await);
    // connectionStatus with showPrivileges lists the role's privileges.
    let r = c
        .database("app")
        .run_command(doc! {"connectionStatus": 1, "showPrivileges": true})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let text = format!("{r}");
    assert!(
        text.contains("\"find\"") && text.contains("\"db\": \"app\""),
        "{text}"
    );
    assert!(!text.contains("\"insert\""), "{text}");
}

#[tokio::test]
async fn privileges_follow_user_changes_at_the_next_command() {
    let (s, root) = server().await;
    root.database("app")
        .run_command(doc! {"createUser": "ed", "pwd": "p", "roles": ["read"]})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let ed = as_user(s.server.port(), "ed", "p", "app").await;
    let coll = ed.database("app").collection::<Document>("c");
    let e = coll.insert_one(doc! {"n": 1}).await.expect_err("read only");
    assert_eq!(error_code(&e), Some(13));
    root.database("app")
        .run_command(doc! {"updateUser": "ed", "roles": ["readWrite"]})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    coll.insert_one(doc! {"n": 1})
        .await
        .unwrap_or_else(|e| panic!("after the grant: {e}"));
    root.database("app")
        .run_command(doc! {"dropUser": "ed"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let e = coll
        .find_one(doc! {})
        .await
        .expect_err("a dropped user keeps no privilege");
    assert_eq!(error_code(&e), Some(13));
    let r = root
        .database("app")
        .run_command(doc! {"find": "c"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        common::first_batch(&r)
            .iter()
            .map(|d| d.get("_id").cloned())
            .filter(Option::is_some)
            .count(),
        2
    );
}

#[tokio::test]
async fn user_defined_roles_grant_inherit_and_revoke() {
    let (s, root) = server().await;
    let app = root.database("app");
    let admin = root.database("admin");
    let ok = |r: mongodb::error::Result<Document>| r.unwrap_or_else(|e| panic!("{e}"));
    ok(app
        .run_command(doc! {"createRole": "appReader", "privileges": [{"resource": {"db": "app", "collection": "c"}, "actions": ["find"]}], "roles": []})
        .await);
    ok(admin
        .run_command(doc! {"createRole": "both", "privileges": [{"resource": {"cluster": true}, "actions": ["serverStatus"]}], "roles": [{"role": "appReader", "db": "app"}]})
        .await);
    // mongod's refusals.
    for (db, cmd, code) in [
        (
            "app",
            doc! {"createRole": "appReader", "privileges": [], "roles": []},
            51002,
        ),
        (
            "app",
            doc! {"createRole": "read", "privileges": [], "roles": []},
            2,
        ),
        (
            "app",
            doc! {"createRole": "wide", "privileges": [{"resource": {"cluster": true}, "actions": ["serverStatus"]}], "roles": []},
            2,
        ),
        (
            "app",
            doc! {"createRole": "bad", "privileges": [{"resource": {"db": "app", "collection": ""}, "actions": ["fly"]}], "roles": []},
            9,
        ),
        (
            "app",
            doc! {"createRole": "orphan", "privileges": [], "roles": ["nosuch"]},
            31,
        ),
        (
            "app",
            doc! {"grantRolesToRole": "appReader", "roles": [{"role": "both", "db": "admin"}]},
            17,
        ),
        ("app", doc! {"dropRole": "read"}, 2),
        ("app", doc! {"dropRole": "nosuch"}, 31),
    ] {
        let e = root
            .database(db)
            .run_command(cmd.clone())
            .await
            .expect_err("refused");
        assert_eq!(error_code(&e), Some(code), "{cmd}: {e}");
    }
    ok(admin
        .run_command(doc! {"createUser": "rita", "pwd": "p", "roles": ["both"]})
        .await);
    let rita = as_user(s.server.port(), "rita", "p", "admin").await;
    // Inherited: find on app.c only, serverStatus.
    assert!(!refused(&rita, "app", doc! {"find": "c"}).await);
    assert!(!refused(&rita, "admin", doc! {"serverStatus": 1}).await);
    assert!(refused(&rita, "app", doc! {"find": "d"}).await);
    assert!(refused(&rita, "other", doc! {"find": "c"}).await);
    assert!(refused(&rita, "app", doc! {"insert": "c", "documents": [{}]}).await);
    // grantPrivilegesToRole / revokePrivilegesFromRole, seen at the next command.
    let insert_c = doc! {"resource": {"db": "app", "collection": "c"}, "actions": ["insert"]};
    ok(app
        .run_command(doc! {"grantPrivilegesToRole": "appReader", "privileges": [insert_c.clone()]})
        .await);
    assert!(!refused(&rita, "app", doc! {"insert": "c", "documents": [{}]}).await);
    ok(app
        .run_command(doc! {"revokePrivilegesFromRole": "appReader", "privileges": [insert_c]})
        .await);
    assert!(refused(&rita, "app", doc! {"insert": "c", "documents": [{}]}).await);
    assert!(
        !refused(&rita, "app", doc! {"find": "c"}).await,
        "find stays"
    );
    // grantRolesToRole / revokeRolesFromRole.
    ok(app
        .run_command(
            doc! {"grantRolesToRole": "appReader", "roles": [{"role": "read", "db": "other"}]},
        )
        .await);
    assert!(!refused(&rita, "other", doc! {"find": "c"}).await);
    ok(app
        .run_command(
            doc! {"revokeRolesFromRole": "appReader", "roles": [{"role": "read", "db": "other"}]},
        )
        .await);
    assert!(refused(&rita, "other", doc! {"find": "c"}).await);
    // grantRolesToUser / revokeRolesFromUser.
    ok(admin
        .run_command(
            doc! {"grantRolesToUser": "rita", "roles": [{"role": "readWrite", "db": "other"}]},
        )
        .await);
    assert!(!refused(&rita, "other", doc! {"insert": "c", "documents": [{}]}).await);
    ok(admin
        .run_command(
            doc! {"revokeRolesFromUser": "rita", "roles": [{"role": "readWrite", "db": "other"}]},
        )
        .await);
    assert!(refused(&rita, "other", doc! {"insert": "c", "documents": [{}]}).await);
    // rolesInfo in its forms.
    let r = ok(admin
        .run_command(doc! {"rolesInfo": "both", "showPrivileges": true})
        .await);
    let text = format!("{r}");
    assert!(
        text.contains("\"role\": \"appReader\"")
            && text.contains("\"serverStatus\"")
            && text.contains("\"find\""),
        "{text}"
    );
    assert!(text.contains("\"isBuiltin\": false"), "{text}");
    let r = ok(app.run_command(doc! {"rolesInfo": 1}).await);
    assert_eq!(r.get_array("roles").map(Vec::len).ok(), Some(1), "{r}");
    let r = ok(app
        .run_command(doc! {"rolesInfo": 1, "showBuiltinRoles": true})
        .await);
    assert_eq!(r.get_array("roles").map(Vec::len).ok(), Some(6), "{r}");
    let r = ok(app
        .run_command(doc! {"rolesInfo": {"role": "read", "db": "app"}, "showPrivileges": true})
        .await);
    assert!(format!("{r}").contains("\"isBuiltin\": true"), "{r}");
    // dropRole takes the role from its holders.
    ok(app.run_command(doc! {"dropRole": "appReader"}).await);
    assert!(refused(&rita, "app", doc! {"find": "c"}).await);
    let r = ok(admin.run_command(doc! {"rolesInfo": "both"}).await);
    assert!(!format!("{r}").contains("appReader"), "{r}");
    let r = ok(admin
        .run_command(doc! {"dropAllRolesFromDatabase": 1})
        .await);
    assert_eq!(r.get_i32("n").ok(), Some(1), "{r}");
    assert!(refused(&rita, "admin", doc! {"serverStatus": 1}).await);
    // A userAdmin of app may manage app's roles and users, nothing else.
    ok(app
        .run_command(doc! {"createUser": "ua", "pwd": "p", "roles": ["userAdmin"]})
        .await);
    let ua = as_user(s.server.port(), "ua", "p", "app").await;
    ok(ua
        .database("app")
        .run_command(doc! {"createRole": "r2", "privileges": [], "roles": ["read"]})
        .await);
    assert!(
        refused(
            &ua,
            "other",
            doc! {"createRole": "r3", "privileges": [], "roles": []}
        )
        .await
    );
    assert!(
        refused(
            &ua,
            "app",
            doc! {"createUser": "x", "pwd": "p", "roles": [{"role": "root", "db": "admin"}]}
        )
        .await
    );
    assert!(refused(&ua, "app", doc! {"find": "c"}).await);
}
