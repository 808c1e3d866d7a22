//! Decompressing a batch's records without letting a hostile batch exhaust memory.
//!
//! kafka-protocol's decompressors inflate the whole payload into memory with no ceiling (its
//! snappy decoder even allocates whatever length the stream declares before decoding), so a
//! 1 MiB produce could demand gigabytes. Before calling them we walk the codec's framing, which is
//! cheap, and compute an upper bound on the output that the decoder itself enforces:
//!
//! - snappy: the sum of the uncompressed lengths each (xerial) block declares; the decoder writes
//!   into a buffer of exactly that size and fails rather than grow it;
//! - LZ4 frames: per block, its size if stored, else the frame's block maximum, and never more
//!   than 255 times its compressed size (LZ4's densest encoding);
//! - zstd frames: per block, its size for raw and RLE blocks, the block maximum (128 KiB, or the
//!   window if smaller) for compressed ones;
//! - gzip: the ISIZE trailer as a first filter; since deflate declares no sizes and a trailer can
//!   lie, gzip is inflated with a streaming reader that stops one byte past the limit.
//!
//! A payload whose bound exceeds the caller's limit is refused before decoding; the output is
//! measured again after.

use bytes::Bytes;
use kafka_protocol::compression::{Decompressor, Lz4, Snappy, Zstd};

use super::batch::{BatchError, Compression};
use super::wire::Reader;

/// Densest LZ4 encoding: one match-length byte of 255 per byte of input.
const LZ4_EXPANSION_MAX: u64 = 255;
/// Largest block a zstd frame may decode to.
const ZSTD_BLOCK_BYTES_MAX: u64 = 128 * 1024;
const LZ4_FRAME_MAGIC: u32 = 0x184D_2204;
const ZSTD_FRAME_MAGIC: u32 = 0xFD2F_B528;
/// Skippable frames (both LZ4 and zstd) have magics 0x184D2A50..=0x184D2A5F.
const SKIPPABLE_MAGIC_MASK: u32 = 0xFFFF_FFF0;
const SKIPPABLE_MAGIC: u32 = 0x184D_2A50;
/// The stream header snappy-java (the Java client's snappy) writes; without it the payload is raw
/// snappy, as kafka-protocol and Java both accept.
const XERIAL_MAGIC: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
/// 10-byte gzip header plus 8-byte trailer.
const GZIP_FRAMING_BYTES: usize = 18;

/// Decompresses `data` with `codec`, refusing anything whose output could exceed `max_bytes`.
pub fn decompress(codec: Compression, data: &[u8], max_bytes: usize) -> Result<Bytes, BatchError> {
    let too_large = |bytes: u64| BatchError::DecompressedTooLarge { bytes, max: max_bytes };
    let bound = decompressed_bound(codec, data)?;
    if bound > max_bytes as u64 {
        return Err(too_large(bound));
    }
    let out = inflate(codec, data, max_bytes).ok_or(BatchError::Decompress(codec))?;
    if out.len() > max_bytes {
        return Err(too_large(out.len() as u64));
    }
    Ok(out)
}

/// An upper bound on what `data` decompresses to, read from its framing alone (see the module
/// notes for gzip, where it is only the stream's own claim).
pub fn decompressed_bound(codec: Compression, data: &[u8]) -> Result<u64, BatchError> {
    match codec {
        Compression::None => Ok(data.len() as u64),
        Compression::Gzip => gzip_bound(data),
        Compression::Snappy => snappy_bound(data),
        Compression::Lz4 => lz4_bound(data),
        Compression::Zstd => zstd_bound(data),
    }
}

fn inflate(codec: Compression, data: &[u8], max_bytes: usize) -> Option<Bytes> {
    match codec {
        Compression::None => Some(Bytes::copy_from_slice(data)),
        Compression::Gzip => inflate_gzip(data, max_bytes),
        Compression::Snappy => inflate_with::<Snappy>(data),
        Compression::Lz4 => inflate_with::<Lz4>(data),
        Compression::Zstd => inflate_with::<Zstd>(data),
    }
}

fn inflate_with<D>(data: &[u8]) -> Option<Bytes>
where
    D: for<'b> Decompressor<&'b [u8], Buf = Bytes>,
{
    let mut input = data;
    D::decompress(&mut input, |out| Ok(std::mem::take(out))).ok()
}

