//! CQL data types: their names in CQL text and `system_schema`, their
//! `[option]` ids in result metadata, and the byte checks a bound value must
//! pass before it is stored.

use std::fmt;

use crate::wire::Writer;

/// A CQL type. `Frozen` only changes how the type is written; the endpoint
/// stores every collection as one atomic value (see the crate docs).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum CqlType {
    Ascii,
    Bigint,
    Blob,
    Boolean,
    Counter,
    Date,
    Decimal,
    Double,
    Duration,
    Float,
    Inet,
    Int,
    Smallint,
    Text,
    Time,
    Timestamp,
    Timeuuid,
    Tinyint,
    Uuid,
    Varint,
    List(Box<CqlType>),
    Set(Box<CqlType>),
    Map(Box<CqlType>, Box<CqlType>),
    Tuple(Vec<CqlType>),
    Frozen(Box<CqlType>),
}

impl CqlType {
    /// A simple (non-parameterised) type by its CQL name.
    pub(crate) fn simple(name: &str) -> Option<CqlType> {
        use CqlType::*;
        Some(match name.to_ascii_lowercase().as_str() {
            "ascii" => Ascii,
            "bigint" => Bigint,
            "blob" => Blob,
            "boolean" => Boolean,
            "counter" => Counter,
            "date" => Date,
            "decimal" => Decimal,
            "double" => Double,
            "duration" => Duration,
            "float" => Float,
            "inet" => Inet,
            "int" => Int,
            "smallint" => Smallint,
            "text" | "varchar" => Text,
            "time" => Time,
            "timestamp" => Timestamp,
            "timeuuid" => Timeuuid,
            "tinyint" => Tinyint,
            "uuid" => Uuid,
            "varint" => Varint,
            _ => return None,
        })
    }

    /// The type without a `frozen<>` wrapper.
    pub(crate) fn unfrozen(&self) -> &CqlType {
        match self {
            CqlType::Frozen(inner) => inner.unfrozen(),
            other => other,
        }
    }

    /// Whether the type is a collection or tuple that must be frozen to be
    /// part of a primary key.
    pub(crate) fn is_multi_cell(&self) -> bool {
        matches!(self, CqlType::List(_) | CqlType::Set(_) | CqlType::Map(..))
    }

    /// The element type a `list<T>` marker binds, for `IN ?`.
    pub(crate) fn list_of(elem: CqlType) -> CqlType {
        CqlType::List(Box::new(elem))
    }

    /// Writes the type as a result-metadata `[option]`.
    pub(crate) fn encode_option(&self, w: &mut Writer) {
        use CqlType::*;
        let id: u16 = match self {
            Frozen(inner) => return inner.encode_option(w),
            Ascii => 0x01,
            Bigint => 0x02,
            Blob => 0x03,
            Boolean => 0x04,
            Counter => 0x05,
            Decimal => 0x06,
            Double => 0x07,
            Float => 0x08,
            Int => 0x09,
            Timestamp => 0x0B,
            Uuid => 0x0C,
            Text => 0x0D,
            Varint => 0x0E,
            Timeuuid => 0x0F,
            Inet => 0x10,
            Date => 0x11,
            Time => 0x12,
            Smallint => 0x13,
            Tinyint => 0x14,
            Duration => 0x15,
            List(_) => 0x20,
            Map(..) => 0x21,
            Set(_) => 0x22,
            Tuple(_) => 0x31,
        };
        w.short(id);
        match self {
            List(e) | Set(e) => e.encode_option(w),
            Map(k, v) => {
                k.encode_option(w);
                v.encode_option(w);
            }
            Tuple(items) => {
                w.short(u16::try_from(items.len()).unwrap_or(u16::MAX));
                for t in items {
                    t.encode_option(w);
                }
            }
            _ => {}
        }
    }

    /// The fixed serialised width of the type, if it has one.
    fn fixed_len(&self) -> Option<usize> {
        use CqlType::*;
        match self {
            Bigint | Counter | Double | Timestamp | Time => Some(8),
            Int | Float | Date => Some(4),
            Smallint => Some(2),
            Tinyint | Boolean => Some(1),
            Uuid | Timeuuid => Some(16),
            _ => None,
        }
    }

