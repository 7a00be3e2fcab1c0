//! Resolving a plan's operands against the values a request bound.

use lockshift_store::Timestamp;

use crate::engine::compile::{BindSpec, InOperand, Operand};
use crate::engine::data::PartitionKey;
use crate::error::CqlError;
use crate::value;
use crate::wire::Value;

/// The longest partition key or clustering component Cassandra stores.
pub(crate) const MAX_KEY_BYTES: usize = 65_535;

/// Bound values of one statement execution.
#[derive(Debug)]
pub(crate) struct Bound<'a> {
    values: &'a [Value],
    specs: &'a [BindSpec],
    pub(crate) now: Timestamp,
}

impl<'a> Bound<'a> {
    /// Checks the count of `values` against the statement's markers.
    pub(crate) fn new(
        values: &'a [Value],
        specs: &'a [BindSpec],
        now: Timestamp,
    ) -> Result<Bound<'a>, CqlError> {
        if values.len() != specs.len() {
            return Err(CqlError::invalid(format!(
                "Invalid amount of bind variables: expected {}, got {}",
                specs.len(),
                values.len()
            )));
        }
        Ok(Bound { values, specs, now })
    }

    /// The value of `op`, type-checked against its marker's spec.
    pub(crate) fn value(&self, op: &Operand) -> Result<Value, CqlError> {
        Ok(match op {
            Operand::Const(None) => Value::Null,
            Operand::Const(Some(b)) => Value::Bytes(b.clone()),
            Operand::Marker(i) => {
                let (Some(v), Some(spec)) = (self.values.get(*i), self.specs.get(*i)) else {
                    return Err(CqlError::server(format!("bind marker {i} out of range")));
                };
                if let Value::Bytes(b) = v {
                    spec.ty.validate(b).map_err(|e| {
                        CqlError::invalid(format!("Invalid value bound to {}: {e}", spec.name))
                    })?;
                }
                v.clone()
            }
            Operand::Now => Value::Bytes(timeuuid(self.now).to_vec()),
            Operand::RandomUuid => {
                let u = uuid::Builder::from_random_bytes(rand::random()).into_uuid();
                Value::Bytes(u.as_bytes().to_vec())
            }
            Operand::CurrentTimestamp => {
                Value::Bytes((self.now.as_micros() / 1000).to_be_bytes().to_vec())
            }
            Operand::Token(parts) => {
                let mut comps = Vec::new();
                for p in parts {
                    comps.push(self.bytes(p, "token() argument")?);
                }
                let refs: Vec<&[u8]> = comps.iter().map(Vec::as_slice).collect();
                Value::Bytes(PartitionKey::new(&refs).token.to_be_bytes().to_vec())
            }
        })
    }

    /// The bytes of `op`; null and unset are errors naming `what`.
    pub(crate) fn bytes(&self, op: &Operand, what: &str) -> Result<Vec<u8>, CqlError> {
        match self.value(op)? {
            Value::Bytes(b) => Ok(b),
            Value::Null => Err(CqlError::invalid(format!("Invalid null value for {what}"))),
            Value::Unset => Err(CqlError::invalid(format!("Invalid unset value for {what}"))),
        }
    }

    /// The values of an `=` / `IN`, for column `what`.
    pub(crate) fn list(&self, op: &InOperand, what: &str) -> Result<Vec<Vec<u8>>, CqlError> {
        match op {
            InOperand::List(ops) => ops
                .iter()
                .map(|o| {
                    self.bytes(o, &format!("column {what}")).map_err(|e| {
                        if e.message.starts_with("Invalid null") {
                            CqlError::invalid(format!(
                                "Invalid null value in condition for column {what}"
                            ))
                        } else {
                            e
                        }
                    })
                })
                .collect(),
            InOperand::Marker(i) => {
                let b = self.bytes(&Operand::Marker(*i), &format!("IN restriction on {what}"))?;
                let elems = value::elements_of(&b).ok_or_else(|| {
                    CqlError::invalid(format!("Invalid list value for IN restriction on {what}"))
                })?;
                Ok(elems.into_iter().map(<[u8]>::to_vec).collect())
            }
        }
    }

    /// An `int` operand such as LIMIT; `None` if unset or absent.
    pub(crate) fn int(&self, op: Option<&Operand>, what: &str) -> Result<Option<i32>, CqlError> {
        let Some(op) = op else { return Ok(None) };
        match self.value(op)? {
            Value::Unset => Ok(None),
            Value::Null => Err(CqlError::invalid(format!("Invalid null value of {what}"))),
            Value::Bytes(b) => value::as_i32(&b)
                .map(Some)
                .ok_or_else(|| CqlError::invalid(format!("Invalid value of {what}"))),
        }
    }
}

/// Checks a key component's size (Cassandra's 64 KiB limit) and, for the
/// partition key, that it is not empty.
pub(crate) fn check_key_component(bytes: &[u8], partition: bool) -> Result<(), CqlError> {
    if partition && bytes.is_empty() {
        return Err(CqlError::invalid("Key may not be empty"));
    }
    if bytes.len() > MAX_KEY_BYTES {
        return Err(CqlError::invalid(format!(
            "Key length of {} is longer than maximum of {MAX_KEY_BYTES}",
            bytes.len()
        )));
    }
    Ok(())
}

/// Every combination of one value per list (`IN` on several columns).
pub(crate) fn cartesian(lists: Vec<Vec<Vec<u8>>>) -> Result<Vec<Vec<Vec<u8>>>, CqlError> {
    const MAX: usize = 100_000;
    let mut out: Vec<Vec<Vec<u8>>> = vec![Vec::new()];
    for list in lists {
        if out.len().saturating_mul(list.len()) > MAX {
            return Err(CqlError::invalid(format!(
                "IN restrictions select more than {MAX} keys (cartesian product)"
            )));
        }
        let mut next = Vec::with_capacity(out.len() * list.len());
        for prefix in &out {
            for v in &list {
                let mut p = prefix.clone();
                p.push(v.clone());
                next.push(p);
            }
        }
        out = next;
    }
    Ok(out)
}

/// A version-1 uuid for `now()`: the clock's time, random clock sequence and node.
fn timeuuid(now: Timestamp) -> [u8; 16] {
    // 100 ns intervals since 1582-10-15, the uuid epoch.
    const UUID_EPOCH_OFFSET: i64 = 0x01B2_1DD2_1381_4000;
    let t = (now.as_micros().saturating_mul(10)).saturating_add(UUID_EPOCH_OFFSET) as u64;
    let mut b: [u8; 16] = rand::random();
    b[0..4].copy_from_slice(&((t & 0xffff_ffff) as u32).to_be_bytes());
    b[4..6].copy_from_slice(&(((t >> 32) & 0xffff) as u16).to_be_bytes());
    b[6..8].copy_from_slice(&((((t >> 48) & 0x0fff) as u16) | 0x1000).to_be_bytes());
    b[8] = (b[8] & 0x3f) | 0x80;
    b
}

/// Partition keys of the given per-column values, sorted and distinct.
pub(crate) fn partition_keys(per_column: Vec<Vec<Vec<u8>>>) -> Result<Vec<PartitionKey>, CqlError> {
    for list in &per_column {
        for v in list {
            check_key_component(v, true)?;
        }
    }
    let mut keys: Vec<PartitionKey> = cartesian(per_column)?
        .iter()
        .map(|combo| {
            let refs: Vec<&[u8]> = combo.iter().map(Vec::as_slice).collect();
            PartitionKey::new(&refs)
        })
        .collect();
    keys.sort();
    keys.dedup();
    Ok(keys)
}
