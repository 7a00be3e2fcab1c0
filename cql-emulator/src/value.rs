//! CQL values as bytes: constants of the statement text turned into their
//! serialised form for a column's type, the sort order of each type (for
//! clustering keys and set elements), and small encoders / decoders the
//! system tables and the fault table use.
//!
//! The engine stores and compares serialised bytes only; [`Collation`] is
//! the one place that knows how a type sorts.

use std::cmp::Ordering;
use std::net::IpAddr;

use crate::error::CqlError;
use crate::parse::ast::{Literal, Term};
use crate::types::CqlType;

// ===== Collation =====

/// How serialised values of a type compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Collation {
    /// Unsigned byte order: text, ascii, blob, inet, boolean, date, and
    /// (an approximation) decimal, duration and frozen collections.
    Bytes,
    /// Fixed-width two's complement: int, bigint, smallint, tinyint,
    /// timestamp, time, counter.
    Signed,
    /// Variable-width two's complement.
    Varint,
    Float,
    Double,
    /// Cassandra's UUIDType: version, then time for v1, then bytes.
    Uuid,
    /// TimeUUIDType: time, then bytes.
    TimeUuid,
}

impl Collation {
    pub(crate) fn of(ty: &CqlType) -> Collation {
        use CqlType::*;
        match ty.unfrozen() {
            Int | Bigint | Smallint | Tinyint | Timestamp | Time | Counter => Collation::Signed,
            Varint => Collation::Varint,
            Float => Collation::Float,
            Double => Collation::Double,
            Uuid => Collation::Uuid,
            Timeuuid => Collation::TimeUuid,
            _ => Collation::Bytes,
        }
    }

    /// Compares two valid serialised values; the empty value sorts first.
    pub(crate) fn compare(self, a: &[u8], b: &[u8]) -> Ordering {
        match (a.is_empty(), b.is_empty()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Less,
            (false, true) => return Ordering::Greater,
            _ => {}
        }
        match self {
            Collation::Bytes => a.cmp(b),
            Collation::Signed => signed_cmp(a, b),
            Collation::Varint => {
                let neg = |x: &[u8]| x[0] & 0x80 != 0;
                match (neg(a), neg(b)) {
                    (true, false) => Ordering::Less,
                    (false, true) => Ordering::Greater,
                    (n, _) => {
                        let by_len = a.len().cmp(&b.len());
                        let by_len = if n { by_len.reverse() } else { by_len };
                        by_len.then_with(|| signed_cmp(a, b))
                    }
                }
            }
            Collation::Float => match (<[u8; 4]>::try_from(a), <[u8; 4]>::try_from(b)) {
                (Ok(x), Ok(y)) => f32::from_be_bytes(x).total_cmp(&f32::from_be_bytes(y)),
                _ => a.cmp(b),
            },
            Collation::Double => match (<[u8; 8]>::try_from(a), <[u8; 8]>::try_from(b)) {
                (Ok(x), Ok(y)) => f64::from_be_bytes(x).total_cmp(&f64::from_be_bytes(y)),
                _ => a.cmp(b),
            },
            Collation::Uuid => {
                let version = |x: &[u8]| x.get(6).map_or(0, |v| v >> 4);
                version(a).cmp(&version(b)).then_with(|| {
                    if version(a) == 1 {
                        uuid_time(a).cmp(&uuid_time(b)).then_with(|| a.cmp(b))
                    } else {
                        a.cmp(b)
                    }
                })
            }
            Collation::TimeUuid => uuid_time(a).cmp(&uuid_time(b)).then_with(|| a.cmp(b)),
        }
    }
}

fn signed_cmp(a: &[u8], b: &[u8]) -> Ordering {
    if a.len() != b.len() {
        return a.len().cmp(&b.len());
    }
    (a[0] as i8)
        .cmp(&(b[0] as i8))
        .then_with(|| a[1..].cmp(&b[1..]))
}

/// The 60-bit timestamp of a version-1 uuid.
fn uuid_time(u: &[u8]) -> u64 {
    if u.len() != 16 {
        return 0;
    }
    let hi = (u64::from(u[6] & 0x0f) << 8) | u64::from(u[7]);
    let mid = (u64::from(u[4]) << 8) | u64::from(u[5]);
    let low = u64::from(u32::from_be_bytes([u[0], u[1], u[2], u[3]]));
    (hi << 48) | (mid << 32) | low
}

