//! Extended JSON (canonical and relaxed, as the specification files use it) to
//! BSON. Written here rather than taken from `bson`'s optional feature so the
//! runner controls number typing: a JSON integer that fits 32 bits is an int32,
//! which is how the specifications expect literals to reach the server.

use bson::{spec::BinarySubtype, Binary, Bson, DateTime, Decimal128, Document, Regex, Timestamp};
use serde_json::{Map, Value};

/// Converts one JSON value; errors name the malformed wrapper.
pub fn to_bson(v: &Value) -> Result<Bson, String> {
    Ok(match v {
        Value::Null => Bson::Null,
        Value::Bool(b) => Bson::Boolean(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                match i32::try_from(i) {
                    Ok(small) => Bson::Int32(small),
                    Err(_) => Bson::Int64(i),
                }
            } else {
                Bson::Double(n.as_f64().ok_or("number out of range")?)
            }
        }
        Value::String(s) => Bson::String(s.clone()),
        Value::Array(items) => Bson::Array(items.iter().map(to_bson).collect::<Result<_, _>>()?),
        Value::Object(map) => {
            wrapper(map)?.map_or_else(|| to_document(map).map(Bson::Document), Ok)?
        }
    })
}

/// Converts a JSON object to a document, keeping key order.
pub fn to_document(map: &Map<String, Value>) -> Result<Document, String> {
    let mut doc = Document::new();
    for (k, v) in map {
        doc.insert(k.clone(), to_bson(v)?);
    }
    Ok(doc)
}

fn str_of<'a>(v: &'a Value, what: &str) -> Result<&'a str, String> {
    v.as_str().ok_or_else(|| format!("{what} must be a string"))
}

/// Recognizes the `$`-wrappers of extended JSON; `None` means a plain document.
fn wrapper(map: &Map<String, Value>) -> Result<Option<Bson>, String> {
    let Some((key, val)) = map.iter().next() else {
        return Ok(None);
    };
    let single = map.len() == 1;
    let out = match key.as_str() {
        "$oid" if single => Bson::ObjectId(
            bson::oid::ObjectId::parse_str(str_of(val, "$oid")?).map_err(|e| e.to_string())?,
        ),
        "$numberInt" if single => {
            Bson::Int32(str_of(val, key)?.parse().map_err(|_| "bad $numberInt")?)
        }
        "$numberLong" if single => {
            Bson::Int64(str_of(val, key)?.parse().map_err(|_| "bad $numberLong")?)
        }
        "$numberDouble" if single => Bson::Double(match str_of(val, key)? {
            "Infinity" => f64::INFINITY,
            "-Infinity" => f64::NEG_INFINITY,
            "NaN" => f64::NAN,
            s => s.parse().map_err(|_| "bad $numberDouble")?,
        }),
        "$numberDecimal" if single => Bson::Decimal128(
            str_of(val, key)?
                .parse::<Decimal128>()
                .map_err(|e| e.to_string())?,
        ),
        "$date" if single => Bson::DateTime(match val {
            Value::String(s) => DateTime::parse_rfc3339_str(s).map_err(|e| e.to_string())?,
            Value::Number(n) => DateTime::from_millis(n.as_i64().ok_or("bad $date")?),
            Value::Object(inner) => match to_bson(&Value::Object(inner.clone()))? {
                Bson::Int64(ms) => DateTime::from_millis(ms),
                _ => return Err("bad $date".into()),
            },
            _ => return Err("bad $date".into()),
        }),
        "$binary" if single => {
            let b64 = str_of(val.get("base64").unwrap_or(&Value::Null), "base64")?;
            let sub = str_of(val.get("subType").unwrap_or(&Value::Null), "subType")?;
            let sub = u8::from_str_radix(sub, 16).map_err(|_| "bad subType")?;
            Bson::Binary(
                Binary::from_base64(b64, BinarySubtype::from(sub)).map_err(|e| e.to_string())?,
            )
        }
        "$timestamp" if single => {
            let t = val
                .get("t")
                .and_then(Value::as_u64)
                .ok_or("bad $timestamp")?;
            let i = val
                .get("i")
                .and_then(Value::as_u64)
                .ok_or("bad $timestamp")?;
            Bson::Timestamp(Timestamp {
                time: u32::try_from(t).map_err(|_| "bad $timestamp")?,
                increment: u32::try_from(i).map_err(|_| "bad $timestamp")?,
            })
        }
        "$regularExpression" if single => {
            let p = str_of(val.get("pattern").unwrap_or(&Value::Null), "pattern")?;
            let o = str_of(val.get("options").unwrap_or(&Value::Null), "options")?;
            let mut flags: Vec<char> = o.chars().collect();
            flags.sort_unstable();
            Bson::RegularExpression(Regex {
                pattern: p.to_owned().try_into().map_err(|_| "bad pattern")?,
                options: flags
                    .into_iter()
                    .collect::<String>()
                    .try_into()
                    .map_err(|_| "bad options")?,
            })
        }
        "$minKey" if single => Bson::MinKey,
        "$maxKey" if single => Bson::MaxKey,
        "$undefined" if single => Bson::Undefined,
        "$symbol" if single => Bson::Symbol(str_of(val, key)?.to_owned()),
        "$code" if single => Bson::JavaScriptCode(str_of(val, key)?.to_owned()),
        _ => return Ok(None),
    };
    Ok(Some(out))
}
