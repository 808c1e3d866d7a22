//! Record values that name themselves: producer number and record number, followed by padding
//! derived from both. Every byte of a value is predictable from its identity, so a value read
//! back is either exactly one that was sent or detectably not (corrupt, torn, or invented).

use bytes::{BufMut, Bytes, BytesMut};

use crate::trace::mix;

/// Bytes of the identity at the front of a value.
const IDENTITY_BYTES: usize = 12;
/// Most padding after the identity, so values vary in size.
const PADDING_BYTES_MAX: u64 = 48;

fn padding(producer: u32, number: u64) -> Vec<u8> {
    let mut state = mix(u64::from(producer) << 40 ^ number ^ 0x7661_6c75);
    let len = (state % PADDING_BYTES_MAX) as usize;
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        state = mix(state);
        out.extend_from_slice(&state.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// The value of record `number` of `producer`.
pub fn encode(producer: u32, number: u64) -> Bytes {
    let pad = padding(producer, number);
    let mut out = BytesMut::with_capacity(IDENTITY_BYTES + pad.len());
    out.put_u32(producer);
    out.put_u64(number);
    out.put_slice(&pad);
    out.freeze()
}

/// The identity of a value, if it is exactly a value [`encode`] makes.
pub fn decode(value: &[u8]) -> Option<(u32, u64)> {
    let producer = u32::from_be_bytes(value.get(..4)?.try_into().ok()?);
    let number = u64::from_be_bytes(value.get(4..IDENTITY_BYTES)?.try_into().ok()?);
    (value.get(IDENTITY_BYTES..)? == padding(producer, number).as_slice())
        .then_some((producer, number))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_reject_changes() {
        for (p, n) in [(0, 0), (1, 7), (9, u64::MAX)] {
            let v = encode(p, n);
            assert_eq!(decode(&v), Some((p, n)));
            let mut bad = v.to_vec();
            bad.push(0);
            assert_eq!(decode(&bad), None);
            if let Some(last) = bad.get_mut(5) {
                *last ^= 1;
            }
            bad.pop();
            assert_ne!(decode(&bad), Some((p, n)));
        }
    }
}