// ===== Constants =====

fn literal_text(lit: &Literal) -> String {
    match lit {
        Literal::Str(s) | Literal::Int(s) | Literal::Float(s) => s.clone(),
        Literal::Bool(b) => b.to_string(),
        Literal::Uuid(u) => u.to_string(),
        other => other.kind().to_lowercase(),
    }
}

/// The serialised value of constant `lit` for `receiver` of type `ty`;
/// `None` for `null`.
pub(crate) fn from_literal(
    ty: &CqlType,
    lit: &Literal,
    receiver: &str,
) -> Result<Option<Vec<u8>>, CqlError> {
    use CqlType as T;
    use Literal as L;
    let bad = || {
        CqlError::invalid(format!(
            "Invalid {} constant ({}) for \"{receiver}\" of type {ty}",
            lit.kind(),
            literal_text(lit)
        ))
    };
    let int = |s: &str| s.parse::<i128>().map_err(|_| bad());
    let out = match (ty.unfrozen(), lit) {
        (_, L::Null) => return Ok(None),
        (T::Text, L::Str(s)) => s.as_bytes().to_vec(),
        (T::Ascii, L::Str(s)) if s.is_ascii() => s.as_bytes().to_vec(),
        (T::Blob, L::Hex(h)) => h.clone(),
        (T::Boolean, L::Bool(b)) => vec![u8::from(*b)],
        (T::Int, L::Int(s)) => i32::try_from(int(s)?).map_err(|_| bad())?.to_be_bytes().to_vec(),
        (T::Bigint, L::Int(s)) => i64::try_from(int(s)?).map_err(|_| bad())?.to_be_bytes().to_vec(),
        (T::Smallint, L::Int(s)) => i16::try_from(int(s)?).map_err(|_| bad())?.to_be_bytes().to_vec(),
        (T::Tinyint, L::Int(s)) => i8::try_from(int(s)?).map_err(|_| bad())?.to_be_bytes().to_vec(),
        (T::Varint, L::Int(s)) => varint(int(s)?),
        (T::Float, L::Int(s) | L::Float(s)) => parse_float(s).map_err(|_| bad())?.to_be_bytes().to_vec(),
        (T::Double, L::Int(s) | L::Float(s)) => parse_double(s).map_err(|_| bad())?.to_be_bytes().to_vec(),
        (T::Decimal, L::Int(s) | L::Float(s)) => decimal(s).ok_or_else(bad)?,
        (T::Timestamp, L::Int(s)) => i64::try_from(int(s)?).map_err(|_| bad())?.to_be_bytes().to_vec(),
        (T::Timestamp, L::Str(s)) => parse_timestamp(s).ok_or_else(|| {
            CqlError::invalid(format!(
                "Unable to parse a date/time from '{s}' for \"{receiver}\" (use yyyy-mm-dd[ HH:MM[:SS[.fff]]][zone])"
            ))
        })?.to_be_bytes().to_vec(),
        (T::Date, L::Str(s)) => parse_date(s).ok_or_else(bad)?.to_be_bytes().to_vec(),
        (T::Date, L::Int(s)) => u32::try_from(int(s)?).map_err(|_| bad())?.to_be_bytes().to_vec(),
        (T::Time, L::Str(s)) => parse_time(s).ok_or_else(bad)?.to_be_bytes().to_vec(),
        (T::Time, L::Int(s)) => i64::try_from(int(s)?).map_err(|_| bad())?.to_be_bytes().to_vec(),
        (T::Uuid, L::Uuid(u)) => u.as_bytes().to_vec(),
        (T::Timeuuid, L::Uuid(u)) if u.get_version_num() == 1 => u.as_bytes().to_vec(),
        (T::Inet, L::Str(s)) => match s.parse::<IpAddr>().map_err(|_| bad())? {
            IpAddr::V4(a) => a.octets().to_vec(),
            IpAddr::V6(a) => a.octets().to_vec(),
        },
        (T::List(e), L::List(items)) => {
            let elems = elements(e, items, receiver)?;
            collection(elems.iter().map(Vec::as_slice))
        }
        (T::Set(e), L::Set(items) | L::List(items)) => {
            let mut elems = elements(e, items, receiver)?;
            let c = Collation::of(e);
            elems.sort_by(|a, b| c.compare(a, b));
            elems.dedup();
            collection(elems.iter().map(Vec::as_slice))
        }
        (T::Set(_), L::Map(entries)) if entries.is_empty() => collection(std::iter::empty()),
        (T::Map(k, v), L::Map(entries)) => {
            let mut pairs = Vec::with_capacity(entries.len());
            for (kt, vt) in entries {
                let key = element(k, kt, receiver)?;
                let val = element(v, vt, receiver)?;
                pairs.push((key, val));
            }
            let c = Collation::of(k);
            pairs.sort_by(|a, b| c.compare(&a.0, &b.0));
            pairs.dedup_by(|a, b| a.0 == b.0);
            map(pairs.iter().map(|(k, v)| (k.as_slice(), v.as_slice())))
        }
        (T::Tuple(types), L::Tuple(items)) if items.len() <= types.len() => {
            let mut out = Vec::new();
            for (t, item) in types.iter().zip(items) {
                match item {
                    Term::Literal(l) => match from_literal(t, l, receiver)? {
                        Some(b) => push_bytes(&mut out, &b),
                        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
                    },
                    _ => return Err(nested_term(receiver)),
                }
            }
            out
        }
        (T::Duration, _) => {
            return Err(CqlError::invalid(
                "duration constants are not supported by the lockshift CQL emulator; bind the value instead",
            ));
        }
        _ => return Err(bad()),
    };
    Ok(Some(out))
}

