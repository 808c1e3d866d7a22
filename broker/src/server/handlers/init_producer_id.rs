//! InitProducerId: a fresh producer id (or a bumped epoch for a producer that asks with its
//! current id and epoch, KIP-360). Transactional ids are refused: transactions are not offered.

use std::sync::Arc;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, ProducerId as WireProducerId,
};

use super::code;
use crate::model::ProducerId;
use crate::node::Broker;
use crate::producer_ids::ProducerIds;

/// Answers InitProducerId.
pub async fn handle(
    broker: &Arc<Broker>,
    request: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let mut response = InitProducerIdResponse::default();
    response.producer_id = WireProducerId(-1);
    response.producer_epoch = -1;
    if request.transactional_id.is_some() {
        response.error_code = code(ResponseError::InvalidRequest);
        return response;
    }
    let Some(membership) = broker.membership() else {
        response.error_code = code(ResponseError::CoordinatorNotAvailable);
        return response;
    };
    let mut ids = broker.producer_ids.lock().await;
    let current = ProducerId(request.producer_id.0);
    if current.0 >= 0
        && ProducerIds::was_allocated(&membership.image(), current)
        && request.producer_epoch >= 0
        && request.producer_epoch < i16::MAX
    {
        response.producer_id = request.producer_id;
        response.producer_epoch = request.producer_epoch + 1;
        return response;
    }
    match ids.allocate(membership).await {
        Ok((id, epoch)) => {
            response.producer_id = WireProducerId(id.0);
            response.producer_epoch = epoch.0;
        }
        Err(error) => {
            tracing::warn!("producer id allocation failed: {error}");
            response.error_code = code(ResponseError::CoordinatorNotAvailable);
        }
    }
    response
}
