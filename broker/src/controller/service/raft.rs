//! The controller's Raft loop ([`run`]): ticks, peers' messages and proposals go into the
//! quorum; what it makes ready is persisted (waiting out a lack of room), sent to the peers
//! ([`Peers`], one connection task each) and applied to the published image.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use tokio::sync::mpsc;

use super::{
    Controller, Event, MetadataImage, PEER_QUEUE_MAX, Published, SNAPSHOT_EVERY_ENTRIES,
    STORE_RETRY, TICK,
};
use crate::controller::quorum::{NodeId, Persist, Quorum, QuorumStore, StoreError};
use crate::controller::records::{BrokerId, decode_entry, encode_entry};
use crate::controller::rpc::{Channel, Hello, QuorumStatus, VoterStatus, write_frame};
use crate::io::{Conn, Env, timeout};
use crate::log::Shortage;

/// The Raft loop: ticks, messages and proposals in; persistence, messages out and applied
/// entries after.
pub(super) async fn run(
    controller: std::sync::Weak<Controller>,
    mut quorum: Quorum,
    mut store: QuorumStore,
    (mut queue, inbox): (mpsc::UnboundedReceiver<Event>, Arc<Inbox>),
    peers: Peers,
) {
    let Some(clock) = controller.upgrade().map(|c| Arc::clone(&c.env.clock)) else { return };
    let mut next_tick = clock.now() + TICK;
    let mut term_start_nonce: Option<u64> = None;
    // When each voter was last heard from, and (while this node leads) when its log last
    // reached the leader's end: wall-clock ms, for DescribeQuorum.
    let mut heard: BTreeMap<NodeId, i64> = BTreeMap::new();
    let mut caught_up: BTreeMap<NodeId, i64> = BTreeMap::new();
    loop {
        let sleep = clock.sleep_until(next_tick);
        tokio::select! {
            biased;
            () = sleep => {
                quorum.tick();
                next_tick = clock.now() + TICK;
            }
            event = queue.recv() => match event {
                Some(Event::Step(message)) => {
                    inbox.taken(message.len());
                    // Only what a leader hears counts: a vote that makes it leader says nothing
                    // of the voter's log.
                    let leading = quorum.is_leader();
                    match quorum.step(&message) {
                        Ok(Some(voter)) if leading => {
                            // Caught up when what it answered shows its log at the leader's
                            // end, as Kafka's leader judges a fetch.
                            let now = clock.wall_ms();
                            heard.insert(voter, now);
                            if quorum.matched(voter).is_some_and(|m| m >= quorum.last_index()) {
                                caught_up.insert(voter, now);
                            }
                        }
                        Ok(_) => {}
                        Err(e) => tracing::debug!("dropping a raft message: {e}"),
                    }
                }
                Some(Event::Propose(data, reply)) => {
                    let _ = reply.send(quorum.propose(data));
                }
                None => return,
            },
        }
        let Some(c) = controller.upgrade() else { return };
        while let Some(ready) = quorum.ready() {
            peers.send(&ready.send_now);
            if !ready.persist.is_empty()
                && let Err(e) = persist_waiting(&c, &mut store, &ready.persist).await
            {
                tracing::error!("the metadata quorum's store failed; this controller stops: {e}");
                return;
            }
            peers.send(&ready.send_after_persist);
            {
                let mut p = c.published();
                if let Some(snapshot) = &ready.snapshot {
                    match MetadataImage::decode_snapshot(&snapshot.data) {
                        Ok(image) => {
                            p.image = Arc::new(image);
                            p.snapshot = Some(snapshot.data.clone());
                            p.tail.clear();
                        }
                        Err(e) => tracing::error!("an installed metadata snapshot is corrupt: {e}"),
                    }
                }
                for committed in &ready.committed {
                    apply(&mut p, committed.index, &committed.data);
                }
            }
            let advanced = quorum.advance(ready);
            peers.send(&advanced.send);
            let mut p = c.published();
            for committed in &advanced.committed {
                apply(&mut p, committed.index, &committed.data);
            }
        }
        // Leadership and the "current" flag: a new leader proposes an empty entry of its own
        // term and is current once it is applied.
        let leader = quorum.leader().map(|l| l as BrokerId);
        let is_leader = quorum.is_leader();
        let status = quorum.progress().map(|progress| {
            let now = clock.wall_ms();
            let voters = progress.iter().map(|v| {
                if Some(v.id) == quorum.leader() {
                    // The leader itself: always at its own end.
                    heard.insert(v.id, now);
                    caught_up.insert(v.id, now);
                }
                // A voter not heard from since this node took over: its log end is unknown
                // (Raft starts its progress from nothing).
                let heard_ms = heard.get(&v.id).copied();
                VoterStatus {
                    id: v.id as BrokerId,
                    log_end: heard_ms.map_or(-1, |_| i64::try_from(v.log_end).unwrap_or(i64::MAX)),
                    last_heard_ms: heard_ms.unwrap_or(-1),
                    caught_up_ms: caught_up.get(&v.id).copied().unwrap_or(-1),
                }
            });
            let voters = voters.collect();
            let (term, committed) = (quorum.term(), quorum.committed_index());
            QuorumStatus { leader: leader.unwrap_or(-1), term, committed, voters }
        });
        let propose_marker = {
            let mut p = c.published();
            p.leader = leader;
            p.quorum = status;
            if is_leader != p.is_leader {
                p.is_leader = is_leader;
                p.current = false;
                term_start_nonce = None;
                // DescribeQuorum reports what this node heard while it leads, as Kafka's.
                heard.clear();
                caught_up.clear();
            }
            if let Some(nonce) = term_start_nonce
                && p.applied.get(&nonce).is_some_and(|&i| i > 0)
            {
                p.current = true;
                p.applied.remove(&nonce);
                term_start_nonce = None;
            }
            is_leader && !p.current && term_start_nonce.is_none()
        };
        if propose_marker {
            let nonce = c.nonce.fetch_add(2, Ordering::Relaxed);
            c.published().applied.insert(nonce, 0);
            if quorum.propose(encode_entry(nonce, &[])).is_ok() {
                term_start_nonce = Some(nonce);
            }
        }
        let compact = {
            let p = c.published();
            (p.tail.len() > SNAPSHOT_EVERY_ENTRIES)
                .then(|| (p.image.offset, p.image.encode_snapshot()))
        };
        if let Some((offset, data)) = compact {
            match quorum.compact(offset, data.clone()) {
                Ok(persist) => {
                    if let Err(e) = persist_waiting(&c, &mut store, &persist).await {
                        tracing::error!(
                            "the metadata quorum's store failed; this controller stops: {e}"
                        );
                        return;
                    }
                    let mut p = c.published();
                    p.snapshot = Some(data);
                    p.tail.retain(|(i, _)| *i > offset);
                }
                Err(e) => tracing::warn!("metadata snapshot failed: {e}"),
            }
        }
        c.applied.notify_waiters();
    }
}