fn nested_term(receiver: &str) -> CqlError {
    CqlError::invalid(format!(
        "bind markers and function calls inside collection constants are not supported \
         by the lockshift CQL emulator (for \"{receiver}\"); bind the whole collection"
    ))
}

fn element(ty: &CqlType, term: &Term, receiver: &str) -> Result<Vec<u8>, CqlError> {
    match term {
        Term::Literal(l) => from_literal(ty, l, receiver)?
            .ok_or_else(|| CqlError::invalid("null is not supported inside collections")),
        _ => Err(nested_term(receiver)),
    }
}

fn elements(ty: &CqlType, items: &[Term], receiver: &str) -> Result<Vec<Vec<u8>>, CqlError> {
    items.iter().map(|t| element(ty, t, receiver)).collect()
}

fn parse_float(s: &str) -> Result<f32, ()> {
    match s {
        "NaN" => Ok(f32::NAN),
        "Infinity" => Ok(f32::INFINITY),
        "-Infinity" => Ok(f32::NEG_INFINITY),
        _ => s.parse().map_err(|_| ()),
    }
}

fn parse_double(s: &str) -> Result<f64, ()> {
    match s {
        "NaN" => Ok(f64::NAN),
        "Infinity" => Ok(f64::INFINITY),
        "-Infinity" => Ok(f64::NEG_INFINITY),
        _ => s.parse().map_err(|_| ()),
    }
}

/// Minimal big-endian two's complement.
pub(crate) fn varint(v: i128) -> Vec<u8> {
    let bytes = v.to_be_bytes();
    let mut start = 0;
    while start < 15 {
        let (b, next) = (bytes[start], bytes[start + 1]);
        if (b == 0 && next & 0x80 == 0) || (b == 0xff && next & 0x80 != 0) {
            start += 1;
        } else {
            break;
        }
    }
    bytes[start..].to_vec()
}

/// `[int scale][varint unscaled]` of a decimal written in the statement.
fn decimal(s: &str) -> Option<Vec<u8>> {
    let (mantissa, exp) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], s[i + 1..].parse::<i32>().ok()?),
        None => (s, 0),
    };
    let (int_part, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{int_part}{frac}");
    let unscaled: i128 = digits.parse().ok()?;
    let scale = i32::try_from(frac.len()).ok()?.checked_sub(exp)?;
    let mut out = scale.to_be_bytes().to_vec();
    out.extend(varint(unscaled));
    Some(out)
}

// ===== Dates and times =====

/// Days since 1970-01-01 of a proleptic Gregorian date (Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn parse_ymd(s: &str) -> Option<(i64, &str)> {
    let (y, rest) = s.split_once('-')?;
    let (m, rest) = rest.split_once('-')?;
    let d_len = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let (d, rest) = rest.split_at(d_len);
    let (y, m, d) = (
        y.parse::<i64>().ok()?,
        m.parse::<u32>().ok()?,
        d.parse::<u32>().ok()?,
    );
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || y.unsigned_abs() > 1_000_000 {
        return None;
    }
    Some((days_from_civil(y, m, d), rest))
}

