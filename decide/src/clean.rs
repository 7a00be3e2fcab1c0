//! What `migrate clean` may delete: the judgement on each cell it found, as
//! a pure function of the cells, the registry and `now` (moving here from
//! the operator tool, issue 21).
