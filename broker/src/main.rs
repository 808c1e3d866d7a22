//! The `weir` binary.

fn main() {
    println!("weir {}", env!("CARGO_PKG_VERSION"));
}