/// `HH:MM[:SS[.fraction]]` → nanoseconds of the day, and the rest.
fn parse_hms(s: &str) -> Option<(i64, &str)> {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == ':' || c == '.'))
        .unwrap_or(s.len());
    let (clock, rest) = s.split_at(end);
    let mut parts = clock.splitn(3, ':');
    let h: i64 = parts.next()?.parse().ok()?;
    let m: i64 = parts.next()?.parse().ok()?;
    let (sec, nanos) = match parts.next() {
        None => (0, 0),
        Some(sec) => {
            let (whole, frac) = sec.split_once('.').unwrap_or((sec, ""));
            if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let nanos = if frac.is_empty() {
                0
            } else {
                format!("{frac:0<9}").parse::<i64>().ok()?
            };
            (whole.parse::<i64>().ok()?, nanos)
        }
    };
    if h > 23 || m > 59 || sec > 59 {
        return None;
    }
    Some((((h * 60 + m) * 60 + sec) * 1_000_000_000 + nanos, rest))
}

/// A CQL timestamp string → milliseconds since the epoch. Without a zone the
/// time is UTC.
pub(crate) fn parse_timestamp(s: &str) -> Option<i64> {
    let (days, rest) = parse_ymd(s.trim())?;
    let (nanos, rest) = match rest.strip_prefix(['T', ' ']) {
        Some(t) => parse_hms(t)?,
        None => (0, rest),
    };
    let offset_minutes = match rest.trim() {
        "" | "Z" | "z" => 0,
        zone => {
            let sign = match zone.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let digits: String = zone[1..].chars().filter(|c| *c != ':').collect();
            if digits.len() != 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let h: i64 = digits[..2].parse().ok()?;
            let m: i64 = digits[2..].parse().ok()?;
            sign * (h * 60 + m)
        }
    };
    Some(days * 86_400_000 + nanos / 1_000_000 - offset_minutes * 60_000)
}

/// `yyyy-mm-dd` → the `date` encoding (days since the epoch, centred on 2^31).
fn parse_date(s: &str) -> Option<u32> {
    let (days, rest) = parse_ymd(s.trim())?;
    if !rest.is_empty() {
        return None;
    }
    u32::try_from(days + (1i64 << 31)).ok()
}

fn parse_time(s: &str) -> Option<i64> {
    match parse_hms(s.trim())? {
        (nanos, "") => Some(nanos),
        _ => None,
    }
}

// ===== Encoders =====

fn push_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&i32::try_from(b.len()).unwrap_or(i32::MAX).to_be_bytes());
    out.extend_from_slice(b);
}

/// A v4 list or set: `[int n]` then each element as `[bytes]`.
pub(crate) fn collection<'a>(items: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut body = Vec::new();
    let mut n: i32 = 0;
    for item in items {
        push_bytes(&mut body, item);
        n = n.saturating_add(1);
    }
    let mut out = n.to_be_bytes().to_vec();
    out.extend(body);
    out
}

/// A v4 map: `[int n]` then key and value `[bytes]` pairs.
pub(crate) fn map<'a>(pairs: impl Iterator<Item = (&'a [u8], &'a [u8])>) -> Vec<u8> {
    let mut body = Vec::new();
    let mut n: i32 = 0;
    for (k, v) in pairs {
        push_bytes(&mut body, k);
        push_bytes(&mut body, v);
        n = n.saturating_add(1);
    }
    let mut out = n.to_be_bytes().to_vec();
    out.extend(body);
    out
}

/// A `set<text>` / `list<text>` of strings (sorted by the caller for sets).
pub(crate) fn text_collection(items: &[&str]) -> Vec<u8> {
    collection(items.iter().map(|s| s.as_bytes()))
}

/// A `map<text, text>`, keys sorted.
pub(crate) fn text_map(pairs: &[(&str, &str)]) -> Vec<u8> {
    let mut sorted = pairs.to_vec();
    sorted.sort();
    map(sorted.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())))
}

