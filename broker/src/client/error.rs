//! What can go wrong with a call, split by what the caller may conclude from it.
//!
//! The split is the point: a checker may treat a request that was never sent as not having
//! happened, but a request that was sent and got no answer (a timeout, a reset, a closed
//! connection, an answer that would not decode) may or may not have taken effect. Such an
//! outcome is *indeterminate* and must never be guessed either way.

use std::io;

/// Why one request/response exchange failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The connection could not be opened (refused, unreachable, or the connect timed out):
    /// nothing was sent.
    #[error("could not connect: {0:?}")]
    Unreachable(io::ErrorKind),
    /// The request could not be encoded: nothing was sent.
    #[error("could not encode the request: {0}")]
    Encode(String),
    /// No answer arrived within the deadline. The request may have been delivered and acted on.
    #[error("no answer within the deadline")]
    TimedOut,
    /// The connection failed after the request started leaving. It may have been acted on.
    #[error("connection failed mid-call: {0:?}")]
    Connection(io::ErrorKind),
    /// An answer arrived but could not be understood (bad frame, bad header, wrong correlation
    /// id, undecodable body). The request was received; its effect is unknown.
    #[error("bad response: {0}")]
    BadResponse(String),
}

impl CallError {
    /// Whether the request may have taken effect: true for everything after bytes may have left.
    pub fn is_indeterminate(&self) -> bool {
        !matches!(self, CallError::Unreachable(_) | CallError::Encode(_))
    }
}