/// Persists `persist`, waiting out a shortage of room (disk space, or descriptors) with tries
/// [`STORE_RETRY`] apart, and the Raft member waits with it, as one on a slow disk would, taking
/// up where it left off once there is room. A try that fails so leaves nothing that counts: the
/// entries' tail is written again from the same place, a frame written twice is read back as
/// the later one, and the snapshot and hard state are replaced whole. Meanwhile the node's
/// broker takes its metadata from the active controller. Any other failure is returned, and the
/// controller stops.
async fn persist_waiting(
    c: &Controller,
    store: &mut QuorumStore,
    persist: &Persist,
) -> Result<(), StoreError> {
    let mut waited = false;
    loop {
        match store.persist(persist).await {
            Ok(()) => {
                if waited {
                    tracing::info!("the metadata quorum's store has room again");
                    c.published().store_failed = false;
                }
                return Ok(());
            }
            Err(StoreError::Io(e)) if Shortage::of(&e).is_some() => {
                if !waited {
                    tracing::warn!(
                        "the metadata quorum's store is out of room; this controller waits for it: {e}"
                    );
                    c.store_failed();
                    waited = true;
                }
                c.env.clock.sleep(STORE_RETRY).await;
            }
            Err(e) => {
                c.store_failed();
                return Err(e);
            }
        }
    }
}