pub(crate) fn inet(addr: IpAddr) -> Vec<u8> {
    match addr {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

// ===== Decoders =====

pub(crate) fn as_i32(b: &[u8]) -> Option<i32> {
    Some(i32::from_be_bytes(b.try_into().ok()?))
}

pub(crate) fn as_i64(b: &[u8]) -> Option<i64> {
    Some(i64::from_be_bytes(b.try_into().ok()?))
}

pub(crate) fn as_f64(b: &[u8]) -> Option<f64> {
    Some(f64::from_be_bytes(b.try_into().ok()?))
}

/// The elements of a serialised list or set.
pub(crate) fn elements_of(b: &[u8]) -> Option<Vec<&[u8]>> {
    let mut r = crate::wire::Reader::new(b);
    let n = r.int().ok()?;
    let mut out = Vec::new();
    for _ in 0..n.max(0) {
        out.push(r.bytes().ok()??);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(ty: CqlType, l: Literal) -> Result<Option<Vec<u8>>, CqlError> {
        from_literal(&ty, &l, "c")
    }

    #[test]
    fn constants_convert_by_receiver_type() {
        assert_eq!(
            lit(CqlType::Int, Literal::Int("-2".into())).unwrap(),
            Some(vec![0xff, 0xff, 0xff, 0xfe])
        );
        assert_eq!(
            lit(CqlType::Bigint, Literal::Int("1".into()))
                .unwrap()
                .unwrap()
                .len(),
            8
        );
        assert_eq!(lit(CqlType::Text, Literal::Null).unwrap(), None);
        let e = lit(CqlType::Int, Literal::Str("x".into())).unwrap_err();
        assert_eq!(
            e.message,
            "Invalid STRING constant (x) for \"c\" of type int"
        );
        assert!(lit(CqlType::Int, Literal::Int("9999999999".into())).is_err());
        assert!(lit(CqlType::Tinyint, Literal::Int("128".into())).is_err());
        assert_eq!(
            lit(CqlType::Varint, Literal::Int("128".into())).unwrap(),
            Some(vec![0, 0x80])
        );
        assert_eq!(
            lit(CqlType::Varint, Literal::Int("-1".into())).unwrap(),
            Some(vec![0xff])
        );
        assert_eq!(
            lit(CqlType::Decimal, Literal::Float("1.25".into())).unwrap(),
            Some(vec![0, 0, 0, 2, 0x7d])
        );
    }

    #[test]
    fn sets_are_sorted_and_deduplicated() {
        let set = CqlType::Set(Box::new(CqlType::Int));
        let items = ["3", "-1", "3"]
            .map(|s| Term::Literal(Literal::Int(s.into())))
            .to_vec();
        let b = lit(set, Literal::Set(items)).unwrap().unwrap();
        let elems = elements_of(&b).unwrap();
        assert_eq!(
            elems,
            vec![&[0xff, 0xff, 0xff, 0xff][..], &[0, 0, 0, 3][..]]
        );
    }

    #[test]
    fn timestamps_parse_with_zones() {
        assert_eq!(parse_timestamp("1970-01-01"), Some(0));
        assert_eq!(parse_timestamp("1970-01-02 00:00:01.5"), Some(86_401_500));
        assert_eq!(
            parse_timestamp("2024-02-29T12:00:00+0100"),
            Some(1_709_204_400_000)
        );
        assert_eq!(
            parse_timestamp("2024-02-29T12:00:00Z"),
            Some(1_709_208_000_000)
        );
        assert_eq!(parse_timestamp("nope"), None);
        assert_eq!(parse_date("1970-01-01"), Some(1 << 31));
        assert_eq!(parse_time("00:00:01.000000002"), Some(1_000_000_002));
    }

    #[test]
    fn collations_order_like_cassandra() {
        let s = Collation::Signed;
        assert_eq!(
            s.compare(&(-1i32).to_be_bytes(), &1i32.to_be_bytes()),
            Ordering::Less
        );
        assert_eq!(s.compare(&[], &0i32.to_be_bytes()), Ordering::Less);
        let v = Collation::Varint;
        assert_eq!(v.compare(&varint(-300), &varint(-1)), Ordering::Less);
        assert_eq!(v.compare(&varint(300), &varint(127)), Ordering::Greater);
        assert_eq!(Collation::Bytes.compare(b"b", b"ab"), Ordering::Greater);
        let d = Collation::Double;
        assert_eq!(
            d.compare(&(-0.5f64).to_be_bytes(), &2f64.to_be_bytes()),
            Ordering::Less
        );
    }
}