    /// Checks that `bytes` is a well-formed value of this type; the message
    /// says what is wrong. Empty values are accepted for every type, as
    /// Cassandra does.
    pub(crate) fn validate(&self, bytes: &[u8]) -> Result<(), String> {
        use CqlType::*;
        if bytes.is_empty() {
            return Ok(());
        }
        if let Some(n) = self.fixed_len() {
            if bytes.len() != n {
                return Err(format!(
                    "expected {n} bytes for a {self} value, got {}",
                    bytes.len()
                ));
            }
            return Ok(());
        }
        match self {
            Frozen(inner) => inner.validate(bytes),
            Text => std::str::from_utf8(bytes)
                .map(|_| ())
                .map_err(|_| "invalid UTF-8 bytes for a text value".to_string()),
            Ascii => {
                if bytes.is_ascii() {
                    Ok(())
                } else {
                    Err("invalid bytes for an ascii value (non-ASCII)".to_string())
                }
            }
            Inet => match bytes.len() {
                4 | 16 => Ok(()),
                n => Err(format!("expected 4 or 16 bytes for an inet value, got {n}")),
            },
            Decimal => {
                if bytes.len() >= 5 {
                    Ok(())
                } else {
                    Err("a decimal value needs at least 5 bytes".to_string())
                }
            }
            List(e) | Set(e) => validate_collection(bytes, &[e.as_ref()]),
            Map(k, v) => validate_collection(bytes, &[k.as_ref(), v.as_ref()]),
            Tuple(items) => validate_tuple(bytes, items),
            _ => Ok(()),
        }
    }
}

/// Reads a v4 collection: `[int n]` then n groups of `[bytes]` elements.
fn validate_collection(bytes: &[u8], group: &[&CqlType]) -> Result<(), String> {
    let mut r = crate::wire::Reader::new(bytes);
    let n = r.int().map_err(|e| e.message)?;
    if n < 0 {
        return Err("a collection has a negative element count".to_string());
    }
    for _ in 0..n {
        for t in group {
            match r.bytes().map_err(|e| e.message)? {
                Some(elem) => t.validate(elem)?,
                None => return Err("collections may not contain null".to_string()),
            }
        }
    }
    if r.remaining() != 0 {
        return Err("a collection value has trailing bytes".to_string());
    }
    Ok(())
}

fn validate_tuple(bytes: &[u8], items: &[CqlType]) -> Result<(), String> {
    let mut r = crate::wire::Reader::new(bytes);
    for t in items {
        if r.remaining() == 0 {
            break;
        }
        if let Some(elem) = r.bytes().map_err(|e| e.message)? {
            t.validate(elem)?;
        }
    }
    if r.remaining() != 0 {
        return Err("a tuple value has trailing bytes".to_string());
    }
    Ok(())
}

/// The CQL spelling, as `system_schema.columns.type` holds it.
impl fmt::Display for CqlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use CqlType::*;
        let name = match self {
            Ascii => "ascii",
            Bigint => "bigint",
            Blob => "blob",
            Boolean => "boolean",
            Counter => "counter",
            Date => "date",
            Decimal => "decimal",
            Double => "double",
            Duration => "duration",
            Float => "float",
            Inet => "inet",
            Int => "int",
            Smallint => "smallint",
            Text => "text",
            Time => "time",
            Timestamp => "timestamp",
            Timeuuid => "timeuuid",
            Tinyint => "tinyint",
            Uuid => "uuid",
            Varint => "varint",
            List(e) => return write!(f, "list<{e}>"),
            Set(e) => return write!(f, "set<{e}>"),
            Map(k, v) => return write!(f, "map<{k}, {v}>"),
            Tuple(items) => {
                f.write_str("frozen<tuple<")?;
                for (i, t) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{t}")?;
                }
                return f.write_str(">>");
            }
            Frozen(inner) => match inner.as_ref() {
                // A tuple is always frozen and already says so.
                Tuple(_) => return write!(f, "{inner}"),
                _ => return write!(f, "frozen<{inner}>"),
            },
        };
        f.write_str(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_system_schema_spelling() {
        let t = CqlType::Frozen(Box::new(CqlType::Map(
            Box::new(CqlType::Text),
            Box::new(CqlType::Text),
        )));
        assert_eq!(t.to_string(), "frozen<map<text, text>>");
        assert_eq!(
            CqlType::Set(Box::new(CqlType::Text)).to_string(),
            "set<text>"
        );
        assert_eq!(CqlType::simple("VARCHAR"), Some(CqlType::Text));
    }

    #[test]
    fn validation_catches_width_utf8_and_collection_shape() {
        assert!(CqlType::Int.validate(&[0, 0, 0, 1]).is_ok());
        assert!(CqlType::Int.validate(&[0, 0, 1]).is_err());
        assert!(CqlType::Text.validate(&[0xff]).is_err());
        let set = CqlType::Set(Box::new(CqlType::Int));
        assert!(set.validate(&[0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 7]).is_ok());
        assert!(set.validate(&[0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 7]).is_err());
        assert!(set.validate(&[0, 0, 0, 2, 0, 0, 0, 4, 0, 0, 0, 7]).is_err());
    }
}
