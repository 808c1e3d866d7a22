//! The Kafka wire protocol at the edge of the broker: length-prefixed frames with a size limit
//! checked before anything is allocated, request headers decoded with the header version each
//! API and version call for, and bodies decoded into typed requests with the `kafka-protocol`
//! crate. Responses are encoded the way Apache Kafka encodes them (tagged fields holding their
//! defaults are omitted, which the crate does).

pub mod api;
pub mod codec;
pub mod frame;
pub mod pieces;

pub use api::{Request, Response, SUPPORTED_APIS, supported_range};
pub use codec::{DecodeError, Decoded, decode_request, encode_response};
pub use frame::{FrameError, read_frame_body, read_frame_size};
pub use pieces::Frame;
