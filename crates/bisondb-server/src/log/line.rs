//! One log line: read from a tracing event, written as mongod's JSON or as a
//! human-readable line for a terminal.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::Event;

/// A field value written as JSON rather than as a string: wrap a
/// `serde_json::Value` (a document: `Json::doc(&d)`) and record it with `?`.
/// Its `Debug` form carries a marker the formatter recognises, so the value
/// is serialized once, and only when the line is emitted.
pub struct Json(pub Value);

/// Starts the `Debug` text of a [`Json`] value (a control character no
/// ordinary attribute text begins with).
const JSON_MARK: char = '\u{1}';

impl Json {
    /// A document as relaxed extended JSON (mongod's form in log lines).
    pub fn doc(d: &bson::Document) -> Json {
        Json(bson::Bson::Document(d.clone()).into_relaxed_extjson())
    }
}

impl fmt::Debug for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{JSON_MARK}{}", self.0)
    }
}

/// mongod's redaction of client data: every value becomes `"###"`, field
/// names stay, documents and arrays are walked.
pub fn redact(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            // An extended-JSON wrapper (`{"$date": ...}`) is one value.
            if m.keys().next().is_some_and(|k| k.starts_with('$')) {
                return Value::String("###".into());
            }
            Value::Object(m.into_iter().map(|(k, v)| (k, redact(v))).collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(redact).collect()),
        _ => Value::String("###".into()),
    }
}

/// The parts of one line.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// Milliseconds since the Unix epoch.
    pub millis: i64,
    pub severity: &'static str,
    pub component: &'static str,
    pub id: u64,
    pub ctx: String,
    pub msg: String,
    pub attr: Map<String, Value>,
}

#[derive(Default)]
struct Fields {
    id: Option<u64>,
    /// A `log` crate record's own target (the storage library logs through
    /// `log`; tracing-log hands its records over under the target "log").
    log_target: Option<String>,
    ctx: Option<String>,
    msg: String,
    attr: Map<String, Value>,
}

impl Fields {
    fn put(&mut self, name: &str, v: Value) {
        match (name, &v) {
            ("id", Value::Number(n)) if n.is_u64() => self.id = n.as_u64(),
            ("ctx", Value::String(s)) => self.ctx = Some(s.clone()),
            ("conn", Value::Number(n)) => self.ctx = Some(format!("conn{n}")),
            ("message", Value::String(s)) => self.msg = s.clone(),
            ("log.target", Value::String(s)) => self.log_target = Some(s.clone()),
            ("log.module_path" | "log.file" | "log.line", _) => {}
            _ => {
                self.attr.insert(name.to_string(), v);
            }
        }
    }
}

impl Visit for Fields {
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field.name(), Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field.name(), Value::from(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field.name(), Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field.name(), Value::from(value));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field.name(), Value::from(value));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let text = format!("{value:?}");
        let v = match text.strip_prefix(JSON_MARK) {
            Some(json) => serde_json::from_str(json).unwrap_or(Value::String(json.into())),
            None => Value::String(text),
        };
        self.put(field.name(), v);
    }
}

fn severity(level: &tracing::Level) -> &'static str {
    match *level {
        tracing::Level::ERROR => "E",
        tracing::Level::WARN => "W",
        tracing::Level::INFO => "I",
        tracing::Level::DEBUG => "D1",
        _ => "D2",
    }
}

impl Line {
    pub fn from_event(event: &Event<'_>) -> Line {
        let meta = event.metadata();
        let mut f = Fields::default();
        event.record(&mut f);
        let target = f.log_target.as_deref().unwrap_or(meta.target());
        let (component, _) = super::component_of(target);
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let ctx = f.ctx.unwrap_or_else(|| {
            std::thread::current()
                .name()
                .unwrap_or("thread")
                .to_string()
        });
        Line {
            millis,
            severity: severity(meta.level()),
            component,
            // A line without an id of its own: the first of BisonDB's range.
            id: f.id.unwrap_or(super::ids::OWN),
            ctx,
            msg: f.msg,
            attr: f.attr,
        }
    }

    /// The time as mongod writes it: `2026-12-01T22:41:42.123+00:00` (UTC).
    pub fn timestamp(&self) -> String {
        chrono::DateTime::from_timestamp_millis(self.millis)
            .unwrap_or_default()
            .format("%Y-%m-%dT%H:%M:%S%.3f+00:00")
            .to_string()
    }

