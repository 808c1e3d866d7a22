//! The data folder's identity: `meta.properties` at its root names the node the folder belongs
//! to and the folder itself, by a directory id drawn at random the first time the folder is
//! used. A node refuses a folder that belongs to another node id. It registers with the
//! directory id, so the controller can tell a broker that restarted over its old disk from one
//! that came back with a new, empty one (which must not stay in sync or lead on the strength of
//! what the old disk held).
//!
//! The file is Java-properties text, as Kafka's is, so operators recognise it:
//!
//! ```text
//! version=1
//! node.id=4
//! directory.id=0f3c…(32 hex digits)
//! ```

use std::path::Path;

use bytes::Bytes;

use crate::controller::records::DirectoryId;
use crate::io::Env;
use crate::log::checkpoint::write_atomic;

/// The file's name, at the root of the data folder.
pub const META_PROPERTIES: &str = "meta.properties";
/// The only version this code reads and writes.
const VERSION: &str = "1";
/// A larger file is not ours.
const META_PROPERTIES_BYTES_MAX: u64 = 4096;

/// Why the data folder's identity could not be settled.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The folder belongs to another node.
    #[error(
        "{META_PROPERTIES} says this data folder belongs to node {found}, but this node is \
         {configured}: a data folder serves one node id"
    )]
    OtherNode {
        /// The node id in the file.
        found: i32,
        /// The configured `node.id`.
        configured: i32,
    },
    /// The file is there but is not one this code wrote.
    #[error("{META_PROPERTIES} is unreadable: {0}")]
    Malformed(String),
    /// The disk failed.
    #[error("{META_PROPERTIES}: {0}")]
    Io(#[from] std::io::Error),
}

/// The data folder's directory id: read from `meta.properties`, or drawn and written (durably,
/// before anything can register with it) when the folder has none.
pub async fn load_or_create(env: &Env, node_id: i32) -> Result<DirectoryId, IdentityError> {
    let root = Path::new("");
    match env.disk.open(Path::new(META_PROPERTIES)).await {
        Ok(file) => {
            if file.len() > META_PROPERTIES_BYTES_MAX {
                return Err(IdentityError::Malformed(format!("{} bytes", file.len())));
            }
            let len = usize::try_from(file.len()).unwrap_or(usize::MAX);
            let bytes = file.read_at(0, len).await?;
            let (found, directory) = parse(&bytes)?;
            if found != node_id {
                return Err(IdentityError::OtherNode { found, configured: node_id });
            }
            Ok(directory)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut raw = [0u8; 16];
            env.entropy.fill(&mut raw);
            let directory = DirectoryId(u128::from_be_bytes(raw));
            write_atomic(&*env.disk, root, META_PROPERTIES, render(node_id, directory)).await?;
            tracing::info!(node = node_id, directory = %format!("{:032x}", directory.0), "new data folder");
            Ok(directory)
        }
        Err(e) => Err(e.into()),
    }
}

/// The file's text.
fn render(node_id: i32, directory: DirectoryId) -> Bytes {
    Bytes::from(format!(
        "version={VERSION}\nnode.id={node_id}\ndirectory.id={:032x}\n",
        directory.0
    ))
}

/// The node id and directory id in the file's text.
fn parse(bytes: &[u8]) -> Result<(i32, DirectoryId), IdentityError> {
    let bad = |why: &str| IdentityError::Malformed(why.to_owned());
    let text = std::str::from_utf8(bytes).map_err(|_| bad("not UTF-8"))?;
    let (mut version, mut node, mut directory) = (None, None, None);
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (key, value) = line.split_once('=').ok_or_else(|| bad("a line without '='"))?;
        match key.trim() {
            "version" => version = Some(value.trim()),
            "node.id" => {
                node = Some(value.trim().parse::<i32>().map_err(|_| bad("node.id is no number"))?)
            }
            "directory.id" => {
                let hex = value.trim();
                if hex.len() != 32 {
                    return Err(bad("directory.id is not 32 hex digits"));
                }
                let id = u128::from_str_radix(hex, 16)
                    .map_err(|_| bad("directory.id is not 32 hex digits"))?;
                directory = Some(DirectoryId(id));
            }
            _ => {}
        }
    }
    match version {
        Some(VERSION) => {}
        Some(other) => return Err(IdentityError::Malformed(format!("version {other}"))),
        None => return Err(bad("no version")),
    }
    Ok((node.ok_or_else(|| bad("no node.id"))?, directory.ok_or_else(|| bad("no directory.id"))?))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_text_round_trips() {
        let directory = DirectoryId(0x0123_4567_89ab_cdef_0011_2233_4455_6677);
        let text = render(7, directory);
        assert_eq!(parse(&text).unwrap(), (7, directory));
        let with_comment = format!("#written by hand\n\n{}", std::str::from_utf8(&text).unwrap());
        assert_eq!(parse(with_comment.as_bytes()).unwrap(), (7, directory));
    }

    #[test]
    fn a_damaged_file_is_refused() {
        let cases: [&[u8]; 6] = [
            b"node.id=1\ndirectory.id=00000000000000000000000000000001\n",
            b"version=2\nnode.id=1\ndirectory.id=00000000000000000000000000000001\n",
            b"version=1\ndirectory.id=00000000000000000000000000000001\n",
            b"version=1\nnode.id=1\n",
            b"version=1\nnode.id=one\ndirectory.id=00000000000000000000000000000001\n",
            b"version=1\nnode.id=1\ndirectory.id=xyz\n",
        ];
        for case in cases {
            assert!(
                matches!(parse(case), Err(IdentityError::Malformed(_))),
                "{:?} was accepted",
                String::from_utf8_lossy(case)
            );
        }
    }
}
