//! The replica-set configuration document: built by `replSetInitiate` (from
//! the one given or, without one, for this node alone), checked as mongod
//! checks a one-member configuration, completed with mongod's defaults, and
//! kept in `local.system.replset` so a restarted server is primary again.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_storage::{Durability, Modify, Storage};
use bson::{doc, oid::ObjectId, Bson, Document};

/// Where the configuration lives, as in mongod.
pub const CONFIG_DB: &str = "local";
pub const CONFIG_COLL: &str = "system.replset";

fn invalid(msg: impl Into<String>) -> MongoError {
    MongoError::new(ErrorCode::InvalidReplicaSetConfig, msg)
}

fn int(v: &Bson) -> Option<i64> {
    match v {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        Bson::Double(d) if d.fract() == 0.0 => Some(*d as i64),
        _ => None,
    }
}

/// This node's `host:port` when `replSetInitiate` names no member: mongod's
/// `getHostName():port`.
pub fn default_host(port: u16) -> String {
    format!("{}:{port}", crate::state::hostname())
}

/// Whether `host` names this node: its port is ours and its name is this
/// machine (its host name, a loopback name or address, or one we bind).
pub fn is_self(host: &str, port: u16, bind_ips: &[String]) -> bool {
    let (name, p) = match host.rsplit_once(':') {
        Some((n, p)) => (n, p.parse::<u16>().ok()),
        None => (host, Some(27017)),
    };
    if p != Some(port) {
        return false;
    }
    let name = name.trim_start_matches('[').trim_end_matches(']');
    name == crate::state::hostname()
        || matches!(name, "localhost" | "127.0.0.1" | "::1" | "0.0.0.0")
        || bind_ips.iter().any(|ip| ip == name)
}

/// Checks `given` as the configuration of the set `set_name` with this node
/// (`port`) its only member, and completes it with mongod's defaults;
/// `version` and `term` are set by the caller.
pub fn complete(
    given: &Document,
    set_name: &str,
    port: u16,
    bind_ips: &[String],
    replica_set_id: Option<ObjectId>,
) -> MongoResult<Document> {
    let id = match given.get("_id") {
        Some(Bson::String(s)) => s.clone(),
        Some(_) => {
            return Err(invalid(
                "The replica set configuration's _id must be a string",
            ))
        }
        None => return Err(invalid("Missing expected field \"_id\"")),
    };
    if id != set_name {
        return Err(invalid(format!(
            "Attempting to initiate a replica set with name {id}, but command line reports {set_name}; rejecting"
        )));
    }
    let members = match given.get("members") {
        Some(Bson::Array(a)) => a,
        Some(_) => {
            return Err(invalid(
                "The replica set configuration's members must be an array",
            ))
        }
        None => return Err(invalid("Missing expected field \"members\"")),
    };
    let [Bson::Document(member)] = members.as_slice() else {
        if members.is_empty() {
            return Err(invalid(
                "Replica set configuration must contain at least one member",
            ));
        }
        return Err(invalid(format!(
            "BisonDB runs one-member replica sets only; this configuration has {} members",
            members.len()
        )));
    };
    let host = match member.get("host") {
        Some(Bson::String(h)) => h.clone(),
        _ => return Err(invalid("Missing expected field \"host\" in members.0")),
    };
    let member_id = member
        .get("_id")
        .and_then(int)
        .ok_or_else(|| invalid("Missing expected field \"_id\" (a number) in members.0"))?;
    for (key, value) in member {
        match key.as_str() {
            "_id" | "host" | "tags" => {}
            "arbiterOnly" | "hidden" if value.as_bool() == Some(true) => {
                return Err(invalid(format!(
                    "the only member of a replica set cannot be {key}: it must be electable"
                )))
            }
            "buildIndexes" if value.as_bool() == Some(false) => {
                return Err(invalid(
                    "the only member of a replica set must build indexes",
                ))
            }
            "priority" | "votes" if int(value) == Some(0) => {
                return Err(invalid(format!(
                    "the only member of a replica set needs {key} above 0: it must be electable"
                )))
            }
            "secondaryDelaySecs" | "slaveDelay" if int(value).unwrap_or(0) != 0 => {
                return Err(invalid(format!("the only member cannot have {key}")))
            }
            "arbiterOnly" | "hidden" | "buildIndexes" | "priority" | "votes"
            | "secondaryDelaySecs" | "slaveDelay" => {}
            other => {
                return Err(MongoError::new(
                    ErrorCode::Other(40415),
                    format!("BSON field 'MemberConfig.{other}' is an unknown field."),
                ))
            }
        }
    }
    if !is_self(&host, port, bind_ips) {
        return Err(MongoError::new(
            ErrorCode::NodeNotFound,
            format!(
                "No host described in new configuration with {{version: {}, term: {}}} for replica set {set_name} maps to this node",
                given.get("version").and_then(int).unwrap_or(1),
                given.get("term").and_then(int).unwrap_or(0),
            ),
        ));
    }
    let priority = member.get("priority").cloned().unwrap_or(Bson::Double(1.0));
    let tags = member.get_document("tags").cloned().unwrap_or_default();
    let given_settings = given.get_document("settings").cloned().unwrap_or_default();
    let mut settings = doc! {
        "chainingAllowed": true,
        "heartbeatIntervalMillis": 2000i32,
        "heartbeatTimeoutSecs": 10i32,
        "electionTimeoutMillis": 10000i32,
        "catchUpTimeoutMillis": -1i32,
        "catchUpTakeoverDelayMillis": 30000i32,
        "getLastErrorModes": {},
        "getLastErrorDefaults": {"w": 1i32, "wtimeout": 0i32},
        "replicaSetId": replica_set_id.unwrap_or_default(),
    };
    for (k, v) in given_settings {
        if k == "replicaSetId" && replica_set_id.is_some() {
            continue;
        }
        if !settings.contains_key(&k) {
            return Err(MongoError::new(
                ErrorCode::Other(40415),
                format!("BSON field 'ReplSetConfigSettings.{k}' is an unknown field."),
            ));
        }
        settings.insert(k, v);
    }
    for (k, _) in given {
        if !matches!(
            k.as_str(),
            "_id"
                | "version"
                | "term"
                | "members"
                | "settings"
                | "protocolVersion"
                | "writeConcernMajorityJournalDefault"
                | "configsvr"
        ) {
            return Err(MongoError::new(
                ErrorCode::Other(40415),
                format!("BSON field 'ReplSetConfig.{k}' is an unknown field."),
            ));
        }
    }
    if given.get_bool("configsvr").unwrap_or(false) {
        return Err(invalid(
            "configsvr: config servers are for sharded clusters, which BisonDB does not run",
        ));
    }
    if let Some(v) = given.get("protocolVersion") {
        if int(v) != Some(1) {
            return Err(invalid("Only protocolVersion 1 is supported"));
        }
    }
    Ok(doc! {
        "_id": set_name,
        "version": given.get("version").and_then(int).unwrap_or(1) as i32,
        "term": 0i64,
        "members": [{
            "_id": member_id as i32,
            "host": host,
            "arbiterOnly": false,
            "buildIndexes": true,
            "hidden": false,
            "priority": priority,
            "tags": tags,
            "secondaryDelaySecs": 0i64,
            "votes": 1i32,
        }],
        "protocolVersion": 1i64,
        "writeConcernMajorityJournalDefault": given
            .get_bool("writeConcernMajorityJournalDefault")
            .unwrap_or(true),
        "settings": settings,
    })
}