    /// mongod's JSON line (no newline), keys in mongod's order; `attr` only
    /// when there are attributes.
    pub fn to_json(&self) -> String {
        let mut m = Map::new();
        m.insert("t".into(), serde_json::json!({"$date": self.timestamp()}));
        m.insert("s".into(), Value::from(self.severity));
        m.insert("c".into(), Value::from(self.component));
        m.insert("id".into(), Value::from(self.id));
        m.insert("ctx".into(), Value::from(self.ctx.as_str()));
        m.insert("msg".into(), Value::from(self.msg.as_str()));
        if !self.attr.is_empty() {
            m.insert("attr".into(), Value::Object(self.attr.clone()));
        }
        Value::Object(m).to_string()
    }

    /// A line for a person at a terminal:
    /// `2026-12-01T22:41:42.123+00:00 I  NETWORK  [listener] Connection accepted {"remote":...}`.
    pub fn to_human(&self) -> String {
        let mut s = format!(
            "{} {:<2} {:<8} [{}] {}",
            self.timestamp(),
            self.severity,
            self.component,
            self.ctx,
            self.msg
        );
        if !self.attr.is_empty() {
            s.push(' ');
            s.push_str(&Value::Object(self.attr.clone()).to_string());
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line() -> Line {
        let mut attr = Map::new();
        attr.insert("remote".into(), Value::from("127.0.0.1:5000"));
        attr.insert("connectionId".into(), Value::from(12));
        Line {
            millis: 1_796_164_902_123,
            severity: "I",
            component: "NETWORK",
            id: 22943,
            ctx: "listener".into(),
            msg: "Connection accepted".into(),
            attr,
        }
    }

    #[test]
    fn json_line_as_mongod() {
        assert_eq!(
            line().to_json(),
            r#"{"t":{"$date":"2026-12-01T22:41:42.123+00:00"},"s":"I","c":"NETWORK","id":22943,"ctx":"listener","msg":"Connection accepted","attr":{"remote":"127.0.0.1:5000","connectionId":12}}"#
        );
        let mut bare = line();
        bare.attr.clear();
        assert!(!bare.to_json().contains("attr"));
    }

    #[test]
    fn human_line() {
        assert_eq!(
            line().to_human(),
            r#"2026-12-01T22:41:42.123+00:00 I  NETWORK  [listener] Connection accepted {"remote":"127.0.0.1:5000","connectionId":12}"#
        );
    }

    #[test]
    fn fields_become_id_ctx_msg_and_attrs() {
        let mut f = Fields::default();
        f.put("id", Value::from(51803u64));
        f.put("conn", Value::from(7));
        f.put("message", Value::from("Slow query"));
        f.put("durationMillis", Value::from(12));
        assert_eq!(f.id, Some(51803));
        assert_eq!(f.ctx.as_deref(), Some("conn7"));
        assert_eq!(f.msg, "Slow query");
        assert_eq!(f.attr.get("durationMillis"), Some(&Value::from(12)));
        f.put("log.target", Value::from("fjall::db"));
        f.put("log.line", Value::from(3));
        assert_eq!(f.log_target.as_deref(), Some("fjall::db"));
        assert_eq!(
            f.attr.len(),
            1,
            "the log crate's location is not an attribute"
        );
    }

    #[test]
    fn json_fields_stay_json() {
        let d = bson::doc! {"find": "c", "filter": {"a": 1}};
        let text = format!("{:?}", Json::doc(&d));
        let mut f = Fields::default();
        let v = serde_json::from_str::<Value>(text.trim_start_matches(JSON_MARK)).unwrap();
        f.put("command", v);
        assert_eq!(
            f.attr.get("command"),
            Some(&serde_json::json!({"find": "c", "filter": {"a": 1}}))
        );
    }

    #[test]
    fn redaction_keeps_names() {
        let v = serde_json::json!({"find": "c", "filter": {"a": 1, "d": {"$date": "x"}}, "l": [1, "s"]});
        assert_eq!(
            redact(v),
            serde_json::json!({"find": "###", "filter": {"a": "###", "d": "###"}, "l": ["###", "###"]})
        );
    }
}