fn apply(p: &mut Published, index: u64, data: &Bytes) {
    match decode_entry(data) {
        Ok((nonce, records)) => {
            let mut image = (*p.image).clone();
            for record in &records {
                image.apply(index, record);
            }
            image.offset = image.offset.max(index);
            p.image = Arc::new(image);
            p.tail.push_back((index, data.clone()));
            if let Some(slot) = p.applied.get_mut(&nonce) {
                *slot = index;
            }
        }
        Err(e) => tracing::error!(index, "an undecodable metadata entry is skipped: {e}"),
    }
}

/// The bytes of peers' Raft messages queued for the Raft loop, held under a limit.
#[derive(Debug)]
pub(super) struct Inbox {
    bytes: AtomicUsize,
    max: usize,
}

impl Inbox {
    pub(super) fn new(max: usize) -> Inbox {
        Inbox { bytes: AtomicUsize::new(0), max }
    }

    /// Whether a message of `len` bytes may be queued: if so, it counts until
    /// [`Inbox::taken`].
    pub(super) fn admit(&self, len: usize) -> bool {
        let before = self.bytes.fetch_add(len, Ordering::Relaxed);
        if before.saturating_add(len) > self.max {
            self.bytes.fetch_sub(len, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// A message of `len` bytes left the queue (or never entered it).
    pub(super) fn taken(&self, len: usize) {
        self.bytes.fetch_sub(len, Ordering::Relaxed);
    }

    /// The bytes queued.
    pub(super) fn queued(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }
}

/// Outgoing Raft messages: one queue and connection task per peer.
pub(super) struct Peers {
    queues: BTreeMap<u64, mpsc::Sender<Bytes>>,
}

impl Peers {
    pub(super) fn new(controller: &Arc<Controller>) -> Peers {
        let mut queues = BTreeMap::new();
        for (&id, addr) in &controller.config.voters {
            let (Some(addr), true) = (addr, id != controller.config.node) else { continue };
            let (tx, rx) = mpsc::channel(PEER_QUEUE_MAX);
            queues.insert(id as u64, tx);
            let env = controller.env.clone();
            let from = controller.config.node;
            controller.env.spawn("controller-peer", peer_loop(env, from, *addr, rx));
        }
        Peers { queues }
    }

    fn send(&self, messages: &[(u64, Bytes)]) {
        for (to, message) in messages {
            if let Some(queue) = self.queues.get(to) {
                let _ = queue.try_send(message.clone());
            }
        }
    }
}

/// Keeps a connection to one peer and writes its messages; on a failure drops what is queued
/// (Raft resends) and reconnects on the next message.
async fn peer_loop(env: Env, from: BrokerId, addr: SocketAddr, mut rx: mpsc::Receiver<Bytes>) {
    let mut conn: Option<Box<dyn Conn>> = None;
    while let Some(message) = rx.recv().await {
        if conn.is_none() {
            match timeout(&*env.clock, TICK * 5, env.net.connect(addr)).await {
                Ok(Ok(mut c)) => {
                    let hello = Hello { from, channel: Channel::Raft }.encode();
                    if write_frame(&mut *c, &hello).await.is_ok() {
                        conn = Some(c);
                    }
                }
                _ => {
                    while rx.try_recv().is_ok() {}
                    env.clock.sleep(TICK).await;
                    continue;
                }
            }
        }
        if let Some(c) = conn.as_mut()
            && write_frame(&mut **c, &message).await.is_err()
        {
            conn = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inbox_admits_messages_up_to_its_limit_and_frees_what_is_taken() {
        let inbox = Inbox::new(100);
        assert!(inbox.admit(60));
        assert!(inbox.admit(40));
        assert_eq!(inbox.queued(), 100);
        // Full: refused, and the refusal counts nothing.
        assert!(!inbox.admit(1));
        assert_eq!(inbox.queued(), 100);
        inbox.taken(60);
        assert!(!inbox.admit(61));
        assert!(inbox.admit(60));
        assert_eq!(inbox.queued(), 100);
        inbox.taken(100);
        assert_eq!(inbox.queued(), 0);
    }
}
