//! `$listLocalSessions`, the first stage of a `{aggregate: 1}`: the sessions
//! in this server's session cache (`sessions.rs`).

use bisondb_error::{ErrorCode, MongoError, MongoResult};

/// `$listLocalSessions: {}`, `{allUsers: true}` or `{users: [...]}`; without
/// authentication every session belongs to the one (empty) user, so the
/// options do not change what is listed.
pub fn check_spec(spec: &bson::Bson) -> MongoResult<()> {
    const STAGE: &str = "$listLocalSessions";
    let bson::Bson::Document(d) = spec else {
        return Err(MongoError::new(
            ErrorCode::TypeMismatch,
            "$listLocalSessions must take an object",
        ));
    };
    for (k, v) in d {
        match (k.as_str(), v) {
            ("allUsers", bson::Bson::Boolean(_)) | ("users", bson::Bson::Array(_)) => {}
            ("allUsers" | "users", _) => {
                return Err(MongoError::new(
                    ErrorCode::TypeMismatch,
                    format!("{STAGE}.{k} has the wrong type"),
                ))
            }
            (other, _) => return Err(crate::fields::unknown_field(STAGE, other)),
        }
    }
    Ok(())
}
