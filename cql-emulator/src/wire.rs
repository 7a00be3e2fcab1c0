//! The notation of the CQL native protocol v4 (§3 of the spec): `[int]`,
//! `[string]`, `[bytes]`, `[value]` and friends, read from a request body and
//! written into a response body.
//!
//! [`Reader`] never panics and never allocates more than the input holds: every
//! length is checked against the bytes left before anything is copied, so a
//! request claiming a 2 GiB string in a 40-byte body is a protocol error, not
//! an allocation.

use crate::error::CqlError;

/// A bound value as the protocol carries it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Value {
    /// `[value]` length -1.
    Null,
    /// `[value]` length -2 (v4): leave the target untouched.
    Unset,
    /// The serialised value.
    Bytes(Vec<u8>),
}

/// A cursor over a request body.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

fn short(what: &str) -> CqlError {
    CqlError::protocol(format!("not enough bytes to read {what}"))
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len()
    }

    pub(crate) fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], CqlError> {
        if n > self.buf.len() {
            return Err(short(what));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], CqlError> {
        let bytes = self.take(N, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    pub(crate) fn byte(&mut self) -> Result<u8, CqlError> {
        Ok(self.array::<1>("a [byte]")?[0])
    }

    pub(crate) fn short(&mut self) -> Result<u16, CqlError> {
        Ok(u16::from_be_bytes(self.array("a [short]")?))
    }

    pub(crate) fn int(&mut self) -> Result<i32, CqlError> {
        Ok(i32::from_be_bytes(self.array("an [int]")?))
    }

    pub(crate) fn long(&mut self) -> Result<i64, CqlError> {
        Ok(i64::from_be_bytes(self.array("a [long]")?))
    }

    /// `[string]`: a short length and UTF-8.
    pub(crate) fn string(&mut self) -> Result<&'a str, CqlError> {
        let n = usize::from(self.short()?);
        let bytes = self.take(n, "a [string]")?;
        std::str::from_utf8(bytes).map_err(|_| CqlError::protocol("a [string] is not valid UTF-8"))
    }

    /// `[long string]`: an int length and UTF-8.
    pub(crate) fn long_string(&mut self) -> Result<&'a str, CqlError> {
        let n = self.int()?;
        let n = usize::try_from(n)
            .map_err(|_| CqlError::protocol("a [long string] has a negative length"))?;
        let bytes = self.take(n, "a [long string]")?;
        std::str::from_utf8(bytes)
            .map_err(|_| CqlError::protocol("a [long string] is not valid UTF-8"))
    }

    /// `[short bytes]`.
    pub(crate) fn short_bytes(&mut self) -> Result<&'a [u8], CqlError> {
        let n = usize::from(self.short()?);
        self.take(n, "[short bytes]")
    }

    /// `[bytes]`: `None` for a negative length.
    pub(crate) fn bytes(&mut self) -> Result<Option<&'a [u8]>, CqlError> {
        let n = self.int()?;
        if n < 0 {
            return Ok(None);
        }
        // A non-negative i32 always fits in usize on the platforms tokio runs on.
        let n = usize::try_from(n).map_err(|_| CqlError::protocol("[bytes] too long"))?;
        self.take(n, "[bytes]").map(Some)
    }

    /// `[value]`: bytes, null (-1) or unset (-2).
    pub(crate) fn value(&mut self) -> Result<Value, CqlError> {
        let n = self.int()?;
        match n {
            -1 => Ok(Value::Null),
            -2 => Ok(Value::Unset),
            n if n < 0 => Err(CqlError::protocol(format!(
                "a [value] has the invalid length {n}"
            ))),
            n => {
                let n = usize::try_from(n).map_err(|_| CqlError::protocol("[value] too long"))?;
                Ok(Value::Bytes(self.take(n, "a [value]")?.to_vec()))
            }
        }
    }

    /// `[string map]`.
    pub(crate) fn string_map(&mut self) -> Result<Vec<(&'a str, &'a str)>, CqlError> {
        let n = self.short()?;
        let mut out = Vec::new();
        for _ in 0..n {
            let k = self.string()?;
            let v = self.string()?;
            out.push((k, v));
        }
        Ok(out)
    }

    /// `[string list]`.
    pub(crate) fn string_list(&mut self) -> Result<Vec<&'a str>, CqlError> {
        let n = self.short()?;
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(self.string()?);
        }
        Ok(out)
    }

    /// `[bytes map]` (custom payloads): read and dropped.
    pub(crate) fn skip_bytes_map(&mut self) -> Result<(), CqlError> {
        let n = self.short()?;
        for _ in 0..n {
            self.string()?;
            self.bytes()?;
        }
        Ok(())
    }
}

