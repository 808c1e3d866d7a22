//! InitProducerId: a fresh producer id with epoch 0. A producer that asks with its current id
//! and epoch (KIP-360, after a sequence error) gets a fresh id too, as Kafka answers a producer
//! without a transactional id: bumping the epoch it names could hand two clients the same id
//! and epoch (a stale one asking twice, or after another's bump), and a partition would then
//! take one's batch for the other's retry and acknowledge it unwritten. Transactions are not
//! offered: a transactional id is refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which
//! clients take as fatal at once. A producer id and epoch of which only one is given is
//! INVALID_REQUEST, as in Kafka. When no id can be had (the controller does not answer for the
//! next block) the answer is COORDINATOR_LOAD_IN_PROGRESS, as Kafka's: clients try again. (The
//! Java producer answers COORDINATOR_NOT_AVAILABLE by looking up a transaction coordinator,
//! which a producer without a transactional id has no key for.)

use std::sync::Arc;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, ProducerId as WireProducerId,
};

use super::code;
use crate::node::Broker;

/// Answers InitProducerId.
pub async fn handle(
    broker: &Arc<Broker>,
    request: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let mut response = InitProducerIdResponse::default();
    response.producer_id = WireProducerId(-1);
    response.producer_epoch = -1;
    if request.transactional_id.is_some() {
        response.error_code = code(ResponseError::TransactionalIdAuthorizationFailed);
        return response;
    }
    if (request.producer_id.0 == -1) != (request.producer_epoch == -1) {
        response.error_code = code(ResponseError::InvalidRequest);
        return response;
    }
    let Some(membership) = broker.membership() else {
        response.error_code = code(ResponseError::CoordinatorLoadInProgress);
        return response;
    };
    match broker.producer_ids.allocate(membership).await {
        Ok((id, epoch)) => {
            response.producer_id = WireProducerId(id.0);
            response.producer_epoch = epoch.0;
        }
        Err(error) => {
            tracing::warn!("producer id allocation failed: {error}");
            response.error_code = code(ResponseError::CoordinatorLoadInProgress);
        }
    }
    response
}