/// Inflates gzip (several members, as Java's `GZIPInputStream` reads) but never more than one
/// byte past `max_bytes`, so a lying trailer cannot make the output grow unbounded.
fn inflate_gzip(data: &[u8], max_bytes: usize) -> Option<Bytes> {
    use std::io::Read;
    let limit = u64::try_from(max_bytes).unwrap_or(u64::MAX).saturating_add(1);
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(data).take(limit).read_to_end(&mut out).ok()?;
    Some(Bytes::from(out))
}

fn corrupt(what: &'static str) -> BatchError {
    BatchError::Corrupt(what)
}

fn gzip_bound(data: &[u8]) -> Result<u64, BatchError> {
    if data.len() < GZIP_FRAMING_BYTES || !data.starts_with(&GZIP_MAGIC) {
        return Err(corrupt("not a gzip stream"));
    }
    let trailer = data.get(data.len().saturating_sub(4)..).unwrap_or_default();
    let isize = Reader::new(trailer).u32_le().ok_or(corrupt("gzip trailer"))?;
    Ok(u64::from(isize))
}

fn snappy_bound(data: &[u8]) -> Result<u64, BatchError> {
    let Some(blocks) = data.strip_prefix(XERIAL_MAGIC) else {
        return snappy_block_bound(data);
    };
    let mut reader = Reader::new(blocks);
    let mut total = 0u64;
    while !reader.is_empty() {
        let length = reader.u32().ok_or(corrupt("snappy block length"))?;
        let block = usize::try_from(length)
            .ok()
            .and_then(|length| reader.take(length))
            .ok_or(corrupt("snappy block runs past the payload"))?;
        total = total.saturating_add(snappy_block_bound(block)?);
    }
    Ok(total)
}

/// A raw snappy block starts with its uncompressed length as an unsigned varint.
fn snappy_block_bound(block: &[u8]) -> Result<u64, BatchError> {
    if block.is_empty() {
        return Ok(0);
    }
    Reader::new(block).uvarint32().ok_or(corrupt("snappy length preamble"))
}

fn lz4_bound(data: &[u8]) -> Result<u64, BatchError> {
    let mut reader = Reader::new(data);
    let mut total = 0u64;
    while !reader.is_empty() {
        let magic = reader.u32_le().ok_or(corrupt("lz4 frame magic"))?;
        let frame = match magic {
            LZ4_FRAME_MAGIC => lz4_frame_bound(&mut reader)?,
            _ => skip_skippable(&mut reader, magic, "lz4 frame magic")?,
        };
        total = total.saturating_add(frame);
    }
    Ok(total)
}

/// Skips a skippable frame (its magic already read); anything else is corrupt.
fn skip_skippable(
    reader: &mut Reader<'_>,
    magic: u32,
    what: &'static str,
) -> Result<u64, BatchError> {
    if magic & SKIPPABLE_MAGIC_MASK != SKIPPABLE_MAGIC {
        return Err(corrupt(what));
    }
    let length = reader.u32_le().ok_or(corrupt("skippable frame length"))?;
    usize::try_from(length)
        .ok()
        .and_then(|length| reader.take(length))
        .ok_or(corrupt("skippable frame runs past the payload"))?;
    Ok(0)
}

fn lz4_frame_bound(reader: &mut Reader<'_>) -> Result<u64, BatchError> {
    let flags = reader.u8().ok_or(corrupt("lz4 frame descriptor"))?;
    let block_descriptor = reader.u8().ok_or(corrupt("lz4 frame descriptor"))?;
    if flags >> 6 != 0b01 {
        return Err(corrupt("lz4 frame version"));
    }
    let block_max: u64 = match (block_descriptor >> 4) & 0x07 {
        4 => 64 << 10,
        5 => 256 << 10,
        6 => 1 << 20,
        7 => 4 << 20,
        _ => return Err(corrupt("lz4 block maximum size")),
    };
    let has_block_checksum = flags & 0x10 != 0;
    let content_size_bytes = if flags & 0x08 != 0 { 8 } else { 0 };
    let dictionary_bytes = if flags & 0x01 != 0 { 4 } else { 0 };
    let content_checksum_bytes = if flags & 0x04 != 0 { 4 } else { 0 };
    // Content size, dictionary id, header checksum.
    skip(reader, content_size_bytes + dictionary_bytes + 1, "lz4 frame descriptor")?;
    let mut total = 0u64;
    loop {
        let word = reader.u32_le().ok_or(corrupt("lz4 block size"))?;
        if word == 0 {
            break;
        }
        let stored = word & 0x8000_0000 != 0;
        let size = u64::from(word & 0x7FFF_FFFF);
        skip(reader, (word & 0x7FFF_FFFF) as usize, "lz4 block runs past the payload")?;
        if has_block_checksum {
            skip(reader, 4, "lz4 block checksum")?;
        }
        let block = match stored {
            true => size,
            false => block_max.min(size.saturating_mul(LZ4_EXPANSION_MAX)),
        };
        total = total.saturating_add(block);
    }
    skip(reader, content_checksum_bytes, "lz4 content checksum")?;
    Ok(total)
}

