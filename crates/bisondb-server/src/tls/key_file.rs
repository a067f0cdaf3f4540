//! `--keyFile` / `security.keyFile`: the shared secret of a replica set's
//! members, read and checked at start-up as mongod does. The file must not be
//! readable by group or others; each key is 6 to 1024 base64 characters once
//! whitespace is removed. Since MongoDB 4.2 a key file may be a YAML list of
//! keys (key rotation); the first is the one a member presents.

use std::path::{Path, PathBuf};

use bisondb_error::{ErrorCode, MongoError, MongoResult};

/// A validated key file.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyFile {
    pub path: PathBuf,
    /// The keys, whitespace removed, in file order (never empty).
    keys: Vec<String>,
}

impl std::fmt::Debug for KeyFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyFile")
            .field("path", &self.path)
            .field("keys", &self.keys.len())
            .finish()
    }
}

impl KeyFile {
    /// Reads and validates `path`.
    pub fn load(path: &Path) -> MongoResult<KeyFile> {
        let shown = path.display();
        let meta = std::fs::metadata(path)
            .map_err(|e| invalid(format!("Error reading file {shown}: {e}")))?;
        if !meta.is_file() {
            return Err(invalid(format!(
                "Error reading file {shown}: not a regular file"
            )));
        }
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(invalid(format!("permissions on {shown} are too open")));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| invalid(format!("Error reading file {shown}: {e}")))?;
        let keys = parse_keys(&text, &shown.to_string())?;
        Ok(KeyFile {
            path: path.to_path_buf(),
            keys,
        })
    }

    /// The key this server presents (and with which the replica-set code signs
    /// `$clusterTime`): the first key, whitespace removed.
    pub fn key(&self) -> &str {
        &self.keys[0]
    }

    /// Every key the file holds: during a key rotation a member accepts any.
    pub fn keys(&self) -> &[String] {
        &self.keys
    }
}

/// The keys of a key file's text: a YAML list of strings, or one key (a YAML
/// string, or raw text YAML cannot read).
fn parse_keys(text: &str, shown: &str) -> MongoResult<Vec<String>> {
    let raw: Vec<String> = match serde_yaml::from_str::<serde_yaml::Value>(text) {
        Ok(serde_yaml::Value::Sequence(items)) => {
            let mut keys = Vec::with_capacity(items.len());
            for item in items {
                match item {
                    serde_yaml::Value::String(s) => keys.push(s),
                    _ => {
                        return Err(invalid(format!(
                            "Error reading file {shown}: a key file list must hold strings"
                        )))
                    }
                }
            }
            keys
        }
        Ok(serde_yaml::Value::String(s)) => vec![s],
        _ => vec![text.to_string()],
    };
    let mut keys = Vec::with_capacity(raw.len());
    for key in raw {
        let key: String = key.chars().filter(|c| !c.is_whitespace()).collect();
        if key.is_empty() {
            return Err(invalid(format!("Security key in {shown} is empty")));
        }
        if let Some(c) = key
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '+' || *c == '/' || *c == '='))
        {
            return Err(invalid(format!("invalid char in key file {shown}: {c}")));
        }
        if !(6..=1024).contains(&key.len()) {
            return Err(invalid(format!(
                "security key in {shown} has length {}, must be between 6 and 1024 chars",
                key.len()
            )));
        }
        keys.push(key);
    }
    if keys.is_empty() {
        return Err(invalid(format!("Security key in {shown} is empty")));
    }
    Ok(keys)
}

fn invalid(msg: String) -> MongoError {
    MongoError::new(ErrorCode::InvalidOptions, msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn write(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    #[test]
    fn valid_keys() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "k", "abc def\nghi+/=\n", 0o600);
        assert_eq!(KeyFile::load(&p).unwrap().key(), "abcdefghi+/=");
        let p = write(dir.path(), "l", "- key1one\n- key2two\n", 0o400);
        let k = KeyFile::load(&p).unwrap();
        assert_eq!(k.keys(), ["key1one", "key2two"]);
        assert!(!format!("{k:?}").contains("key1one"));
    }

    #[test]
    fn refusals_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "open", "abcdefgh", 0o644);
        let e = KeyFile::load(&p).unwrap_err().message;
        assert_eq!(e, format!("permissions on {} are too open", p.display()));
        let p = write(dir.path(), "short", "abc", 0o600);
        assert!(KeyFile::load(&p)
            .unwrap_err()
            .message
            .contains("has length 3, must be between 6 and 1024 chars"));
        let p = write(dir.path(), "long", &"a".repeat(1025), 0o600);
        assert!(KeyFile::load(&p)
            .unwrap_err()
            .message
            .contains("length 1025"));
        let p = write(dir.path(), "bad", "abcdef$gh", 0o600);
        assert!(KeyFile::load(&p)
            .unwrap_err()
            .message
            .contains("invalid char in key file"));
        let p = write(dir.path(), "empty", "  \n", 0o600);
        assert!(KeyFile::load(&p).unwrap_err().message.contains("is empty"));
        let missing = dir.path().join("missing");
        assert!(KeyFile::load(&missing)
            .unwrap_err()
            .message
            .contains(&missing.display().to_string()));
    }
}
