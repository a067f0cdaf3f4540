//! `authenticationRestrictions` (`clientSource`, `serverAddress`) of users
//! and roles through the Rust driver: checked when they are set, shown by
//! `usersInfo`/`rolesInfo`, enforced at login (18 AuthenticationFailed) and,
//! for a role changed after the login, at the connection's next command.

use bson::{doc, Bson, Document};
use mongodb::Client;

use crate::common::{self, error_code};

async fn login(uri: &str, user: &str, pwd: &str) -> mongodb::error::Result<Client> {
    let rest = uri.strip_prefix("mongodb://").unwrap();
    let c = Client::with_uri_str(format!("mongodb://{user}:{pwd}@{rest}&authSource=admin")).await?;
    c.database("app").run_command(doc! {"ping": 1}).await?;
    Ok(c)
}

async fn with_root() -> (common::TestServer, Client) {
    let s = common::start_with_root().await;
    let root = login(&s.tcp_uri, "root", "rootpw").await.unwrap();
    (s, root)
}

async fn create_user(root: &Client, user: &str, restrictions: Bson, roles: Bson) {
    root.database("admin")
        .run_command(doc! {
            "createUser": user, "pwd": "pw", "roles": roles,
            "authenticationRestrictions": restrictions,
        })
        .await
        .unwrap_or_else(|e| panic!("createUser {user}: {e}"));
}

/// The server's 18 AuthenticationFailed, which the driver reports as a
/// SCRAM failure whose source is the command error.
fn auth_failed(e: &mongodb::error::Error) -> bool {
    matches!(*e.kind, mongodb::error::ErrorKind::Authentication { .. })
        && format!("{e:?}").contains("code: 18, code_name: \"AuthenticationFailed\"")
}

