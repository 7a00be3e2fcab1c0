//! The paging state: where a page stopped, as opaque bytes for the client
//! to hand back (see the parent module's docs).

use crate::engine::schema::TableSchema;
use crate::error::CqlError;
use crate::wire::Reader;

const PAGING_VERSION: u8 = 0xC5;

/// Where the previous page stopped.
#[derive(Debug, PartialEq)]
pub(super) struct PagingState {
    pub(super) partition: Vec<u8>,
    pub(super) clustering: Option<Vec<Vec<u8>>>,
    pub(super) remaining: Option<u32>,
    pub(super) partition_remaining: Option<u32>,
}

impl PagingState {
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut w = crate::wire::Writer::new();
        w.byte(PAGING_VERSION);
        w.bytes(Some(&self.partition));
        match &self.clustering {
            None => w.int(-1),
            Some(parts) => {
                w.len_int(parts.len());
                for p in parts {
                    w.bytes(Some(p));
                }
            }
        }
        for n in [self.remaining, self.partition_remaining] {
            w.long(n.map_or(-1, i64::from));
        }
        w.buf
    }

    pub(super) fn decode(b: &[u8], schema: &TableSchema) -> Result<PagingState, CqlError> {
        let bad = || CqlError::protocol("Invalid value for the paging state");
        let mut r = Reader::new(b);
        if r.byte().map_err(|_| bad())? != PAGING_VERSION {
            return Err(bad());
        }
        let partition = r.bytes().map_err(|_| bad())?.ok_or_else(bad)?.to_vec();
        let n = r.int().map_err(|_| bad())?;
        let clustering = if n < 0 {
            None
        } else {
            let n = usize::try_from(n).map_err(|_| bad())?;
            if n > schema.clustering.len() {
                return Err(bad());
            }
            let mut parts = Vec::with_capacity(n);
            for _ in 0..n {
                parts.push(r.bytes().map_err(|_| bad())?.ok_or_else(bad)?.to_vec());
            }
            Some(parts)
        };
        let mut count = || -> Result<Option<u32>, CqlError> {
            let v = r.long().map_err(|_| bad())?;
            if v < 0 {
                Ok(None)
            } else {
                u32::try_from(v).map(Some).map_err(|_| bad())
            }
        };
        let remaining = count()?;
        let partition_remaining = count()?;
        if r.remaining() != 0 {
            return Err(bad());
        }
        Ok(PagingState {
            partition,
            clustering,
            remaining,
            partition_remaining,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paging_state_round_trips_and_rejects_garbage() {
        let schema = crate::engine::system::test_schema();
        let s = PagingState {
            partition: b"row".to_vec(),
            clustering: Some(vec![b"col".to_vec()]),
            remaining: Some(7),
            partition_remaining: None,
        };
        assert_eq!(PagingState::decode(&s.encode(), &schema).unwrap(), s);
        for garbage in [&b""[..], &[0xC5], &[0, 1, 2], &s.encode()[..5]] {
            assert!(PagingState::decode(garbage, &schema).is_err());
        }
        let mut trailing = s.encode();
        trailing.push(0);
        assert!(PagingState::decode(&trailing, &schema).is_err());
    }
}
