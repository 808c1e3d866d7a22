//! The quorum's in-memory view of its log for Raft (`raft::Storage`): the hard state, the
//! latest snapshot (with the state machine's bytes, so a lagging follower can be sent it) and
//! the entries after it. The durable copy is [`super::store::QuorumStore`].

use std::sync::{Arc, RwLock};

use bytes::Bytes;
use raft::prelude::{ConfState, Entry, HardState, Snapshot};
use raft::{GetEntriesContext, RaftState, StorageError};

use super::{Recovered, SnapshotData};

#[derive(Default)]
struct Inner {
    hard_state: HardState,
    conf_state: ConfState,
    snapshot: Option<SnapshotData>,
    entries: Vec<Entry>,
}

impl Inner {
    fn snapshot_index(&self) -> u64 {
        self.snapshot.as_ref().map_or(0, |s| s.index)
    }
    fn first_index(&self) -> u64 {
        self.snapshot_index() + 1
    }
    fn last_index(&self) -> u64 {
        self.entries.last().map_or(self.snapshot_index(), |e| e.index)
    }
}

/// Shared between the quorum (which updates it) and Raft (which reads it).
#[derive(Clone, Default)]
pub struct MetaStorage(Arc<RwLock<Inner>>);

impl MetaStorage {
    /// The view of a recovered store (a fresh one has every voter as a member).
    pub fn new(voters: &[u64], recovered: Recovered) -> MetaStorage {
        let mut inner = Inner { hard_state: recovered.hard_state, ..Inner::default() };
        match recovered.snapshot {
            Some((data, conf)) => {
                inner.conf_state = conf;
                inner.snapshot = Some(data);
            }
            None => inner.conf_state = ConfState::from((voters.to_vec(), Vec::new())),
        }
        let first = inner.first_index();
        inner.entries = recovered.entries.into_iter().filter(|e| e.index >= first).collect();
        MetaStorage(Arc::new(RwLock::new(inner)))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.0.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.0.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The index of the latest snapshot (0: none).
    pub fn snapshot_index(&self) -> u64 {
        self.read().snapshot_index()
    }

    /// Appends entries, replacing any from the first one's index on.
    pub fn append(&self, entries: &[Entry]) {
        let Some(first) = entries.first() else { return };
        let mut inner = self.write();
        inner.entries.retain(|e| e.index < first.index);
        inner.entries.extend(entries.iter().cloned());
    }

    /// Stores the hard state.
    pub fn set_hard_state(&self, hard_state: HardState) {
        self.write().hard_state = hard_state;
    }

    /// Moves the commit index.
    pub fn set_commit(&self, commit: u64) {
        self.write().hard_state.commit = commit;
    }

    /// Adopts a snapshot from the leader: the log restarts after it.
    pub fn install_snapshot(&self, data: SnapshotData, conf: ConfState) {
        let mut inner = self.write();
        inner.entries.retain(|e| e.index > data.index);
        inner.hard_state.commit = inner.hard_state.commit.max(data.index);
        inner.hard_state.term = inner.hard_state.term.max(data.term);
        inner.conf_state = conf;
        inner.snapshot = Some(data);
    }

    /// Takes `image` as the snapshot at `index` and drops the entries it covers.
    pub fn compact(
        &self,
        index: u64,
        image: Bytes,
    ) -> Result<(SnapshotData, ConfState), raft::Error> {
        let mut inner = self.write();
        if index <= inner.snapshot_index() {
            return Err(raft::Error::Store(StorageError::SnapshotOutOfDate));
        }
        let term = inner
            .entries
            .iter()
            .find(|e| e.index == index)
            .map(|e| e.term)
            .ok_or(raft::Error::Store(StorageError::Unavailable))?;
        let data = SnapshotData { index, term, data: image };
        inner.entries.retain(|e| e.index > index);
        inner.snapshot = Some(data.clone());
        Ok((data, inner.conf_state.clone()))
    }
}

impl raft::Storage for MetaStorage {
    fn initial_state(&self) -> raft::Result<RaftState> {
        let inner = self.read();
        Ok(RaftState::new(inner.hard_state.clone(), inner.conf_state.clone()))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        let inner = self.read();
        if low < inner.first_index() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if high > inner.last_index() + 1 {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        let mut out: Vec<Entry> =
            inner.entries.iter().filter(|e| e.index >= low && e.index < high).cloned().collect();
        raft::util::limit_size(&mut out, max_size.into());
        Ok(out)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        let inner = self.read();
        if let Some(s) = &inner.snapshot
            && s.index == idx
        {
            return Ok(s.term);
        }
        if idx == 0 {
            return Ok(0);
        }
        if idx < inner.first_index() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        inner
            .entries
            .iter()
            .find(|e| e.index == idx)
            .map(|e| e.term)
            .ok_or(raft::Error::Store(StorageError::Unavailable))
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.read().first_index())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.read().last_index())
    }

    fn snapshot(&self, _request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        let inner = self.read();
        let Some(s) = &inner.snapshot else {
            return Err(raft::Error::Store(StorageError::SnapshotTemporarilyUnavailable));
        };
        let mut snapshot = Snapshot { data: s.data.to_vec().into(), ..Default::default() };
        let meta = snapshot.mut_metadata();
        meta.index = s.index;
        meta.term = s.term;
        meta.set_conf_state(inner.conf_state.clone());
        Ok(snapshot)
    }
}
