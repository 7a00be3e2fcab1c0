//! The ranges a SELECT walks: clustering ranges in storage order, and
//! partition ranges by token.

use std::cmp::Ordering;
use std::ops::Bound;

use crate::engine::bind::{self, Bound as Values};
use crate::engine::compile::{ClusteringSel, SliceBound, is_desc};
use crate::engine::data::{Clustering, Edge, PartitionKey};
use crate::engine::schema::TableSchema;
use crate::error::CqlError;
use crate::wire::Value;

/// The clustering ranges `sel` selects, in storage order, non-empty.
pub(crate) fn clustering_ranges(
    schema: &TableSchema,
    sel: &ClusteringSel,
    values: &Values,
) -> Result<Vec<(Clustering, Clustering)>, CqlError> {
    let mut lists = Vec::new();
    for (pos, op) in sel.prefix.iter().enumerate() {
        let name = &schema.columns[schema.clustering[pos]].name;
        let list = values.list(op, name)?;
        for v in &list {
            bind::check_key_component(v, false)?;
        }
        lists.push(list);
    }
    let prefixes = bind::cartesian(lists)?;
    let slice_pos = sel.prefix.len();
    let slice_name = schema
        .clustering
        .get(slice_pos)
        .map(|&i| schema.columns[i].name.clone())
        .unwrap_or_default();
    let resolve = |b: &SliceBound| -> Result<Option<(Vec<u8>, bool)>, CqlError> {
        match b {
            None => Ok(None),
            Some((op, incl)) => match values.value(op)? {
                Value::Bytes(v) => Ok(Some((v, *incl))),
                Value::Null => Err(CqlError::invalid(format!(
                    "Invalid null value in condition for column {slice_name}"
                ))),
                Value::Unset => Err(CqlError::invalid(format!(
                    "Invalid unset value for column {slice_name}"
                ))),
            },
        }
    };
    let (lower, upper) = match &sel.slice {
        Some((lo, hi)) => (resolve(lo)?, resolve(hi)?),
        None => (None, None),
    };
    let desc = is_desc(schema, slice_pos);
    let mut ranges = Vec::new();
    for prefix in prefixes {
        let with = |v: &[u8]| {
            let mut p = prefix.clone();
            p.push(v.to_vec());
            schema.key_parts(p)
        };
        let mut start = Clustering::bound(schema.key_parts(prefix.clone()), Edge::Before);
        let mut end = Clustering::bound(schema.key_parts(prefix.clone()), Edge::After);
        // Value order → storage order: a DESC column stores larger values first.
        if let Some((v, incl)) = &lower {
            let b = if desc {
                Clustering::bound(with(v), if *incl { Edge::After } else { Edge::Before })
            } else {
                Clustering::bound(with(v), if *incl { Edge::Before } else { Edge::After })
            };
            if desc { end = b } else { start = b }
        }
        if let Some((v, incl)) = &upper {
            let b = if desc {
                Clustering::bound(with(v), if *incl { Edge::Before } else { Edge::After })
            } else {
                Clustering::bound(with(v), if *incl { Edge::After } else { Edge::Before })
            };
            if desc { start = b } else { end = b }
        }
        if start <= end {
            ranges.push((start, end));
        }
    }
    ranges.sort_by(|a, b| a.0.cmp(&b.0));
    ranges.dedup_by(|a, b| a.0 == b.0);
    Ok(ranges)
}

pub(super) fn token_bound(
    values: &Values,
    b: &SliceBound,
    lower: bool,
) -> Result<Bound<PartitionKey>, CqlError> {
    let Some((op, incl)) = b else {
        return Ok(Bound::Unbounded);
    };
    let bytes = values.bytes(op, "token bound")?;
    let t = crate::value::as_i64(&bytes)
        .ok_or_else(|| CqlError::invalid("a token bound must be a bigint"))?;
    let at = |token: i64| PartitionKey {
        token,
        bytes: Vec::new(),
    };
    // Keys with token t are all >= (t, []): real keys are never empty.
    Ok(match (lower, *incl) {
        (true, true) => Bound::Included(at(t)),
        (true, false) => match t.checked_add(1) {
            Some(n) => Bound::Included(at(n)),
            None => Bound::Excluded(at(i64::MAX)),
        },
        (false, true) => match t.checked_add(1) {
            Some(n) => Bound::Excluded(at(n)),
            None => Bound::Unbounded,
        },
        (false, false) => Bound::Excluded(at(t)),
    })
}

/// Whether `BTreeMap::range` accepts the bounds (it panics otherwise) and
/// they can hold anything.
pub(super) fn valid_range<K: Ord>(lo: &Bound<K>, hi: &Bound<K>) -> bool {
    match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a <= b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b)) => a < b,
        _ => true,
    }
}

pub(super) fn later_lower(a: Bound<PartitionKey>, b: Bound<PartitionKey>) -> Bound<PartitionKey> {
    match (&a, &b) {
        (Bound::Unbounded, _) => b,
        (_, Bound::Unbounded) => a,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            match x.cmp(y) {
                Ordering::Less => b,
                Ordering::Greater => a,
                Ordering::Equal => {
                    if matches!(a, Bound::Excluded(_)) {
                        a
                    } else {
                        b
                    }
                }
            }
        }
    }
}
