//! One module per Kafka API; each names the schema it follows and the
//! versions it implements.
//!
//! Every message type implements [`Message`] in both directions (encode and
//! decode), for requests and for responses alike: the client writes
//! requests and reads responses, and the test brokers built on this crate
//! do the reverse.

use super::api::{ApiKey, VersionRange};
use super::codec::{DecodeError, EncodeError, Reader, Writer};

pub mod api_versions;

/// A request or response body of one Kafka API.
pub trait Message: Sized {
    /// The API this message belongs to.
    const API_KEY: ApiKey;
    /// The versions this client can encode and decode.
    const VERSIONS: VersionRange;

    /// Writes the body at `version`.
    fn encode(&self, w: &mut Writer, version: i16) -> Result<(), EncodeError>;

    /// Reads the body at `version`.
    fn decode(r: &mut Reader, version: i16) -> Result<Self, DecodeError>;
}

/// A request, tied to the response it is answered with.
pub trait Request: Message {
    /// The response body type.
    type Response: Message;
}

/// Fails with the API's name unless `version` is one this client implements.
pub(crate) fn check_encode_version<M: Message>(version: i16) -> Result<(), EncodeError> {
    if M::VERSIONS.contains(version) {
        Ok(())
    } else {
        Err(EncodeError::UnsupportedVersion {
            api: M::API_KEY.name(),
            version,
        })
    }
}

/// Fails with the API's name unless `version` is one this client implements.
pub(crate) fn check_decode_version<M: Message>(version: i16) -> Result<(), DecodeError> {
    if M::VERSIONS.contains(version) {
        Ok(())
    } else {
        Err(DecodeError::UnsupportedVersion {
            api: M::API_KEY.name(),
            version,
        })
    }
}
