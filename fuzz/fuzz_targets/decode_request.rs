//! Request decoding must turn any bytes into a request or a typed error: never a panic, never
//! an allocation driven by a count the bytes cannot back.
#![no_main]

use libfuzzer_sys::fuzz_target;

/// Hostile array counts must not abort (see `weir::runtime::alloc`).
#[global_allocator]
static ALLOCATOR: weir::runtime::alloc::LazyHugeAlloc = weir::runtime::alloc::LazyHugeAlloc;

fuzz_target!(|data: &[u8]| {
    let _ = weir::protocol::decode_request(bytes::Bytes::copy_from_slice(data));
});
