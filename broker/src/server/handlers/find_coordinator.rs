//! FindCoordinator: on a single node every group's coordinator is this broker. Transactional
//! coordinators are not offered (transactions are not supported).

use std::sync::Arc;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::code;
use crate::node::Broker;

const KEY_TYPE_GROUP: i8 = 0;

/// Answers FindCoordinator (single key before v4, batched keys from v4).
pub fn handle(
    broker: &Arc<Broker>,
    request: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let (host, port) = broker.advertised();
    let node = BrokerId(broker.config.node_id);
    let mut response = FindCoordinatorResponse::default();
    let error = if request.key_type == KEY_TYPE_GROUP {
        0
    } else {
        code(ResponseError::CoordinatorNotAvailable)
    };
    if version < 4 {
        response.error_code = error;
        if error == 0 {
            response.node_id = node;
            response.host = StrBytes::from_string(host);
            response.port = port;
        } else {
            response.node_id = BrokerId(-1);
            response.error_message =
                Some(StrBytes::from_static_str("transactions are not supported"));
        }
        return response;
    }
    for key in request.coordinator_keys {
        let mut c = Coordinator::default();
        c.key = key;
        c.error_code = error;
        if error == 0 {
            c.node_id = node;
            c.host = StrBytes::from_string(host.clone());
            c.port = port;
        } else {
            c.node_id = BrokerId(-1);
        }
        response.coordinators.push(c);
    }
    response
}