/// A response body being built.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    pub(crate) buf: Vec<u8>,
}

impl Writer {
    pub(crate) fn new() -> Self {
        Writer { buf: Vec::new() }
    }

    pub(crate) fn byte(&mut self, v: u8) {
        self.buf.push(v);
    }

    pub(crate) fn short(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    pub(crate) fn int(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    pub(crate) fn long(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// A length that must fit the protocol's `i32`; larger values are clamped
    /// (callers never produce them: frames are capped far below 2 GiB).
    pub(crate) fn len_int(&mut self, n: usize) {
        self.int(i32::try_from(n).unwrap_or(i32::MAX));
    }

    /// `[string]`; strings longer than 65535 bytes are truncated at a char
    /// boundary (only server-made messages go through here).
    pub(crate) fn string(&mut self, s: &str) {
        let mut end = s.len().min(usize::from(u16::MAX));
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.short(u16::try_from(end).unwrap_or(u16::MAX));
        self.buf.extend_from_slice(&s.as_bytes()[..end]);
    }

    pub(crate) fn short_bytes(&mut self, b: &[u8]) {
        let end = b.len().min(usize::from(u16::MAX));
        self.short(u16::try_from(end).unwrap_or(u16::MAX));
        self.buf.extend_from_slice(&b[..end]);
    }

    /// `[bytes]`; `None` is null.
    pub(crate) fn bytes(&mut self, b: Option<&[u8]>) {
        match b {
            None => self.int(-1),
            Some(b) => {
                self.len_int(b.len());
                self.buf.extend_from_slice(b);
            }
        }
    }

    pub(crate) fn string_list(&mut self, items: &[&str]) {
        self.short(u16::try_from(items.len()).unwrap_or(u16::MAX));
        for s in items {
            self.string(s);
        }
    }

    pub(crate) fn string_multimap(&mut self, entries: &[(&str, &[&str])]) {
        self.short(u16::try_from(entries.len()).unwrap_or(u16::MAX));
        for (k, v) in entries {
            self.string(k);
            self.string_list(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_beyond_the_body_are_errors_not_allocations() {
        let body = [0x7f, 0xff, 0xff, 0xff, b'a'];
        assert!(Reader::new(&body).long_string().is_err());
        assert!(Reader::new(&body).bytes().is_err());
        assert!(Reader::new(&[0xff, 0xff]).string().is_err());
        assert!(Reader::new(&[]).int().is_err());
    }

    #[test]
    fn value_distinguishes_null_unset_and_rejects_other_negatives() {
        let mut w = Writer::new();
        w.int(-1);
        w.int(-2);
        w.int(2);
        w.buf.extend_from_slice(b"hi");
        w.int(-3);
        let mut r = Reader::new(&w.buf);
        assert_eq!(r.value().unwrap(), Value::Null);
        assert_eq!(r.value().unwrap(), Value::Unset);
        assert_eq!(r.value().unwrap(), Value::Bytes(b"hi".to_vec()));
        assert!(r.value().is_err());
    }

    #[test]
    fn strings_round_trip_and_truncate_on_char_boundary() {
        let mut w = Writer::new();
        w.string("héllo");
        let mut r = Reader::new(&w.buf);
        assert_eq!(r.string().unwrap(), "héllo");
        let long = "é".repeat(40_000);
        let mut w = Writer::new();
        w.string(&long);
        let mut r = Reader::new(&w.buf);
        let s = r.string().unwrap();
        assert!(s.len() <= 65_535 && s.chars().all(|c| c == 'é'));
    }
}
