//! BSON -> JavaScript, the way mongod hands documents to server-side scripts:
//! numbers (double, int) as numbers, strings, booleans, `null`, `undefined`,
//! arrays and objects as such, dates as `Date`, regular expressions as
//! `RegExp`, and the types JavaScript lacks as the shell's objects:
//! `ObjectId` (`.str`), `NumberLong` (`valueOf` is the number, so comparisons
//! work), `NumberDecimal`, `Timestamp`, `BinData`, `MinKey`/`MaxKey`.

use bson::raw::{RawBsonRef, RawDocument};
use rquickjs::convert::Coerced;
use rquickjs::{Array, Ctx, Function, Object, Value};

/// The document as a JavaScript object.
pub(crate) fn document<'js>(ctx: &Ctx<'js>, doc: &RawDocument) -> rquickjs::Result<Value<'js>> {
    let helpers: Object = ctx.globals().get("__bson")?;
    doc_value(ctx, &helpers, doc)
}

/// Owned BSON values (the evaluated `args` of `$function`) as JavaScript.
pub(crate) fn values<'js>(
    ctx: &Ctx<'js>,
    args: &[bson::Bson],
) -> rquickjs::Result<Vec<Value<'js>>> {
    let helpers: Object = ctx.globals().get("__bson")?;
    let mut holder = bson::Document::new();
    holder.insert("a", bson::Bson::Array(args.to_vec()));
    let raw = bson::RawDocumentBuf::try_from(&holder)
        .map_err(|e| unconvertible(&format!("arguments ({e})")))?;
    let Ok(Some(RawBsonRef::Array(arr))) = raw.get("a") else {
        return Err(unconvertible("arguments"));
    };
    let mut out = Vec::with_capacity(args.len());
    for item in arr {
        out.push(value(ctx, &helpers, item.map_err(bad_bson)?)?);
    }
    Ok(out)
}

fn doc_value<'js>(
    ctx: &Ctx<'js>,
    helpers: &Object<'js>,
    doc: &RawDocument,
) -> rquickjs::Result<Value<'js>> {
    let obj = Object::new(ctx.clone())?;
    for item in doc {
        let (k, v) = item.map_err(bad_bson)?;
        obj.set(k.as_str(), value(ctx, helpers, v)?)?;
    }
    Ok(obj.into_value())
}

fn bad_bson(e: bson::error::Error) -> rquickjs::Error {
    rquickjs::Error::new_from_js_message("bson", "value", e.to_string())
}

fn call<'js>(
    helpers: &Object<'js>,
    name: &str,
    args: impl rquickjs::function::IntoArgs<'js>,
) -> rquickjs::Result<Value<'js>> {
    let f: Function = helpers.get(name)?;
    f.call(args)
}

fn value<'js>(
    ctx: &Ctx<'js>,
    helpers: &Object<'js>,
    v: RawBsonRef<'_>,
) -> rquickjs::Result<Value<'js>> {
    let ctx2 = ctx.clone();
    Ok(match v {
        RawBsonRef::Double(d) => Value::new_number(ctx2, d),
        RawBsonRef::Int32(i) => Value::new_int(ctx2, i),
        RawBsonRef::Boolean(b) => Value::new_bool(ctx2, b),
        RawBsonRef::Null => Value::new_null(ctx2),
        RawBsonRef::Undefined => Value::new_undefined(ctx2),
        RawBsonRef::String(s) => rquickjs::String::from_str(ctx2, s)?.into_value(),
        RawBsonRef::Symbol(s) => rquickjs::String::from_str(ctx2, s)?.into_value(),
        RawBsonRef::JavaScriptCode(s) => rquickjs::String::from_str(ctx2, s)?.into_value(),
        RawBsonRef::JavaScriptCodeWithScope(c) => {
            rquickjs::String::from_str(ctx2, c.code)?.into_value()
        }
        RawBsonRef::Document(d) => doc_value(ctx, helpers, d)?,
        RawBsonRef::Array(a) => {
            let arr = Array::new(ctx2)?;
            for (i, item) in a.into_iter().enumerate() {
                arr.set(i, value(ctx, helpers, item.map_err(bad_bson)?)?)?;
            }
            arr.into_value()
        }
        RawBsonRef::ObjectId(oid) => call(helpers, "oid", (oid.to_hex(),))?,
        RawBsonRef::Int64(n) => call(helpers, "long", (n.to_string(),))?,
        RawBsonRef::Decimal128(d) => call(helpers, "dec", (d.to_string(),))?,
        RawBsonRef::DateTime(dt) => call(helpers, "date", (dt.timestamp_millis() as f64,))?,
        RawBsonRef::Timestamp(ts) => call(helpers, "ts", (ts.time as f64, ts.increment as f64))?,
        RawBsonRef::Binary(b) => {
            let subtype: u8 = b.subtype.into();
            call(helpers, "bin", (subtype as i32, base64(b.bytes)))?
        }
        RawBsonRef::RegularExpression(re) => call(
            helpers,
            "re",
            (
                re.pattern.as_str().to_string(),
                re.options.as_str().to_string(),
            ),
        )?,
        // The driver keeps a DBPointer's fields private; the deprecated type
        // becomes an empty `DBPointer`.
        RawBsonRef::DbPointer(_) => call(helpers, "ptr", ())?,
        RawBsonRef::MinKey => helpers.get("minKey")?,
        RawBsonRef::MaxKey => helpers.get("maxKey")?,
    })
}

/// Values nested deeper than this do not convert back (cycles, runaway
/// structures); BSON itself stops near 100 levels.
const MAX_DEPTH: usize = 150;

