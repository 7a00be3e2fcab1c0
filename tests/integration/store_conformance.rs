//! The store contract, checked on every backend (issue 2, docs/design.md §1).

mod embedded {
    use lockshift_store::conformance::MemoryTarget;

    lockshift_store::conformance_tests!(async { MemoryTarget::new() });
}

/// The same suite through [`lockshift_store::CqlStore`] and the real
/// `scylla` driver against the local CQL endpoint (issue 3).
mod cql_endpoint {
    use lockshift_tests::targets::EndpointTarget;

    lockshift_store::conformance_tests!(EndpointTarget::start());
}

/// The same suite on a real ScyllaDB or Cassandra cluster through
/// [`lockshift_store::CqlStore`], when `LOCKSHIFT_TEST_CONTACT_POINTS` names
/// one. Without it each test prints why it was skipped and passes: the suite
/// runs unconditionally on the embedded backend above, and a cluster is not
/// something every machine has. With it, failing to connect fails the test.
mod cql_cluster {
    use lockshift_tests::targets::{
        CONTACT_POINTS_VAR, CqlTarget, TimeAdvance, real_cluster_settings,
    };

    /// The target, or `None` after printing why the test is skipped.
    async fn target_or_skip() -> Option<CqlTarget> {
        let Some(settings) = real_cluster_settings() else {
            println!(
                "skipped: {CONTACT_POINTS_VAR} is not set; set it to host:port[,host:port] \
                 of a ScyllaDB or Cassandra cluster to run the store conformance suite on CqlStore"
            );
            return None;
        };
        match CqlTarget::connect(&settings, TimeAdvance::Sleep).await {
            Ok(target) => Some(target),
            Err(e) => panic!(
                "{CONTACT_POINTS_VAR} is set but connecting to {:?} failed: {e}",
                settings.contact_points
            ),
        }
    }

    // `return` leaves the generated test early when skipped.
    lockshift_store::conformance_tests!(match target_or_skip().await {
        Some(target) => std::future::ready(target),
        None => return,
    });
}
