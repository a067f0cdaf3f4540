//! `authenticate`: MONGODB-X509, the one mechanism mongod serves through this
//! command (SCRAM goes through `saslStart`). The user is the subject of the
//! client certificate the TLS handshake verified, in RFC 2253 form
//! (`tls::subject`), and must exist in `$external` (`createUser` on
//! `$external`, kept in `admin.system.users` by `auth::users`); success
//! marks the connection authenticated as that user (`auth::authenticate_as`). As in mongod every authentication failure answers
//! 18 AuthenticationFailed "auth failed" whatever went wrong (the reason is
//! logged), so a client learns nothing about users or certificates.
//!
//! The same check answers a hello's `speculativeAuthenticate` for
//! MONGODB-X509 ([`speculative`]).

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, RawBsonRef, RawDocument, RawDocumentBuf};

use super::{Command, Context};
use crate::auth::{LOG_AUTH_FAILED, LOG_AUTH_SUCCEEDED};
use crate::reply;
use crate::request::{CommandRequest, EXTERNAL_DB};

/// The mechanism's name on the wire.
pub const MONGODB_X509: &str = "MONGODB-X509";

#[derive(Debug)]
pub struct Authenticate {
    mechanism: Option<String>,
    user: Option<String>,
    db: String,
}

impl Authenticate {
    fn from_doc(body: &RawDocument, db: String) -> MongoResult<Self> {
        let mut a = Authenticate {
            mechanism: None,
            user: None,
            db,
        };
        for el in body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match (k.as_str(), v) {
                ("mechanism", RawBsonRef::String(s)) => a.mechanism = Some(s.to_string()),
                ("user", RawBsonRef::String(s)) => a.user = Some(s.to_string()),
                ("mechanism" | "user", other) => {
                    return Err(crate::fields::wrong_type(
                        "authenticate",
                        k.as_str(),
                        other,
                        "string",
                    ))
                }
                // `db` in a speculativeAuthenticate document names the database.
                ("db", RawBsonRef::String(s)) => a.db = s.to_string(),
                _ => {}
            }
        }
        Ok(a)
    }

    /// Authenticates; the reply fields on success.
    fn run(&self, ctx: &mut Context<'_>) -> MongoResult<bson::Document> {
        let mechanism = match self.mechanism.as_deref() {
            None | Some("") => return Err(MongoError::bad_value("Auth mechanism not specified")),
            Some(m) => m,
        };
        if mechanism != MONGODB_X509 {
            return Err(MongoError::bad_value(format!(
                "Unsupported mechanism: {mechanism} (the authenticate command serves MONGODB-X509 only; SCRAM authenticates through saslStart)"
            )));
        }
        if self.db != EXTERNAL_DB {
            return Err(MongoError::new(
                ErrorCode::ProtocolError,
                "X.509 authentication must always use the $external database.",
            ));
        }
        let Some(subject) = ctx.conn.tls.as_ref().and_then(|t| t.client_subject.clone()) else {
            return Err(self.failed(ctx, "", "No verified subject name available from client"));
        };
        if let Some(user) = &self.user {
            if *user != subject {
                return Err(self.failed(
                    ctx,
                    user,
                    "There is no x.509 client certificate matching the user.",
                ));
            }
        }
        if !x509_user_exists(ctx, &subject)? {
            return Err(self.failed(
                ctx,
                &subject,
                &format!("Could not find user \"{subject}\" for db \"$external\""),
            ));
        }
        let name = crate::auth::Name::new(subject.clone(), EXTERNAL_DB);
        if !crate::auth::may_authenticate_as(ctx, &name)? {
            return Err(self.failed(ctx, &subject, "unmet authentication restrictions"));
        }
        tracing::info!(target: "ACCESS", id = LOG_AUTH_SUCCEEDED, conn = ctx.conn.id,
            mechanism = MONGODB_X509, user = %subject, db = EXTERNAL_DB, remote = %ctx.conn.peer,
            "Successfully authenticated");
        crate::auth::authenticate_as(ctx.conn, name);
        Ok(doc! {"dbname": EXTERNAL_DB, "user": subject})
    }

    /// Logs why and returns mongod's one answer to a failed authentication.
    fn failed(&self, ctx: &Context<'_>, user: &str, why: &str) -> MongoError {
        tracing::info!(target: "ACCESS", id = LOG_AUTH_FAILED, conn = ctx.conn.id,
            mechanism = MONGODB_X509, user = %user, db = %self.db, remote = %ctx.conn.peer,
            error = %why, "Failed to authenticate");
        MongoError::new(ErrorCode::AuthenticationFailed, "auth failed")
    }
}

/// Whether `$external` has the user `subject` in the user store
/// (`admin.system.users`, where `createUser` on `$external` puts it).
fn x509_user_exists(ctx: &Context<'_>, subject: &str) -> MongoResult<bool> {
    let name = crate::auth::Name::new(subject, EXTERNAL_DB);
    Ok(crate::auth::users::get(&ctx.state.storage, crate::auth::users::USERS, &name)?.is_some())
}

impl Command for Authenticate {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        Authenticate::from_doc(req.body, req.db.clone())
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let reply = self.run(ctx)?;
        reply::ok(reply)
    }
}

/// A hello's `speculativeAuthenticate` for MONGODB-X509: the reply's
/// `speculativeAuthenticate` document on success, `None` otherwise (the
/// driver then authenticates with the command, which gives the error).
/// `None` too for other mechanisms, which are SCRAM's to answer.
pub fn speculative(ctx: &mut Context<'_>, request: &RawDocument) -> Option<bson::Document> {
    let a = Authenticate::from_doc(request, EXTERNAL_DB.to_string()).ok()?;
    if a.mechanism.as_deref() != Some(MONGODB_X509) {
        return None;
    }
    a.run(ctx).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_mechanism_user_and_db() {
        let body = bson::rawdoc! {"authenticate": 1, "mechanism": "MONGODB-X509", "user": "CN=a", "db": "$external"};
        let a = Authenticate::from_doc(&body, "admin".into()).unwrap();
        assert_eq!(a.mechanism.as_deref(), Some(MONGODB_X509));
        assert_eq!(a.user.as_deref(), Some("CN=a"));
        assert_eq!(a.db, "$external");
        let bad = bson::rawdoc! {"authenticate": 1, "mechanism": 1};
        assert_eq!(
            Authenticate::from_doc(&bad, "$external".into())
                .unwrap_err()
                .code,
            ErrorCode::TypeMismatch
        );
    }
}
