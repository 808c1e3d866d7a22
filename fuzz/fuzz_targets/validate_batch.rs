//! Batch validation and record iteration must reject any malformed bytes without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let bytes = bytes::Bytes::copy_from_slice(data);
    if weir::log::batch::validate_deep(data, usize::MAX).is_ok() {
        for record in weir::log::records::record_iter(&bytes).into_iter().flatten() {
            let _ = record;
        }
    }
});
