//! Microbenchmarks of the broker's hot functions (filled in with the performance work).

fn main() {}
