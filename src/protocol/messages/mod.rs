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
pub mod consumer_group_heartbeat;
pub mod create_topics;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_offsets;
pub mod metadata;
pub mod offset_commit;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod sasl_authenticate;
pub mod sasl_handshake;
pub mod sync_group;

#[cfg(test)]
pub(crate) mod testing;

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

/// Decodes a response body read at `version`.
///
/// Bytes left over after a complete message are tolerated and their count
/// returned, for the caller to log: the Java client and librdkafka accept
/// them too, and librdkafka's mock broker sends one (an extra empty tag
/// section after flexible Metadata responses). Nothing in the message is
/// lost by ignoring them; a message that ends early is still an error.
pub fn decode_response_body<M: Message>(
    body: bytes::Bytes,
    version: i16,
) -> Result<(M, usize), DecodeError> {
    let mut r = Reader::new(body);
    let message = M::decode(&mut r, version)?;
    Ok((message, r.remaining()))
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

/// The error for a field that `version` cannot carry and that may not be
/// dropped silently (it is not `ignorable` in the schema and does not hold
/// its default).
pub(crate) fn not_in_version(what: &'static str, version: i16) -> EncodeError {
    EncodeError::FieldNotInVersion { what, version }
}

/// Refuses a null read at a version where the field may not be null.
pub(crate) fn refuse_null<T>(
    value: Option<T>,
    not_nullable_here: bool,
    what: &'static str,
) -> Result<Option<T>, DecodeError> {
    if value.is_none() && not_nullable_here {
        Err(DecodeError::UnexpectedNull { what })
    } else {
        Ok(value)
    }
}
