//! Producer ids for idempotent producers. The controller hands each broker blocks of ids
//! through the metadata log, so no two brokers — and no restart of one — ever give out the
//! same id; this broker serves ids from its current block and asks for the next when it runs
//! out.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::controller::logic::ControllerError;
use crate::controller::membership::Membership;
use crate::controller::rpc::{Request, Response};
use crate::model::{ProducerEpoch, ProducerId};

/// How long an allocation may wait for the controller.
pub const ALLOCATE_TIMEOUT: Duration = Duration::from_secs(10);

/// Allocates producer ids from blocks the controller granted.
#[derive(Default)]
pub struct ProducerIds {
    /// The current block: the next id and one past its last.
    block: tokio::sync::Mutex<(i64, i64)>,
    /// Calls for a block that failed so far. An allocation that waited behind a call that
    /// failed fails too, at once, rather than make its own: requests queued behind a controller
    /// that does not answer would otherwise wait [`ALLOCATE_TIMEOUT`] each in turn.
    failed_calls: AtomicU64,
}

impl ProducerIds {
    /// A fresh id with epoch 0.
    pub async fn allocate(
        &self,
        membership: &Membership,
    ) -> Result<(ProducerId, ProducerEpoch), ControllerError> {
        let failed_before = self.failed_calls.load(Ordering::Acquire);
        let mut block = self.block.lock().await;
        if block.0 >= block.1 {
            if self.failed_calls.load(Ordering::Acquire) != failed_before {
                return Err(ControllerError::Timeout);
            }
            let request = Request::ProducerIds { broker_id: membership.node() };
            let granted = match membership.call(&request, ALLOCATE_TIMEOUT).await {
                Ok(Response::ProducerIds { first, count, .. }) => Ok((first, first + count)),
                Ok(Response::Error { error, .. }) => Err(error),
                Ok(_) => Err(ControllerError::Timeout),
                Err(error) => Err(error),
            };
            match granted {
                Ok(granted) => *block = granted,
                Err(error) => {
                    self.failed_calls.fetch_add(1, Ordering::AcqRel);
                    return Err(error);
                }
            }
        }
        let id = block.0;
        block.0 += 1;
        Ok((ProducerId(id), ProducerEpoch(0)))
    }
}
