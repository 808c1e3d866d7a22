//! Finding the batches in concatenated record bytes — a segment read, a fetch response, a
//! replica's records, a produce request's partition data — by their length fields alone, without
//! copying. Only the framing is checked here (length field, magic); run
//! [`validate`](super::batch::validate) on each batch.
//!
//! The first error ends the iteration and [`Batches::position`] then says where the whole batches
//! end, which is exactly what recovery truncates a torn segment tail to (DESIGN §5).

use std::iter::FusedIterator;

use bytes::Bytes;

use super::batch::{
    BATCH_LOG_OVERHEAD_BYTES, BatchError, LENGTH_AT, MAGIC_AT, MAGIC_V2, declared_bytes,
};
use super::wire::Reader;

/// Splits concatenated batches into one [`Bytes`] per batch. A trailing partial batch is an
/// error ([`BatchError::TooShort`]): a reader that cut its read at a size limit, as a fetch does,
/// may treat that last error as the end.
pub fn split_batches(records: &Bytes) -> Batches {
    Batches { bytes: records.clone(), position: 0, done: false }
}

/// The one batch of a produce request's partition records. Kafka accepts exactly one batch per
/// partition from Produce v3 on; none, two, or a batch followed by stray bytes is refused.
pub fn single_batch(records: &Bytes) -> Result<Bytes, BatchError> {
    let mut batches = split_batches(records);
    let first = batches.next().ok_or(BatchError::NoBatch)??;
    match batches.next() {
        None => Ok(first),
        Some(Ok(_)) => Err(BatchError::NotOneBatch),
        Some(Err(error)) => Err(error),
    }
}

/// Iterator over the batches in concatenated record bytes; see [`split_batches`].
#[derive(Clone, Debug)]
pub struct Batches {
    bytes: Bytes,
    position: usize,
    done: bool,
}

impl Batches {
    /// Bytes taken by the batches yielded so far: after an error, the length of the valid prefix.
    pub fn position(&self) -> usize {
        self.position
    }
}

impl Iterator for Batches {
    type Item = Result<Bytes, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let rest = self.bytes.get(self.position..).unwrap_or_default();
        if rest.is_empty() {
            self.done = true;
            return None;
        }
        match batch_extent(rest) {
            Ok(length) => {
                let start = self.position;
                self.position = start.saturating_add(length);
                // batch_extent checked that `length` bytes are present.
                Some(Ok(self.bytes.slice(start..self.position)))
            }
            Err(error) => {
                self.done = true;
                Some(Err(error))
            }
        }
    }
}

impl FusedIterator for Batches {}

/// Length of the batch at the start of `rest`, from its length field, if all of it is present.
fn batch_extent(rest: &[u8]) -> Result<usize, BatchError> {
    let mut r = Reader::new(rest);
    let length = r
        .take(LENGTH_AT)
        .and_then(|_| r.i32())
        .ok_or(BatchError::TooShort { needed: BATCH_LOG_OVERHEAD_BYTES, actual: rest.len() })?;
    if let Some(&magic) = rest.get(MAGIC_AT)
        && magic as i8 != MAGIC_V2
    {
        return Err(BatchError::BadMagic(magic as i8));
    }
    let total = declared_bytes(length)?;
    if total > rest.len() {
        return Err(BatchError::TooShort { needed: total, actual: rest.len() });
    }
    Ok(total)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use bytes::BytesMut;

    use super::*;
    use crate::log::encode::{BatchOptions, RecordSpec, encode_batch};

    fn batch_of(count: i32) -> Vec<u8> {
        let records: Vec<RecordSpec> = (0..count)
            .map(|offset_delta| RecordSpec {
                offset_delta,
                timestamp: 0,
                key: None,
                value: Some(Bytes::from_static(b"value")),
                headers: Vec::new(),
            })
            .collect();
        encode_batch(&records, &BatchOptions::default()).unwrap().to_vec()
    }

    fn batch() -> Vec<u8> {
        batch_of(3)
    }

    fn put(batch: &mut [u8], at: usize, value: &[u8]) {
        batch[at..at + value.len()].copy_from_slice(value);
    }

    #[test]
    fn split_yields_each_batch_then_stops_at_a_partial_one() {
        let first = batch();
        let second = batch_of(1);
        let mut all = BytesMut::new();
        all.extend_from_slice(&first);
        all.extend_from_slice(&second);
        let whole = all.len();
        all.extend_from_slice(&first[..30]);
        let all = all.freeze();
        let mut batches = split_batches(&all);
        assert_eq!(batches.next(), Some(Ok(Bytes::from(first.clone()))));
        assert_eq!(batches.next(), Some(Ok(Bytes::from(second))));
        assert_eq!(
            batches.next(),
            Some(Err(BatchError::TooShort { needed: first.len(), actual: 30 }))
        );
        assert_eq!(batches.next(), None);
        assert_eq!(batches.position(), whole);
        assert_eq!(split_batches(&Bytes::new()).next(), None);
        let tiny = Bytes::from_static(&[0; 5]);
        assert_eq!(
            split_batches(&tiny).next(),
            Some(Err(BatchError::TooShort { needed: 12, actual: 5 }))
        );
    }

    #[test]
    fn split_refuses_zero_and_negative_lengths_instead_of_looping() {
        let mut bytes = batch();
        put(&mut bytes, LENGTH_AT, &0i32.to_be_bytes());
        let bytes = Bytes::from(bytes);
        let all: Vec<_> = split_batches(&bytes).collect();
        assert_eq!(all, [Err(BatchError::BadBatchLength(0))]);
    }

    #[test]
    fn a_produce_carries_exactly_one_batch() {
        let one = Bytes::from(batch());
        assert_eq!(single_batch(&one), Ok(one.clone()));
        assert_eq!(single_batch(&Bytes::new()), Err(BatchError::NoBatch));
        let two = Bytes::from([batch(), batch()].concat());
        assert_eq!(single_batch(&two), Err(BatchError::NotOneBatch));
        let partial = Bytes::from([batch(), batch()[..20].to_vec()].concat());
        assert!(matches!(single_batch(&partial), Err(BatchError::TooShort { .. })));
    }
}
