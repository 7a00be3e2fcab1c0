//! Cassandra's `Murmur3Partitioner`: the token, and the full 128-bit hash
//! the endpoint's ids are made from.
//!
//! The token is the first 64 bits of MurmurHash3 x64/128 (seed 0) over the
//! serialised partition key, with Cassandra's quirk of sign-extending the
//! tail bytes, and `i64::MIN` mapped to `i64::MAX`. Drivers compute the same
//! token to route requests, and `token(pk)` in CQL returns it, so it must
//! match bit for bit. [`token`] therefore takes it from the scylla driver's
//! own `Murmur3Partitioner` (as `lockshift_store::tombstones::token` does):
//! the driver routes by exactly that function.
//!
//! [`hash3_x64_128`] stays here because the driver cannot give it: its
//! `Murmur3PartitionerHasher` keeps the second half (`h2`) private and
//! `finish()` returns the token built from `h1` alone. The endpoint needs
//! both halves for its stable ids — the system tables' `table_id`
//! (`engine/schema.rs`) and the prepared `statement_id`
//! (`connection/requests.rs`; the crate's invariant 4) — and deriving them
//! any other way would change ids on the wire. The known-answer tests below
//! pin both functions.

use scylla::routing::partitioner::{Murmur3Partitioner, Partitioner};

fn fmix(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

/// MurmurHash3 x64/128 as Cassandra computes it: `(h1, h2)`.
pub(crate) fn hash3_x64_128(data: &[u8]) -> (u64, u64) {
    const C1: u64 = 0x87c3_7b91_1142_53d5;
    const C2: u64 = 0x4cf5_ad43_2745_937f;
    let mut h1: u64 = 0;
    let mut h2: u64 = 0;
    let blocks = data.chunks_exact(16);
    let tail = blocks.remainder();
    for block in blocks {
        let mut b1 = [0u8; 8];
        let mut b2 = [0u8; 8];
        b1.copy_from_slice(&block[..8]);
        b2.copy_from_slice(&block[8..]);
        let mut k1 = u64::from_le_bytes(b1);
        let mut k2 = u64::from_le_bytes(b2);
        k1 = k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
        h1 ^= k1;
        h1 = h1
            .rotate_left(27)
            .wrapping_add(h2)
            .wrapping_mul(5)
            .wrapping_add(0x52dc_e729);
        k2 = k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
        h2 ^= k2;
        h2 = h2
            .rotate_left(31)
            .wrapping_add(h1)
            .wrapping_mul(5)
            .wrapping_add(0x3849_5ab5);
    }
    // Cassandra reads tail bytes as signed Java bytes widened to long.
    let byte = |i: usize| i64::from(tail[i] as i8) as u64;
    let mut k1: u64 = 0;
    let mut k2: u64 = 0;
    for i in (8..tail.len()).rev() {
        k2 ^= byte(i) << ((i - 8) * 8);
    }
    if tail.len() > 8 {
        k2 = k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
        h2 ^= k2;
    }
    for i in (0..tail.len().min(8)).rev() {
        k1 ^= byte(i) << (i * 8);
    }
    if !tail.is_empty() {
        k1 = k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
        h1 ^= k1;
    }
    let len = data.len() as u64;
    h1 ^= len;
    h2 ^= len;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix(h1);
    h2 = fmix(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    (h1, h2)
}

/// The Murmur3 token of a serialised partition key, as the scylla driver
/// computes it for routing.
pub(crate) fn token(key: &[u8]) -> i64 {
    Murmur3Partitioner.hash_one(key).value()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known answers, computed by a port of this file's `hash3_x64_128`;
    /// `token(b"a")` is Cassandra's well-known value. The keys cover every
    /// length class: empty, tails only (1, 6, 8 and 9 bytes; negative
    /// tail bytes), one block with a 15-byte tail, exactly one block, one block
    /// with a 1-byte tail, and two blocks with an 8-byte tail of bytes ≥ 0x80.
    fn vectors() -> Vec<(Vec<u8>, i64)> {
        vec![
            (b"".to_vec(), 0),
            (b"a".to_vec(), -8_839_064_797_231_613_815),
            (b"accounts".to_vec(), -7_741_244_793_638_564_076),
            (b"lock-1".to_vec(), -8_383_611_471_097_051_267),
            ((0..15).collect(), 5_125_964_547_706_398_185),
            ((0..16).collect(), 4_920_504_430_128_807_728),
            ((0..17).collect(), 6_662_781_046_685_680_142),
            (vec![0xff; 9], 8_434_364_767_658_694_854),
            ((0x80..0xa8).collect(), -6_654_227_320_360_086_743),
        ]
    }

    /// The token the endpoint serves (`token(pk)`, and the one a driver
    /// routes by) is Cassandra's.
    #[test]
    fn token_gives_the_known_answers() {
        for (i, (key, want)) in vectors().into_iter().enumerate() {
            assert_eq!(token(&key), want, "case #{i}: key {key:02x?}");
        }
    }

    /// The first half of our own hash is that same token, so the ids made
    /// from the full hash come from Cassandra's Murmur3 and not a variant.
    #[test]
    fn hash3_first_half_is_the_token() {
        for (i, (key, want)) in vectors().into_iter().enumerate() {
            assert_eq!(
                hash3_x64_128(&key).0 as i64,
                want,
                "case #{i}: key {key:02x?}"
            );
        }
    }

    /// Both halves, pinned through the system tables' stable id:
    /// `table_id("lockshift", "main")` hashes `"lockshift.main"` and lays
    /// `h1` then `h2` out big-endian. If this changes, table ids in
    /// `system_schema.tables` and prepared statement ids change on the wire.
    #[test]
    fn ids_do_not_change() {
        let (h1, h2) = hash3_x64_128(b"lockshift.main");
        let mut bytes = h1.to_be_bytes().to_vec();
        bytes.extend_from_slice(&h2.to_be_bytes());
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "6b2d7893bf58bcbdc7848fb8783a454e");
    }
}
