//! `queued.max.request.bytes`: the bytes of the client request frames being read and handled,
//! on all connections together. A connection reads its next frame's size, then waits for that
//! many bytes of the budget before it reads (and allocates) the body. As in Kafka, a request
//! gives them back once it is decoded (a frame that does not decode, at once), except a
//! produce, whose records are slices of its frame: it gives them back once they are appended,
//! and its wait for a sync or for the followers holds neither bytes of the budget nor its
//! frame. So however many clients send large requests at once, the frames being read and the
//! produces being appended hold at most the budget; the rest wait, unread, in their sockets,
//! and their senders slow down with them (TCP's flow control). No request holds bytes while it
//! waits on another request, so a full budget always drains.
//!
//! What other requests keep once decoded is not counted, as in Kafka, and may keep their
//! frames allocated until they are answered: a long poll's fetch, a commit waiting to be
//! durable, a member's metadata kept by its group.
//!
//! Waiters are served in turn, so a large frame is not passed over for ever by small ones: the
//! first in line has bytes set aside for it as they are given back. A frame larger than the
//! whole budget takes all of it, and waits until nothing else holds any.
//!
//! There is no limit by default, as in Kafka. With one, a client that sends a frame's size and
//! then stops sending holds that frame's share until its connection is closed as idle
//! (`connections_max_idle_ms`), and the frames waiting behind it wait as long. A connection
//! waiting for its share reads nothing meanwhile, so it goes on counting as open (towards
//! `max_connections`) until its turn comes, even if its client has left.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How often a connection waiting for request memory is logged, at most.
pub const REQUEST_MEMORY_LOG_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

/// The request bytes all client connections may hold at once.
#[derive(Debug)]
pub struct RequestMemory {
    /// None: no limit.
    permits: Option<Arc<Semaphore>>,
    budget: usize,
}

/// Bytes of a [`RequestMemory`] held for one request, given back when dropped.
#[derive(Debug)]
pub struct Lease {
    _permit: Option<OwnedSemaphorePermit>,
}

impl RequestMemory {
    /// A budget of `budget` bytes (at most [`Semaphore::MAX_PERMITS`]).
    pub fn new(budget: usize) -> RequestMemory {
        let budget = budget.clamp(1, Semaphore::MAX_PERMITS);
        RequestMemory { permits: Some(Arc::new(Semaphore::new(budget))), budget }
    }

    /// No limit: every frame is read at once.
    pub fn unlimited() -> RequestMemory {
        RequestMemory { permits: None, budget: 0 }
    }

    /// `queued.max.request.bytes`: -1 for no limit, else a budget of that many bytes.
    pub fn from_config(bytes: i64) -> RequestMemory {
        usize::try_from(bytes).map_or_else(|_| RequestMemory::unlimited(), RequestMemory::new)
    }

    /// Whether a frame of `len` bytes can be given its bytes now, without waiting.
    pub fn has_room_for(&self, len: usize) -> bool {
        self.permits.as_ref().is_none_or(|p| p.available_permits() >= self.share(len))
    }

    /// Waits for `len` bytes of the budget (all of it, for a frame larger than the budget).
    pub async fn lease(&self, len: usize) -> Lease {
        let Some(permits) = &self.permits else { return Lease { _permit: None } };
        let wanted = u32::try_from(self.share(len)).unwrap_or(u32::MAX);
        // The semaphore is never closed, so acquiring cannot fail; should it, the request
        // goes on unaccounted rather than the connection failing.
        Lease { _permit: Arc::clone(permits).acquire_many_owned(wanted).await.ok() }
    }

    /// Bytes held by requests now, with those set aside for the frame first in line (0 with
    /// no limit: nothing is counted).
    pub fn in_use(&self) -> usize {
        self.permits.as_ref().map_or(0, |p| self.budget - p.available_permits())
    }

    /// The whole budget (0 with no limit).
    pub fn budget(&self) -> usize {
        self.budget
    }

    fn share(&self, len: usize) -> usize {
        len.min(self.budget).min(u32::MAX as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `lease` completes when polled once.
    fn ready<F: std::future::Future>(lease: F) -> Option<F::Output> {
        let mut lease = std::pin::pin!(lease);
        let waker = std::task::Waker::noop();
        match lease.as_mut().poll(&mut std::task::Context::from_waker(waker)) {
            std::task::Poll::Ready(out) => Some(out),
            std::task::Poll::Pending => None,
        }
    }

    #[test]
    fn a_frame_waits_until_the_bytes_it_needs_are_given_back() {
        let memory = RequestMemory::new(1000);
        let first = ready(memory.lease(600)).expect("room for the first");
        assert_eq!(memory.in_use(), 600);
        assert!(!memory.has_room_for(401));
        assert!(ready(memory.lease(401)).is_none(), "401 bytes past 600 of 1000");
        let second = ready(memory.lease(400)).expect("exactly the rest");
        assert_eq!(memory.in_use(), 1000);
        assert!(ready(memory.lease(1)).is_none(), "nothing left");
        drop(first);
        assert_eq!(memory.in_use(), 400);
        let third = ready(memory.lease(600)).expect("room again");
        drop((second, third));
        assert_eq!(memory.in_use(), 0);
    }

    #[test]
    fn a_frame_larger_than_the_budget_takes_all_of_it() {
        let memory = RequestMemory::new(1000);
        let small = ready(memory.lease(1)).expect("room");
        assert!(ready(memory.lease(5000)).is_none(), "waits for every byte");
        drop(small);
        let large = ready(memory.lease(5000)).expect("the whole budget, once free");
        assert_eq!(memory.in_use(), memory.budget());
        drop(large);
        assert_eq!(memory.in_use(), 0);
    }

    #[test]
    fn with_no_limit_every_frame_is_read_at_once() {
        let memory = RequestMemory::from_config(-1);
        let held: Vec<Lease> =
            (0..4).map(|_| ready(memory.lease(usize::MAX)).expect("no wait")).collect();
        assert!(memory.has_room_for(usize::MAX));
        assert_eq!((memory.in_use(), held.len()), (0, 4));
        assert_eq!(RequestMemory::from_config(2048).budget(), 2048);
    }

    #[test]
    fn waiters_are_served_in_turn() {
        let memory = RequestMemory::new(1000);
        let held = ready(memory.lease(900)).expect("room");
        let mut large = std::pin::pin!(memory.lease(800));
        let mut small = std::pin::pin!(memory.lease(50));
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        assert!(large.as_mut().poll(&mut cx).is_pending());
        // 100 bytes are free: enough for the small frame, but the large one asked first (and
        // has them set aside).
        assert!(
            small.as_mut().poll(&mut cx).is_pending(),
            "a later small frame passed a large one"
        );
        assert_eq!(memory.in_use(), 1000);
        drop(held);
        assert!(large.as_mut().poll(&mut cx).is_ready());
        assert!(small.as_mut().poll(&mut cx).is_ready());
    }
}
