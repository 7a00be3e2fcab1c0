//! The stage bindings of a node: which stage view each acquisition was
//! resolved under, and whether it may be handed out (moving here from the
//! facade, issue 21).