/// The one member of a configuration.
pub fn member(config: &Document) -> Option<&Document> {
    config
        .get_array("members")
        .ok()
        .and_then(|m| m.first())
        .and_then(Bson::as_document)
}

/// The `host:port` of a configuration's one member (empty if it has none).
pub fn member_host(config: &Document) -> String {
    member(config)
        .and_then(|m| m.get_str("host").ok())
        .unwrap_or_default()
        .to_string()
}

/// The stored configuration, if `replSetInitiate` ran on this data.
pub fn load(storage: &Storage) -> MongoResult<Option<Document>> {
    let Some(coll) = storage.collection(CONFIG_DB, CONFIG_COLL) else {
        return Ok(None);
    };
    let mut docs = coll.scan(false);
    match docs.next() {
        Some(doc) => {
            let doc = doc.map_err(MongoError::from)?;
            Ok(Some(Document::try_from(doc.as_ref()).map_err(|e| {
                MongoError::internal(format!("stored replica set configuration: {e}"))
            })?))
        }
        None => Ok(None),
    }
}

/// Stores `config` (replacing the one before) durably.
pub fn store(storage: &Storage, config: &Document) -> MongoResult<()> {
    let coll = storage
        .get_or_create_collection(CONFIG_DB, CONFIG_COLL)
        .map_err(MongoError::from)?;
    let raw = crate::reply::to_raw(config)?;
    let id = Bson::String(
        config
            .get_str("_id")
            .map_err(|_| MongoError::internal("replica set configuration without _id"))?
            .to_string(),
    );
    let raw_id = bson::RawBson::try_from(id)
        .map_err(|e| MongoError::internal(format!("replica set id: {e}")))?;
    coll.modify(raw_id.as_raw_bson_ref(), Durability::Sync, &mut |current| {
        Ok(match current {
            Some(_) => Modify::Replace(raw.clone()),
            None => Modify::Insert(raw.clone()),
        })
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_member_configurations() {
        let given = doc! {"_id": "rs0", "members": [{"_id": 0, "host": "localhost:27017"}]};
        let c = complete(&given, "rs0", 27017, &[], None).unwrap();
        assert_eq!(c.get_i32("version").unwrap(), 1);
        assert_eq!(c.get_array("members").unwrap().len(), 1);
        let wrong_name = doc! {"_id": "rs1", "members": [{"_id": 0, "host": "localhost:27017"}]};
        let e = complete(&wrong_name, "rs0", 27017, &[], None).unwrap_err();
        assert_eq!(e.code.code(), 93);
        let other_port = doc! {"_id": "rs0", "members": [{"_id": 0, "host": "localhost:1"}]};
        let e = complete(&other_port, "rs0", 27017, &[], None).unwrap_err();
        assert_eq!(e.code.code(), 74);
        let two = doc! {"_id": "rs0", "members": [{"_id": 0, "host": "localhost:27017"}, {"_id": 1, "host": "localhost:27018"}]};
        let e = complete(&two, "rs0", 27017, &[], None).unwrap_err();
        assert!(e.message.contains("one-member"), "{}", e.message);
        let arbiter = doc! {"_id": "rs0", "members": [{"_id": 0, "host": "localhost:27017", "arbiterOnly": true}]};
        assert!(complete(&arbiter, "rs0", 27017, &[], None).is_err());
    }
}
