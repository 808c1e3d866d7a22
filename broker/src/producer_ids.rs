//! Producer ids for idempotent producers. The controller hands each broker blocks of ids
//! through the metadata log, so no two brokers — and no restart of one — ever give out the
//! same id; this broker serves ids from its current block and asks for the next when it runs
//! out.

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
    next: i64,
    end: i64,
}

impl ProducerIds {
    /// A fresh id with epoch 0.
    pub async fn allocate(
        &mut self,
        membership: &Membership,
    ) -> Result<(ProducerId, ProducerEpoch), ControllerError> {
        if self.next >= self.end {
            let request = Request::ProducerIds { broker_id: membership.node() };
            match membership.call(&request, ALLOCATE_TIMEOUT).await? {
                Response::ProducerIds { first, count, .. } => {
                    self.next = first;
                    self.end = first + count;
                }
                Response::Error { error, .. } => return Err(error),
                _ => return Err(ControllerError::Timeout),
            }
        }
        let id = self.next;
        self.next += 1;
        Ok((ProducerId(id), ProducerEpoch(0)))
    }
}
