//! Cassandra's `Murmur3Partitioner` token: the first 64 bits of
//! MurmurHash3 x64/128 (seed 0) over the serialised partition key, with
//! Cassandra's quirk of sign-extending the tail bytes, and `i64::MIN`
//! mapped to `i64::MAX`. Drivers compute the same token to route requests,
//! and `token(pk)` in CQL returns it, so it must match bit for bit.

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

/// The Murmur3 token of a serialised partition key.
pub(crate) fn token(key: &[u8]) -> i64 {
    let t = hash3_x64_128(key).0 as i64;
    if t == i64::MIN { i64::MAX } else { t }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use scylla::routing::partitioner::{Murmur3Partitioner, Partitioner};

    use super::*;

    proptest! {
        /// The driver routes by its own Murmur3; ours must agree on every
        /// length class (blocks, 1..=15-byte tails, negative tail bytes).
        #[test]
        fn matches_the_scylla_driver(key in proptest::collection::vec(any::<u8>(), 0..80)) {
            prop_assert_eq!(token(&key), Murmur3Partitioner.hash_one(&key).value());
        }
    }
}