fn skip(reader: &mut Reader<'_>, bytes: usize, what: &'static str) -> Result<(), BatchError> {
    reader.take(bytes).map(|_| ()).ok_or(corrupt(what))
}

fn zstd_bound(data: &[u8]) -> Result<u64, BatchError> {
    let mut reader = Reader::new(data);
    let mut total = 0u64;
    while !reader.is_empty() {
        let magic = reader.u32_le().ok_or(corrupt("zstd frame magic"))?;
        let frame = match magic {
            ZSTD_FRAME_MAGIC => zstd_frame_bound(&mut reader)?,
            _ => skip_skippable(&mut reader, magic, "zstd frame magic")?,
        };
        total = total.saturating_add(frame);
    }
    Ok(total)
}

fn zstd_frame_bound(reader: &mut Reader<'_>) -> Result<u64, BatchError> {
    let descriptor = reader.u8().ok_or(corrupt("zstd frame header"))?;
    let single_segment = descriptor & 0x20 != 0;
    if descriptor & 0x08 != 0 {
        return Err(corrupt("zstd reserved bit"));
    }
    let window = match single_segment {
        true => None,
        false => Some(zstd_window(reader.u8().ok_or(corrupt("zstd window"))?)),
    };
    let dictionary_bytes = match descriptor & 0x03 {
        0 => 0,
        1 => 1,
        2 => 2,
        _ => 4,
    };
    skip(reader, dictionary_bytes, "zstd dictionary id")?;
    let content_size_bytes = match descriptor >> 6 {
        0 if single_segment => 1,
        0 => 0,
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let content_size = reader.uint_le(content_size_bytes).ok_or(corrupt("zstd content size"))?;
    let content_size = match content_size_bytes {
        2 => content_size + 256,
        _ => content_size,
    };
    let window = window.unwrap_or(content_size);
    let total = zstd_blocks_bound(reader, window.min(ZSTD_BLOCK_BYTES_MAX))?;
    if descriptor & 0x04 != 0 {
        skip(reader, 4, "zstd content checksum")?;
    }
    Ok(total)
}

/// Window size from a zstd window descriptor: 2^(10 + exponent) plus eighths of it.
fn zstd_window(descriptor: u8) -> u64 {
    let base = 1u64 << (10 + u32::from(descriptor >> 3));
    base + (base / 8) * u64::from(descriptor & 0x07)
}

fn zstd_blocks_bound(reader: &mut Reader<'_>, block_max: u64) -> Result<u64, BatchError> {
    let mut total = 0u64;
    loop {
        let header = reader.uint_le(3).ok_or(corrupt("zstd block header"))?;
        let last = header & 1 != 0;
        let size = header >> 3;
        let (content, output) = match (header >> 1) & 0x03 {
            0 => (size, size),
            1 => (1, size),
            2 => (size, block_max),
            _ => return Err(corrupt("zstd reserved block type")),
        };
        skip(reader, content as usize, "zstd block runs past the payload")?;
        total = total.saturating_add(output);
        if last {
            return Ok(total);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use kafka_protocol::compression::Gzip;

    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::compression::Compressor;

    const MAX: usize = 1 << 20;

    fn compress<C: Compressor<BytesMut, BufMut = BytesMut>>(raw: &[u8]) -> BytesMut {
        let mut out = BytesMut::new();
        C::compress(&mut out, |tmp| {
            tmp.extend_from_slice(raw);
            Ok(())
        })
        .unwrap();
        out
    }

    fn compressed(codec: Compression, raw: &[u8]) -> BytesMut {
        match codec {
            Compression::Gzip => compress::<Gzip>(raw),
            Compression::Snappy => compress::<Snappy>(raw),
            Compression::Lz4 => compress::<Lz4>(raw),
            Compression::Zstd => compress::<Zstd>(raw),
            Compression::None => BytesMut::from(raw),
        }
    }

    const CODECS: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    #[test]
    fn bounds_cover_real_output_and_are_tight_for_kafka_protocol_streams() {
        let raw: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8 ^ (i / 7) as u8).collect();
        for codec in CODECS {
            let data = compressed(codec, &raw);
            let bound = decompressed_bound(codec, &data).unwrap();
            assert!(bound >= raw.len() as u64, "{codec:?}: {bound}");
            assert!(bound <= raw.len() as u64 + (256 << 10), "{codec:?}: {bound}");
            assert_eq!(decompress(codec, &data, MAX).unwrap(), raw, "{codec:?}");
        }
    }

    #[test]
    fn output_over_the_limit_is_refused_before_decoding() {
        let raw = vec![0u8; 200_000];
        for codec in CODECS {
            let data = compressed(codec, &raw);
            let refused = decompress(codec, &data, 100_000);
            assert!(
                matches!(refused, Err(BatchError::DecompressedTooLarge { .. })),
                "{codec:?}: {refused:?}"
            );
        }
    }

    #[test]
    fn snappy_that_declares_four_gibibytes_is_refused_without_allocating() {
        // A raw snappy preamble claiming u32::MAX bytes; kafka-protocol would allocate them.
        let data = [0xff, 0xff, 0xff, 0xff, 0x0f, 0x00];
        let refused = decompress(Compression::Snappy, &data, MAX);
        assert_eq!(
            refused,
            Err(BatchError::DecompressedTooLarge { bytes: u64::from(u32::MAX), max: MAX })
        );
    }

    #[test]
    fn a_zstd_bomb_of_rle_blocks_is_refused_from_its_headers() {
        // One frame, no window byte needed (single segment off, window 1 MiB), 1000 RLE blocks of
        // 128 KiB each: ~125 MiB of output from ~4 KB of input.
        let mut data = ZSTD_FRAME_MAGIC.to_le_bytes().to_vec();
        data.push(0x00);
        data.push(10 << 3);
        for i in 0..1000u32 {
            let last = u32::from(i == 999);
            let header = last | (1 << 1) | ((128 * 1024) << 3);
            data.extend_from_slice(&header.to_le_bytes()[..3]);
            data.push(0xAB);
        }
        let bound = decompressed_bound(Compression::Zstd, &data).unwrap();
        assert_eq!(bound, 1000 * 128 * 1024);
        assert!(matches!(
            decompress(Compression::Zstd, &data, MAX),
            Err(BatchError::DecompressedTooLarge { .. })
        ));
    }

    #[test]
    fn a_gzip_trailer_claiming_too_much_is_refused() {
        let mut data = compressed(Compression::Gzip, b"hello").to_vec();
        let at = data.len() - 4;
        data[at..].copy_from_slice(&(u32::MAX).to_le_bytes());
        assert!(matches!(
            decompress(Compression::Gzip, &data, MAX),
            Err(BatchError::DecompressedTooLarge { .. })
        ));
    }

    #[test]
    fn garbage_is_corrupt_not_a_panic() {
        for codec in CODECS {
            for data in [&b""[..], b"\x00", b"garbage that is not compressed at all"] {
                let _ = decompress(codec, data, MAX);
            }
        }
        assert_eq!(
            decompressed_bound(Compression::Lz4, b"\x04\x22\x4d\x18\x40"),
            Err(BatchError::Corrupt("lz4 frame descriptor"))
        );
    }

    #[test]
    fn a_gzip_bomb_with_a_lying_trailer_stops_at_the_limit() {
        let big = vec![0u8; 8 << 20];
        let mut bomb = compressed(Compression::Gzip, &big).to_vec();
        let at = bomb.len() - 4;
        bomb[at..].copy_from_slice(&100u32.to_le_bytes());
        assert!(bomb.len() < 64 << 10, "the bomb should be small: {}", bomb.len());
        assert!(matches!(
            decompress(Compression::Gzip, &bomb, 1 << 20),
            Err(BatchError::DecompressedTooLarge { .. })
        ));
    }
}
