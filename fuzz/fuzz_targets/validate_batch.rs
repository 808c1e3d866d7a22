//! Batch validation and record iteration must reject any malformed bytes without panicking.
//!
//! Random bytes almost never carry a matching CRC-32C, so on its own the fuzzer would only test
//! the header checks. The first input byte picks a mode: odd means "make the framing right" —
//! the batch length and CRC of the remaining bytes are fixed up before validation, so the
//! fuzzer reaches record parsing and decompression; even passes the bytes through untouched.
#![no_main]

use libfuzzer_sys::fuzz_target;

/// Where the RecordBatch v2 header keeps its length, its CRC, and where the CRC starts.
const LENGTH_AT: usize = 8;
const CRC_AT: usize = 17;
const CRC_START: usize = 21;
const LOG_OVERHEAD_BYTES: usize = 12;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let mut batch = rest.to_vec();
    if mode & 1 == 1 && batch.len() >= CRC_START {
        let length = i32::try_from(batch.len() - LOG_OVERHEAD_BYTES).unwrap_or(i32::MAX);
        batch[LENGTH_AT..LENGTH_AT + 4].copy_from_slice(&length.to_be_bytes());
        let crc = crc32c::crc32c(&batch[CRC_START..]);
        batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    }
    let bytes = bytes::Bytes::from(batch);
    if weir::log::batch::validate_deep(&bytes, usize::MAX).is_ok() {
        for record in weir::log::records::record_iter(&bytes).into_iter().flatten() {
            let _ = record;
        }
    }
});
