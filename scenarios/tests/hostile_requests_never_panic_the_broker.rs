//! Requests of every API Weir answers, at every version it advertises, with fields at the
//! edges of their types and bodies mutated byte by byte, never panic a broker, never get an
//! answer that does not decode, and never damage data they do not name: the hostile workload
//! of `weir-sim` (see `weir_sim::workload::hostile`), for a few seeds; `ci/sweep` runs more.

use weir_scenarios::for_each_seed;

/// As in the `weir` binary: hostile array counts must not abort the process (see
/// `weir::runtime::alloc`).
#[global_allocator]
static ALLOCATOR: weir::runtime::alloc::LazyHugeAlloc = weir::runtime::alloc::LazyHugeAlloc;

#[test]
fn hostile_requests_never_panic_the_broker() {
    for_each_seed("hostile_requests_never_panic_the_broker", 0..8, |seed| {
        let report = weir_sim::workload::hostile::run(seed);
        match report.violations.is_empty() {
            true => Ok(()),
            false => Err(report.violations.join("; ")),
        }
    });
}
