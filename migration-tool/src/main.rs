//! `migrate`: the operator tool. Not implemented yet (issue 6); it says so and
//! exits with the usage code rather than pretending to work.

fn main() {
    eprintln!("migrate: not implemented yet (issue 6)");
    std::process::exit(2);
}
