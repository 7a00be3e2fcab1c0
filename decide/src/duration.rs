//! Durations as people read and write them: `40s`, `1m 30s`, `250ms`
//! (moving here from the lock crate, issue 21).
