//! mongodump's directory layout, read and written the same way by both tools:
//! `DIR/<db>/<coll>.bson` holds the collection's documents back to back (each
//! a complete BSON document, nothing between them), `<coll>.metadata.json`
//! one Extended JSON v2 (canonical) object `{options, indexes, uuid,
//! collectionName, type}`; with `--gzip` both files are gzip streams named
//! `.bson.gz` and `.metadata.json.gz`. File names are the collection name
//! escaped as Go's `url.QueryEscape` does (what mongodump uses), and a name
//! whose escaped form is longer than 238 bytes is cut to 208 bytes plus `%24`
//! and the URL-safe base64 SHA-1 of the whole name, as mongodump 100.x cuts
//! it; `collectionName` in the metadata then says what it was.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use bson::{doc, Bson, Document, RawDocumentBuf};
use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use sha1::Digest as _;

use crate::{Result, ToolError};

/// The longest document a `.bson` file may hold: mongod's 16 MiB plus the
/// 16 KiB it allows internal documents over that (what mongorestore accepts).
pub const MAX_DOCUMENT: usize = 16 * 1024 * 1024 + 16 * 1024;

/// Escaped names longer than this are cut (mongodump's bound, leaving room for
/// `.metadata.json.gz` in a 255-byte file name).
const MAX_ESCAPED: usize = 238;
const CUT_TO: usize = 208;

/// What a collection is, as the metadata's `type` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Collection,
    View,
    Timeseries,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Collection => "collection",
            Kind::View => "view",
            Kind::Timeseries => "timeseries",
        }
    }

    /// The kind `listCollections` or a metadata file gives (`type`); without
    /// one, what the options imply (dumps older than the `type` field).
    pub fn parse(kind: Option<&str>, options: &Document) -> Kind {
        match kind {
            Some("view") => Kind::View,
            Some("timeseries") => Kind::Timeseries,
            Some(_) => Kind::Collection,
            None if options.contains_key("viewOn") => Kind::View,
            None if options.contains_key("timeseries") => Kind::Timeseries,
            None => Kind::Collection,
        }
    }
}

/// One `<coll>.metadata.json`.
#[derive(Clone, Debug, PartialEq)]
pub struct Metadata {
    pub options: Document,
    pub indexes: Vec<Document>,
    /// The collection's UUID as 32 hex digits (mongodump's form), if it has one.
    pub uuid: Option<String>,
    pub collection_name: String,
    pub kind: Kind,
}

impl Metadata {
    /// The file's text: canonical Extended JSON, fields in mongodump's order,
    /// `options` and `uuid` left out when empty as mongodump leaves them out.
    pub fn to_json(&self) -> Result<String> {
        let mut d = Document::new();
        if !self.options.is_empty() {
            d.insert("options", self.options.clone());
        }
        d.insert(
            "indexes",
            self.indexes
                .iter()
                .cloned()
                .map(Bson::Document)
                .collect::<Vec<_>>(),
        );
        if let Some(u) = &self.uuid {
            d.insert("uuid", u.clone());
        }
        d.insert("collectionName", self.collection_name.clone());
        d.insert("type", self.kind.as_str());
        Ok(serde_json::to_string(
            &Bson::Document(d).into_canonical_extjson(),
        )?)
    }

