//! The Kafka wire protocol: bytes in, typed messages out.
//!
//! This layer is pure: no sockets, no async, no clock. Everything in it can
//! be tested with byte fixtures.
//!
#![doc = include_str!("../../docs/protocol.md")]

pub mod api;
pub mod codec;
pub mod error_code;
pub mod frame;
pub mod group;
pub mod messages;

pub use api::{
    ApiKey, ApiVersionTable, ApiVersionsExchange, ExchangeError, ExchangeStep, NoCommonVersion,
    VersionRange,
};
pub use codec::{DecodeError, EncodeError, RawTaggedField, Reader, Writer};
pub use error_code::ErrorCode;
pub use frame::{FrameDecoder, FrameError, RequestHeader, ResponseHeader, DEFAULT_MAX_FRAME_SIZE};
pub use messages::{Message, Request};