/// A JavaScript value as BSON, the way mongod returns `$function` results:
/// numbers as doubles, the shell's types as the BSON types they stand for
/// (`NumberInt` int32, `NumberLong` int64, `ObjectId`, `Date`...), functions
/// as Code, `undefined` as null, other objects as documents of their own
/// enumerable properties.
pub(crate) fn to_bson<'js>(ctx: &Ctx<'js>, v: Value<'js>) -> rquickjs::Result<bson::Bson> {
    let helpers: Object = ctx.globals().get("__bson")?;
    let kind: Function = helpers.get("kind")?;
    from_value(&kind, v, 0)
}

fn unconvertible(what: &str) -> rquickjs::Error {
    rquickjs::Error::new_from_js_message("value", "BSON", what.to_string())
}

fn from_value<'js>(
    kind: &Function<'js>,
    v: Value<'js>,
    depth: usize,
) -> rquickjs::Result<bson::Bson> {
    use bson::Bson;
    if depth > MAX_DEPTH {
        return Err(unconvertible("a value nested too deeply"));
    }
    let k: String = kind.call((v.clone(),))?;
    let str_prop = |key: &str| -> rquickjs::Result<String> {
        match v.as_object() {
            Some(o) => o.get::<_, Coerced<String>>(key).map(|c| c.0),
            None => Ok(String::new()),
        }
    };
    let num_prop = |key: &str| -> rquickjs::Result<f64> {
        match v.as_object() {
            Some(o) => o.get::<_, Coerced<f64>>(key).map(|c| c.0),
            None => Ok(0.0),
        }
    };
    Ok(match k.as_str() {
        "undefined" | "null" => Bson::Null,
        "boolean" => Bson::Boolean(v.get::<Coerced<bool>>()?.0),
        "number" => Bson::Double(v.get::<Coerced<f64>>()?.0),
        "string" => Bson::String(v.get::<Coerced<String>>()?.0),
        "code" => Bson::JavaScriptCode(v.get::<Coerced<String>>()?.0),
        "minKey" => Bson::MinKey,
        "maxKey" => Bson::MaxKey,
        "oid" => match bson::oid::ObjectId::parse_str(str_prop("str")?) {
            Ok(oid) => Bson::ObjectId(oid),
            Err(_) => return Err(unconvertible("an ObjectId with an invalid hex string")),
        },
        "long" => {
            let text = match v.as_object() {
                Some(_) => str_prop("__str")?,
                None => v.get::<Coerced<String>>()?.0,
            };
            match text.parse::<i64>() {
                Ok(n) => Bson::Int64(n),
                Err(_) => return Err(unconvertible("a NumberLong out of range")),
            }
        }
        "int" => Bson::Int32(num_prop("__v")? as i32),
        "dec" => match str_prop("__str")?.parse::<bson::Decimal128>() {
            Ok(d) => Bson::Decimal128(d),
            Err(_) => return Err(unconvertible("an invalid NumberDecimal")),
        },
        "ts" => Bson::Timestamp(bson::Timestamp {
            time: num_prop("t")? as u32,
            increment: num_prop("i")? as u32,
        }),
        "bin" => match unbase64(&str_prop("__b64")?) {
            Some(bytes) => Bson::Binary(bson::Binary {
                subtype: bson::spec::BinarySubtype::from(num_prop("type")? as u8),
                bytes,
            }),
            None => return Err(unconvertible("a BinData with invalid base64")),
        },
        "date" => {
            let obj = v.as_object().ok_or_else(|| unconvertible("a Date"))?;
            let get_time: Function = obj.get("getTime")?;
            let ms: f64 = get_time.call((rquickjs::function::This(v.clone()),))?;
            if !ms.is_finite() {
                return Err(unconvertible("an invalid Date"));
            }
            Bson::DateTime(bson::DateTime::from_millis(ms as i64))
        }
        "re" => {
            let pattern = str_prop("source")?;
            let mut options: Vec<char> = str_prop("flags")?
                .chars()
                .filter(|c| matches!(c, 'i' | 'm' | 's' | 'u'))
                .collect();
            options.sort_unstable();
            let options: String = options.into_iter().collect();
            match (
                bson::raw::CString::try_from(pattern),
                bson::raw::CString::try_from(options),
            ) {
                (Ok(pattern), Ok(options)) => {
                    Bson::RegularExpression(bson::Regex { pattern, options })
                }
                _ => return Err(unconvertible("a RegExp with a NUL byte")),
            }
        }
        "array" => {
            let arr = v.as_array().ok_or_else(|| unconvertible("an array"))?;
            let mut out = Vec::with_capacity(arr.len());
            for item in arr.iter::<Value>() {
                out.push(from_value(kind, item?, depth + 1)?);
            }
            Bson::Array(out)
        }
        _ => {
            let obj = v.as_object().ok_or_else(|| unconvertible("an object"))?;
            let mut doc = bson::Document::new();
            for key in obj.keys::<String>() {
                let key = key?;
                let item: Value = obj.get(key.as_str())?;
                // Methods of the shell's helpers and other functions stay behind.
                if item.is_function() {
                    continue;
                }
                doc.insert(key, from_value(kind, item, depth + 1)?);
            }
            Bson::Document(doc)
        }
    })
}

/// Decodes standard base64 (padding optional); `None` when malformed.
fn unbase64(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in s.bytes().filter(|c| *c != b'=') {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// Standard base64 with padding (`BinData.base64()`).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_matches_rfc4648() {
        for (input, want) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(super::base64(input.as_bytes()), want);
            assert_eq!(super::unbase64(want).as_deref(), Some(input.as_bytes()));
        }
    }
}