    /// Reads a metadata file's text (canonical or relaxed Extended JSON, as
    /// every mongodump version wrote one); `fallback_name` names the
    /// collection when the file does not (dumps older than the field).
    pub fn from_json(text: &str, fallback_name: &str) -> Result<Metadata> {
        let value: serde_json::Value = serde_json::from_str(text)?;
        let Bson::Document(d) =
            Bson::try_from(value).map_err(|e| ToolError::new(format!("not Extended JSON: {e}")))?
        else {
            return Err(ToolError::new("the metadata is not a JSON object"));
        };
        let options = match d.get("options") {
            Some(Bson::Document(o)) => o.clone(),
            None | Some(Bson::Null) => Document::new(),
            Some(other) => {
                return Err(ToolError::new(format!(
                    "metadata options must be an object, not {other}"
                )))
            }
        };
        let mut indexes = Vec::new();
        match d.get("indexes") {
            Some(Bson::Array(a)) => {
                for i in a {
                    match i {
                        Bson::Document(spec) => indexes.push(spec.clone()),
                        other => {
                            return Err(ToolError::new(format!(
                                "an index in the metadata is not an object: {other}"
                            )))
                        }
                    }
                }
            }
            None | Some(Bson::Null) => {}
            Some(other) => {
                return Err(ToolError::new(format!(
                    "metadata indexes must be an array, not {other}"
                )))
            }
        }
        let kind = Kind::parse(d.get_str("type").ok(), &options);
        Ok(Metadata {
            options,
            indexes,
            uuid: d.get_str("uuid").ok().map(str::to_owned),
            collection_name: d
                .get_str("collectionName")
                .map(str::to_owned)
                .unwrap_or_else(|_| fallback_name.to_owned()),
            kind,
        })
    }
}

/// A collection name as a file name (without extension), as mongodump makes it.
pub fn file_stem(name: &str) -> String {
    let escaped = query_escape(name);
    if escaped.len() <= MAX_ESCAPED {
        return escaped;
    }
    // Cut on a byte boundary: the escaped form is ASCII.
    let hash = sha1::Sha1::digest(name.as_bytes());
    let tail = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(hash);
    format!("{}%24{tail}", &escaped[..CUT_TO])
}

/// Go's `url.QueryEscape`: letters, digits and `-_.~` stay, a space becomes
/// `+`, every other byte `%XX`.
fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

/// The reverse of [`query_escape`]; `None` when `s` is not a valid escape.
pub fn query_unescape(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = s.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// `DIR/<db>/<stem><ext>`, with `.gz` after it when gzipped.
pub fn path(dir: &Path, db: &str, stem: &str, ext: &str, gzip: bool) -> PathBuf {
    let gz = if gzip { ".gz" } else { "" };
    dir.join(db).join(format!("{stem}{ext}{gz}"))
}

/// A file being written, gzipped or not; [`Output::finish`] must be called to
/// learn whether the end of it reached the disk.
pub enum Output {
    Plain(BufWriter<File>),
    Gzip(GzEncoder<BufWriter<File>>),
}

impl Output {
    pub fn create(path: &Path, gzip: bool) -> Result<Output> {
        let file = File::create(path)
            .map_err(|e| ToolError::new(format!("cannot create {}: {e}", path.display())))?;
        let w = BufWriter::with_capacity(1 << 20, file);
        Ok(if gzip {
            Output::Gzip(GzEncoder::new(w, flate2::Compression::default()))
        } else {
            Output::Plain(w)
        })
    }

    pub fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Output::Plain(w) => w.write_all(bytes),
            Output::Gzip(w) => w.write_all(bytes),
        }
    }

    pub fn finish(self) -> std::io::Result<()> {
        let w = match self {
            Output::Plain(w) => w,
            Output::Gzip(g) => g.finish()?,
        };
        w.into_inner().map_err(|e| e.into_error())?.sync_all()
    }
}

/// Opens a dump file for reading, through gzip when its name ends in `.gz`.
pub fn open(path: &Path) -> Result<Box<dyn Read + Send>> {
    let file = File::open(path)
        .map_err(|e| ToolError::new(format!("cannot open {}: {e}", path.display())))?;
    let r = BufReader::with_capacity(1 << 20, file);
    Ok(if path.extension().is_some_and(|e| e == "gz") {
        Box::new(BufReader::new(MultiGzDecoder::new(r)))
    } else {
        Box::new(r)
    })
}

/// Reads a whole (small) file, through gzip when its name ends in `.gz`.
pub fn read_to_string(path: &Path) -> Result<String> {
    let mut s = String::new();
    open(path)?
        .read_to_string(&mut s)
        .map_err(|e| ToolError::new(format!("cannot read {}: {e}", path.display())))?;
    Ok(s)
}

