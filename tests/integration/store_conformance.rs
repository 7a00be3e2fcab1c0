//! The store contract, checked on every backend (issue 2, DESIGN.md §1).

mod embedded {
    use lockshift_store::conformance::MemoryTarget;

    lockshift_store::conformance_tests!(async { MemoryTarget::new() });
}
