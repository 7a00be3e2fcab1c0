//! Conformance targets beyond the embedded one the store crate ships.
//!
//! `LOCKSHIFT_TEST_CONTACT_POINTS` (comma-separated `host:port`) points the
//! suite at a real ScyllaDB or Cassandra cluster as well.

/// The contact points of a real cluster to test against, if configured.
pub fn real_cluster_contact_points() -> Option<Vec<String>> {
    let raw = std::env::var("LOCKSHIFT_TEST_CONTACT_POINTS").ok()?;
    let points: Vec<String> = raw
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(String::from)
        .collect();
    (!points.is_empty()).then_some(points)
}
