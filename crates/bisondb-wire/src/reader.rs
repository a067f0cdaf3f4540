//! A bounds-checked little-endian cursor over a byte slice.
//!
//! Every read either returns the value and advances, or fails without moving, so
//! parsers built on it cannot index out of bounds whatever the input says.

use crate::WireError;

/// Cursor over untrusted bytes; `what` names the structure in error messages.
pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a [u8], what: &'static str) -> Self {
        Reader { data, pos: 0, what }
    }

    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.data.len().saturating_sub(self.pos)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    fn truncated(&self, field: &str) -> WireError {
        WireError::malformed(format!("{} truncated reading {field}", self.what))
    }

    /// Takes the next `n` bytes.
    pub(crate) fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8], WireError> {
        let end = self
            .pos
            .checked_add(n)
            .ok_or_else(|| self.truncated(field))?;
        let out = self
            .data
            .get(self.pos..end)
            .ok_or_else(|| self.truncated(field))?;
        self.pos = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, field: &str) -> Result<[u8; N], WireError> {
        let bytes = self.take(N, field)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    pub(crate) fn u8(&mut self, field: &str) -> Result<u8, WireError> {
        Ok(self.array::<1>(field)?[0])
    }

    pub(crate) fn i32(&mut self, field: &str) -> Result<i32, WireError> {
        Ok(i32::from_le_bytes(self.array(field)?))
    }

    pub(crate) fn u32(&mut self, field: &str) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }

    /// Reads a NUL-terminated UTF-8 string (the terminator is consumed, not returned).
    pub(crate) fn cstr(&mut self, field: &str) -> Result<&'a str, WireError> {
        let rest = self.data.get(self.pos..).unwrap_or_default();
        let nul = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| WireError::malformed(format!("{field} is not NUL-terminated")))?;
        let bytes = self.take(nul, field)?;
        self.pos = self.pos.saturating_add(1);
        std::str::from_utf8(bytes)
            .map_err(|_| WireError::malformed(format!("{field} is not valid UTF-8")))
    }

    /// Reads one length-prefixed BSON document's extent without validating its
    /// content: declared length >= 5, inside the remaining bytes, last byte 0.
    pub(crate) fn bson_extent(&mut self, field: &str) -> Result<&'a [u8], WireError> {
        let start = self.pos;
        let len_bytes: [u8; 4] = {
            let b = self
                .data
                .get(start..start.saturating_add(4))
                .ok_or_else(|| self.truncated(field))?;
            let mut a = [0u8; 4];
            a.copy_from_slice(b);
            a
        };
        let declared = i32::from_le_bytes(len_bytes);
        let len = usize::try_from(declared)
            .ok()
            .filter(|&l| l >= 5)
            .ok_or_else(|| {
                WireError::bson(format!("{field}: document length {declared} is invalid"))
            })?;
        if len > self.remaining() {
            return Err(WireError::bson(format!(
                "{field}: document length {len} exceeds the {} bytes left",
                self.remaining()
            )));
        }
        let doc = self.take(len, field)?;
        if doc.last() != Some(&0) {
            return Err(WireError::bson(format!(
                "{field}: document is not NUL-terminated"
            )));
        }
        Ok(doc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_little_endian_and_advances() {
        let data = [1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 7, b'a', b'b', 0, 9];
        let mut r = Reader::new(&data, "test");
        assert_eq!(r.i32("a").ok(), Some(1));
        assert_eq!(r.u32("b").ok(), Some(u32::MAX));
        assert_eq!(r.u8("c").ok(), Some(7));
        assert_eq!(r.cstr("d").ok(), Some("ab"));
        assert_eq!(r.position(), 12);
        assert_eq!(r.remaining(), 1);
        assert!(r.i32("e").is_err());
        // A failed read leaves the cursor where it was.
        assert_eq!(r.position(), 12);
        assert_eq!(r.u8("f").ok(), Some(9));
        assert!(r.is_empty());
    }

    #[test]
    fn cstr_errors() {
        let cases: [&[u8]; 2] = [b"abc", &[0xff, 0]];
        for data in cases {
            assert!(Reader::new(data, "t").cstr("s").is_err(), "{data:?}");
        }
    }

    #[test]
    fn bson_extent_checks_bounds() {
        let cases: [(&[u8], bool); 6] = [
            (&[5, 0, 0, 0, 0], true),
            (&[5, 0, 0, 0, 0, 1], true),
            (&[4, 0, 0, 0, 0], false),
            (&[6, 0, 0, 0, 0], false),
            (&[5, 0, 0, 0, 1], false),
            (&[0xff, 0xff, 0xff, 0xff, 0], false),
        ];
        for (data, ok) in cases {
            let got = Reader::new(data, "t").bson_extent("doc");
            assert_eq!(got.is_ok(), ok, "{data:?}");
            if let Ok(doc) = got {
                assert_eq!(doc, &[5, 0, 0, 0, 0]);
            }
        }
    }
}
