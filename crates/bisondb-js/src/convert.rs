//! BSON -> JavaScript, the way mongod hands documents to server-side scripts:
//! numbers (double, int) as numbers, strings, booleans, `null`, `undefined`,
//! arrays and objects as such, dates as `Date`, regular expressions as
//! `RegExp`, and the types JavaScript lacks as the shell's objects:
//! `ObjectId` (`.str`), `NumberLong` (`valueOf` is the number, so comparisons
//! work), `NumberDecimal`, `Timestamp`, `BinData`, `MinKey`/`MaxKey`.

use bson::raw::{RawBsonRef, RawDocument};
use rquickjs::{Array, Ctx, Function, Object, Value};

/// The document as a JavaScript object.
pub(crate) fn document<'js>(ctx: &Ctx<'js>, doc: &RawDocument) -> rquickjs::Result<Value<'js>> {
    let helpers: Object = ctx.globals().get("__bson")?;
    doc_value(ctx, &helpers, doc)
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
        }
    }
}