/// The documents of a `.bson` file, one at a time.
pub struct BsonReader {
    r: Box<dyn Read + Send>,
    what: String,
}

impl BsonReader {
    pub fn open(path: &Path) -> Result<BsonReader> {
        Ok(BsonReader {
            r: open(path)?,
            what: path.display().to_string(),
        })
    }

    /// The next document; `None` at a clean end of file.
    pub fn next_document(&mut self) -> Result<Option<RawDocumentBuf>> {
        let mut len = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            match self.r.read(&mut len[got..]) {
                Ok(0) if got == 0 => return Ok(None),
                Ok(0) => return Err(self.corrupt("the file ends inside a length")),
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ToolError::new(format!("{}: {e}", self.what))),
            }
        }
        let n = i32::from_le_bytes(len);
        let size = usize::try_from(n).unwrap_or(0);
        if !(5..=MAX_DOCUMENT).contains(&size) {
            return Err(self.corrupt(&format!("invalid document length {n}")));
        }
        let mut bytes = vec![0u8; size];
        bytes[..4].copy_from_slice(&len);
        self.r.read_exact(&mut bytes[4..]).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                self.corrupt("the file ends inside a document")
            } else {
                ToolError::new(format!("{}: {e}", self.what))
            }
        })?;
        if bytes[size - 1] != 0 {
            return Err(self.corrupt("a document does not end in a zero byte"));
        }
        RawDocumentBuf::from_bytes(bytes)
            .map(Some)
            .map_err(|e| self.corrupt(&e.to_string()))
    }

    fn corrupt(&self, why: &str) -> ToolError {
        ToolError::new(format!("{} is not a BSON dump: {why}", self.what))
    }
}

/// The `_id` index: every collection has it, so restore never builds it.
pub fn is_id_index(spec: &Document) -> bool {
    spec.get_str("name").is_ok_and(|n| n == "_id_")
        || spec
            .get_document("key")
            .is_ok_and(|k| *k == doc! {"_id": 1})
            && !spec.contains_key("partialFilterExpression")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_escape_as_mongodump_does() {
        assert_eq!(file_stem("plain_name-1.x~"), "plain_name-1.x~");
        assert_eq!(file_stem("a b/c$d%é"), "a+b%2Fc%24d%25%C3%A9");
        assert_eq!(
            query_unescape("a+b%2Fc%24d%25%C3%A9").as_deref(),
            Some("a b/c$d%é")
        );
        assert_eq!(query_unescape("bad%2"), None);
        let long = "x".repeat(300);
        let stem = file_stem(&long);
        assert_eq!(stem.len(), 208 + 3 + 27, "{stem}");
        assert!(stem.starts_with(&"x".repeat(208)) && stem[208..].starts_with("%24"));
    }

    #[test]
    fn metadata_round_trips_in_canonical_extended_json() {
        let m = Metadata {
            options: doc! {"capped": true, "size": 4096_i64, "max": 10},
            indexes: vec![doc! {"v": 2, "key": {"_id": 1}, "name": "_id_"}],
            uuid: Some("0123456789abcdef0123456789abcdef".into()),
            collection_name: "c".into(),
            kind: Kind::Collection,
        };
        let text = m.to_json().unwrap();
        assert_eq!(
            text,
            r#"{"options":{"capped":true,"size":{"$numberLong":"4096"},"max":{"$numberInt":"10"}},"indexes":[{"v":{"$numberInt":"2"},"key":{"_id":{"$numberInt":"1"}},"name":"_id_"}],"uuid":"0123456789abcdef0123456789abcdef","collectionName":"c","type":"collection"}"#
        );
        assert_eq!(Metadata::from_json(&text, "other").unwrap(), m);
        // An old dump: relaxed numbers, no type, no name.
        let old = Metadata::from_json(
            r#"{"options":{"viewOn":"c","pipeline":[]},"indexes":[]}"#,
            "v",
        )
        .unwrap();
        assert_eq!(old.kind, Kind::View);
        assert_eq!(old.collection_name, "v");
    }
}