fn rw() -> Bson {
    bson::bson!([{"role": "readWrite", "db": "app"}])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_source_and_server_address_decide_who_may_log_in() {
    let (s, root) = with_root().await;
    let tcp = s.tcp_uri.clone();
    let unix = s.unix_uri.clone();
    create_user(
        &root,
        "here",
        bson::bson!([{"clientSource": ["127.0.0.1/32"]}]),
        rw(),
    )
    .await;
    create_user(
        &root,
        "there",
        bson::bson!([{"clientSource": ["10.0.0.0/8"]}]),
        rw(),
    )
    .await;
    create_user(
        &root,
        "served",
        bson::bson!([{"serverAddress": ["127.0.0.1"]}]),
        rw(),
    )
    .await;
    create_user(
        &root,
        "elsewhere",
        bson::bson!([{"serverAddress": ["10.1.1.1"]}]),
        rw(),
    )
    .await;
    // Either document of a list will do.
    create_user(
        &root,
        "either",
        bson::bson!([{"clientSource": ["10.0.0.0/8"]}, {"clientSource": ["127.0.0.0/8"], "serverAddress": ["127.0.0.1"]}]),
        rw(),
    )
    .await;

    for user in ["here", "served", "either"] {
        login(&tcp, user, "pw")
            .await
            .unwrap_or_else(|e| panic!("{user} over loopback: {e}"));
    }
    for user in ["there", "elsewhere"] {
        let e = login(&tcp, user, "pw").await.expect_err(user);
        assert!(auth_failed(&e), "{user}: {e}");
    }
    // The Unix socket has no address: a clientSource is never met there.
    let e = login(&unix, "here", "pw")
        .await
        .expect_err("here over the socket");
    assert!(auth_failed(&e), "{e}");

    // A role's restrictions bind its holders.
    root.database("admin")
        .run_command(doc! {
            "createRole": "remoteOnly", "privileges": [], "roles": [],
            "authenticationRestrictions": [{"clientSource": ["192.168.0.0/16"]}],
        })
        .await
        .unwrap();
    create_user(
        &root,
        "viaRole",
        Bson::Array(Vec::new()),
        bson::bson!([{"role": "remoteOnly", "db": "admin"}, {"role": "readWrite", "db": "app"}]),
    )
    .await;
    let e = login(&tcp, "viaRole", "pw").await.expect_err("viaRole");
    assert!(auth_failed(&e), "{e}");

    // usersInfo and rolesInfo show them.
    let info = root
        .database("admin")
        .run_command(doc! {"usersInfo": "viaRole", "showAuthenticationRestrictions": true})
        .await
        .unwrap();
    let u = info.get_array("users").unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    assert_eq!(
        u.get_array("authenticationRestrictions").unwrap(),
        &Vec::<Bson>::new(),
        "{u}"
    );
    assert_eq!(
        u.get_array("inheritedAuthenticationRestrictions").unwrap(),
        &vec![bson::bson!([{"clientSource": ["192.168.0.0/16"]}])],
        "{u}"
    );
    let info = root
        .database("admin")
        .run_command(doc! {"usersInfo": "here", "showAuthenticationRestrictions": true})
        .await
        .unwrap();
    let u: &Document = info.get_array("users").unwrap()[0].as_document().unwrap();
    assert_eq!(
        u.get_array("authenticationRestrictions").unwrap(),
        &vec![Bson::Document(doc! {"clientSource": ["127.0.0.1/32"]})],
        "{u}"
    );
    let info = root
        .database("admin")
        .run_command(doc! {"rolesInfo": "remoteOnly", "showAuthenticationRestrictions": true})
        .await
        .unwrap();
    let r: &Document = info.get_array("roles").unwrap()[0].as_document().unwrap();
    assert_eq!(
        r.get_array("authenticationRestrictions").unwrap(),
        &vec![Bson::Document(doc! {"clientSource": ["192.168.0.0/16"]})],
        "{r}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_restrictions_are_refused_and_a_role_changed_later_applies_at_the_next_command() {
    let (s, root) = with_root().await;
    let admin = root.database("admin");
    for (bad, code) in [
        (bson::bson!([{"clientSource": ["300.0.0.1"]}]), 2),
        (bson::bson!([{"clientSource": ["10.0.0.0/40"]}]), 2),
        (bson::bson!([{"nearby": ["10.0.0.1"]}]), 2),
        (bson::bson!([{"clientSource": [5]}]), 14),
        (bson::bson!(["10.0.0.1"]), 14),
    ] {
        let e = admin
            .run_command(doc! {"createUser": "bad", "pwd": "pw", "roles": [], "authenticationRestrictions": bad.clone()})
            .await
            .expect_err("a bad restriction");
        assert_eq!(error_code(&e), Some(code), "{bad}: {e}");
        let e = admin
            .run_command(doc! {"createRole": "bad", "privileges": [], "roles": [], "authenticationRestrictions": bad.clone()})
            .await
            .expect_err("a bad role restriction");
        assert_eq!(error_code(&e), Some(code), "{bad}: {e}");
    }

    admin
        .run_command(doc! {"createRole": "worker", "privileges": [], "roles": [{"role": "readWrite", "db": "app"}]})
        .await
        .unwrap();
    create_user(&root, "w", Bson::Array(Vec::new()), bson::bson!(["worker"])).await;
    let w = login(&s.tcp_uri, "w", "pw").await.unwrap();
    let coll = w.database("app").collection::<Document>("c");
    coll.insert_one(doc! {"x": 1}).await.unwrap();
    admin
        .run_command(doc! {"updateRole": "worker", "authenticationRestrictions": [{"clientSource": ["10.0.0.0/8"]}]})
        .await
        .unwrap();
    let e = coll
        .find_one(doc! {})
        .await
        .expect_err("the role's new restriction");
    assert_eq!(error_code(&e), Some(13), "{e}");
    let e = login(&s.tcp_uri, "w", "pw").await.expect_err("a new login");
    assert!(auth_failed(&e), "{e}");
}
