//! Storage tests: clustering order with edges and DESC columns, and the
//! deletion invariants 1–4 of `engine::data` without going through CQL.

use super::*;

fn part(raw: &[u8], desc: bool) -> KeyPart {
    KeyPart {
        raw: raw.to_vec(),
        collation: Collation::Signed,
        desc,
    }
}

fn key(vals: &[i32], desc: bool) -> Clustering {
    Clustering::exact(vals.iter().map(|v| part(&v.to_be_bytes(), desc)).collect())
}

fn edge(vals: &[i32], e: Edge) -> Clustering {
    Clustering::bound(
        vals.iter().map(|v| part(&v.to_be_bytes(), false)).collect(),
        e,
    )
}

const T0: Timestamp = Timestamp::from_micros(1_000_000);
const GRACE: Duration = Duration::from_secs(3600);

#[test]
fn clustering_orders_by_type_direction_and_edges() {
    assert!(key(&[-1], false) < key(&[1], false));
    assert!(key(&[-1], true) > key(&[1], true));
    // A prefix bound sits before / after every key it prefixes.
    assert!(edge(&[1], Edge::Before) < key(&[1, i32::MIN], false));
    assert!(edge(&[1], Edge::After) > key(&[1, i32::MAX], false));
    assert!(edge(&[1], Edge::After) < key(&[2, i32::MIN], false));
    assert!(edge(&[1, 5], Edge::Before) < key(&[1, 5], false));
    assert!(edge(&[1, 5], Edge::After) > key(&[1, 5], false));
    assert_eq!(key(&[3], false), key(&[3], false));
}

fn upsert(p: &mut Partition, c: i32, ts: i64, ttl: Option<u64>, now: Timestamp) {
    p.apply(
        Change::Upsert {
            clustering: key(&[c], false),
            marker: true,
            cells: vec![(1, Some(vec![c as u8]))],
            timestamp: Timestamp::from_micros(ts),
            ttl: ttl.map(Duration::from_secs),
        },
        now,
        GRACE,
    );
}

fn live(p: &Partition, now: Timestamp) -> Vec<i32> {
    p.rows
        .iter()
        .filter(|(_, r)| r.is_live(now))
        .map(|(k, _)| i32::from_be_bytes(k.parts[0].raw.clone().try_into().unwrap()))
        .collect()
}

#[test]
fn deletions_drop_what_they_shadow_and_block_late_writes() {
    let mut p = Partition::default();
    for c in 0..4 {
        upsert(&mut p, c, 10, None, T0);
    }
    p.apply(
        Change::DeleteRange {
            start: edge(&[1], Edge::Before),
            end: edge(&[2], Edge::After),
            timestamp: Timestamp::from_micros(10),
        },
        T0,
        GRACE,
    );
    assert_eq!(live(&p, T0), [0, 3]);
    assert_eq!(
        p.rows.len(),
        2,
        "data invariant 1: shadowed rows are gone, not hidden"
    );
    upsert(&mut p, 2, 10, None, T0);
    assert_eq!(live(&p, T0), [0, 3], "a tie with the range tombstone loses");
    upsert(&mut p, 2, 11, None, T0);
    assert_eq!(live(&p, T0), [0, 2, 3]);
    p.apply(
        Change::DeletePartition {
            timestamp: Timestamp::from_micros(11),
        },
        T0,
        GRACE,
    );
    assert!(live(&p, T0).is_empty());
    assert!(
        p.ranges.is_empty(),
        "older range tombstones are covered by the partition one"
    );
    upsert(&mut p, 5, 12, None, T0);
    assert_eq!(live(&p, T0), [5]);
}

#[test]
fn ttl_counts_from_apply_time_and_purge_waits_for_grace() {
    let mut p = Partition::default();
    upsert(&mut p, 1, 1, Some(10), T0);
    let later = T0.saturating_add(Duration::from_secs(10));
    assert_eq!(live(&p, T0.saturating_add(Duration::from_secs(9))), [1]);
    assert!(
        live(&p, later).is_empty(),
        "data invariant 3: dead 10 s after apply, whatever the write timestamp"
    );
    p.purge(later, Duration::from_secs(60));
    assert_eq!(p.rows.len(), 1, "kept as a tombstone within gc grace");
    // Cassandra purges when deletion time < now − grace, in whole seconds.
    p.purge(
        later.saturating_add(Duration::from_secs(60)),
        Duration::from_secs(60),
    );
    assert_eq!(p.rows.len(), 1, "still kept at exactly expiry + grace");
    p.purge(
        later.saturating_add(Duration::from_secs(61)),
        Duration::from_secs(60),
    );
    assert!(p.is_empty());
}

#[test]
fn composite_partition_keys_split_back_into_components() {
    let k = PartitionKey::new(&[b"ab", b"", b"c"]);
    assert_eq!(k.components(3), vec![&b"ab"[..], &b""[..], &b"c"[..]]);
    assert_eq!(PartitionKey::new(&[b"x"]).bytes, b"x");
    assert_eq!(PartitionKey::from_bytes(k.bytes.clone()), k);
}

#[test]
fn past_gc_grace_a_tombstone_no_longer_shadows_late_older_writes() {
    let grace = Duration::from_secs(5);
    let mut p = Partition::default();
    let ck = key(&[1], false);
    p.apply(
        Change::DeleteRow {
            clustering: ck.clone(),
            timestamp: Timestamp::from_micros(50),
        },
        T0,
        grace,
    );
    let write = |p: &mut Partition, now| {
        p.apply(
            Change::Upsert {
                clustering: ck.clone(),
                marker: true,
                cells: vec![(1, Some(vec![1]))],
                timestamp: Timestamp::from_micros(10),
                ttl: None,
            },
            now,
            grace,
        )
    };
    // Deleted at second 1: purgeable once 1 < now − 5, from 7 s.
    write(&mut p, Timestamp::from_micros(6_999_999));
    assert!(live(&p, T0).is_empty(), "within grace the tombstone wins");
    write(&mut p, Timestamp::from_micros(7_000_000));
    assert_eq!(
        live(&p, T0),
        [1],
        "data invariant 4: past grace it is forgotten"
    );
}
