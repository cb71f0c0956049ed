//! Framing: the `int32` size prefix, the frame-size limit, and the request
//! and response headers.
//!
//! Every Kafka request and response is `int32 size` followed by `size`
//! bytes. The size is checked against a limit before a single byte of the
//! body is buffered, so an absurd or hostile length costs nothing.

use super::api::ApiKey;
use super::codec::{DecodeError, EncodeError, RawTaggedField, Reader, Writer};
use super::messages::{check_encode_version, Message};
use bytes::{Buf, Bytes, BytesMut};
use std::fmt;

/// The default limit on one frame's size: 100 MiB, as `socket.request.max.bytes`
/// on the broker side.
pub const DEFAULT_MAX_FRAME_SIZE: usize = 100 * 1024 * 1024;

/// A frame's size prefix is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrameError {
    /// The size prefix is negative.
    NegativeSize(i32),
    /// The size prefix exceeds the configured limit.
    TooLarge {
        /// The size the prefix announced.
        size: usize,
        /// The configured limit.
        max: usize,
    },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::NegativeSize(n) => write!(f, "negative frame size {n}"),
            FrameError::TooLarge { size, max } => {
                write!(f, "frame of {size} bytes exceeds the limit of {max} bytes")?;
                if looks_like_tls(*size) {
                    // A TLS listener answers a plaintext client with an
                    // alert (or handshake) record: content type 0x15 (or
                    // 0x16), then version 0x03 0x0N, read here as a size.
                    f.write_str(
                        " (the bytes read as a TLS record: is this a TLS listener? set security.protocol to SSL or SASL_SSL)",
                    )?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for FrameError {}

/// Whether a size prefix is the start of a TLS record: content type alert
/// (21) or handshake (22), then major version 3.
fn looks_like_tls(size: usize) -> bool {
    let prefix = (size as u32).to_be_bytes();
    matches!(prefix[0], 0x15 | 0x16) && prefix[1] == 0x03
}

/// Checks a 4-byte size prefix against `max` and returns the body length.
pub fn frame_size(prefix: [u8; 4], max: usize) -> Result<usize, FrameError> {
    let size = i32::from_be_bytes(prefix);
    if size < 0 {
        return Err(FrameError::NegativeSize(size));
    }
    let size = size as usize;
    if size > max {
        return Err(FrameError::TooLarge { size, max });
    }
    Ok(size)
}

/// Splits complete frames off the front of a receive buffer.
#[derive(Debug, Clone, Copy)]
pub struct FrameDecoder {
    max: usize,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        FrameDecoder::new(DEFAULT_MAX_FRAME_SIZE)
    }
}

impl FrameDecoder {
    /// A decoder refusing frames larger than `max` bytes.
    pub fn new(max: usize) -> Self {
        FrameDecoder { max }
    }

    /// The frame-size limit.
    pub fn max_frame_size(&self) -> usize {
        self.max
    }

    /// Takes the next complete frame's body off `buf`, or returns `Ok(None)`
    /// when more bytes are needed. The size prefix is checked as soon as its
    /// four bytes are present, so an oversized frame fails before its body
    /// is buffered.
    pub fn decode(&self, buf: &mut BytesMut) -> Result<Option<Bytes>, FrameError> {
        let Some(prefix) = buf.get(..4) else {
            return Ok(None);
        };
        let size = frame_size([prefix[0], prefix[1], prefix[2], prefix[3]], self.max)?;
        if buf.len() < 4 + size {
            return Ok(None);
        }
        buf.advance(4);
        Ok(Some(buf.split_to(size).freeze()))
    }
}

/// A request header (v1; v2 adds tagged fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHeader {
    /// The raw API key (kept raw so a broker-side reader can answer keys it
    /// does not know).
    pub api_key: i16,
    /// The API version.
    pub api_version: i16,
    /// Matches the response to the request.
    pub correlation_id: i32,
    /// The client's `client.id`.
    pub client_id: Option<String>,
    /// Tagged fields of header v2 this client does not know.
    pub unknown_tagged_fields: Vec<RawTaggedField>,
}

impl RequestHeader {
    /// Writes the header; `flexible` selects header v2.
    pub fn encode(&self, w: &mut Writer, flexible: bool) -> Result<(), EncodeError> {
        w.i16(self.api_key);
        w.i16(self.api_version);
        w.i32(self.correlation_id);
        // The client id stays a classic (int16-prefixed) string even in
        // header v2: it must be readable before the version is known.
        w.nullable_string("client_id", self.client_id.as_deref(), false)?;
        if flexible {
            w.tagged_fields(&[], &self.unknown_tagged_fields);
        }
        Ok(())
    }

    /// Reads a header. Header v1 or v2 follows from the API key and version
    /// read at its start; an API key this client does not know is read as
    /// header v1.
    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let api_key = r.i16("api_key")?;
        let api_version = r.i16("api_version")?;
        let correlation_id = r.i32("correlation_id")?;
        let client_id = r.nullable_string("client_id", false)?;
        let flexible = ApiKey::from_code(api_key)
            .is_some_and(|api| api.request_header_version(api_version) == 2);
        let unknown_tagged_fields = if flexible {
            r.unknown_tagged_fields()?
        } else {
            Vec::new()
        };
        Ok(RequestHeader {
            api_key,
            api_version,
            correlation_id,
            client_id,
            unknown_tagged_fields,
        })
    }
}

/// A response header (v0; v1 adds tagged fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHeader {
    /// The correlation id of the request answered.
    pub correlation_id: i32,
    /// Tagged fields of header v1 this client does not know.
    pub unknown_tagged_fields: Vec<RawTaggedField>,
}

impl ResponseHeader {
    /// Writes the header at `header_version` (0 or 1).
    pub fn encode(&self, w: &mut Writer, header_version: i16) {
        w.i32(self.correlation_id);
        if header_version >= 1 {
            w.tagged_fields(&[], &self.unknown_tagged_fields);
        }
    }

    /// Reads a header at `header_version` (0 or 1).
    pub fn decode(r: &mut Reader, header_version: i16) -> Result<Self, DecodeError> {
        let correlation_id = r.i32("correlation_id")?;
        let unknown_tagged_fields = if header_version >= 1 {
            r.unknown_tagged_fields()?
        } else {
            Vec::new()
        };
        Ok(ResponseHeader {
            correlation_id,
            unknown_tagged_fields,
        })
    }
}

/// Encodes a whole request frame (size prefix, header, body) for `version`.
pub fn encode_request<M: Message>(
    body: &M,
    version: i16,
    correlation_id: i32,
    client_id: Option<&str>,
) -> Result<Bytes, EncodeError> {
    check_encode_version::<M>(version)?;
    let header = RequestHeader {
        api_key: M::API_KEY.code(),
        api_version: version,
        correlation_id,
        client_id: client_id.map(str::to_owned),
        unknown_tagged_fields: Vec::new(),
    };
    let mut w = Writer::new();
    w.i32(0); // size, patched below
    header.encode(&mut w, M::API_KEY.request_header_version(version) == 2)?;
    body.encode(&mut w, version)?;
    finish_frame(w)
}

/// Encodes a whole response frame (size prefix, header, body) for `version`.
pub fn encode_response<M: Message>(
    body: &M,
    version: i16,
    correlation_id: i32,
) -> Result<Bytes, EncodeError> {
    encode_response_with_capacity(body, version, correlation_id, 0)
}

/// [`encode_response`] into a buffer that starts with room for `capacity`
/// bytes (a frame of megabytes then is not regrown as it is written).
pub(crate) fn encode_response_with_capacity<M: Message>(
    body: &M,
    version: i16,
    correlation_id: i32,
    capacity: usize,
) -> Result<Bytes, EncodeError> {
    check_encode_version::<M>(version)?;
    let header = ResponseHeader {
        correlation_id,
        unknown_tagged_fields: Vec::new(),
    };
    let mut w = Writer::from_buf(BytesMut::with_capacity(capacity));
    w.i32(0);
    header.encode(&mut w, M::API_KEY.response_header_version(version));
    body.encode(&mut w, version)?;
    finish_frame(w)
}

/// Patches the size prefix of a frame written after a placeholder `i32`.
pub(crate) fn finish_frame(w: Writer) -> Result<Bytes, EncodeError> {
    let mut buf = w.into_inner();
    finish_frame_in_place(&mut buf)?;
    Ok(buf.freeze())
}

/// Writes the size prefix of the frame `buf` holds (its first 4 bytes).
pub(crate) fn finish_frame_in_place(buf: &mut BytesMut) -> Result<(), EncodeError> {
    let size = buf.len() - 4;
    let size = i32::try_from(size).map_err(|_| EncodeError::TooLong {
        what: "frame",
        length: size,
    })?;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(())
}

/// Reads a response frame body (size prefix already removed): the header at
/// the version the API requires, then the body, which must use every byte.
pub fn decode_response<M: Message>(
    frame: Bytes,
    version: i16,
) -> Result<(ResponseHeader, M), DecodeError> {
    let mut r = Reader::new(frame);
    let header = ResponseHeader::decode(&mut r, M::API_KEY.response_header_version(version))?;
    let body = M::decode(&mut r, version)?;
    r.finish()?;
    Ok((header, body))
}

/// Reads a request frame body (size prefix already removed): the header,
/// then the body at the version the header names, which must use every byte.
///
/// This is the broker side of [`encode_request`], for test brokers built on
/// this crate: read the header alone with [`RequestHeader::decode`] to learn
/// the API, then call this with the matching message type.
pub fn decode_request<M: Message>(frame: Bytes) -> Result<(RequestHeader, M), DecodeError> {
    let mut r = Reader::new(frame);
    let header = RequestHeader::decode(&mut r)?;
    if header.api_key != M::API_KEY.code() {
        return Err(DecodeError::InvalidValue {
            what: "api_key",
            reason: "the request is for another API",
        });
    }
    let body = M::decode(&mut r, header.api_version)?;
    r.finish()?;
    Ok((header, body))
}

/// Reads the correlation id at the start of a response frame body without
/// decoding the rest.
pub fn peek_correlation_id(frame: &[u8]) -> Option<i32> {
    frame
        .get(..4)
        .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_prefix_is_checked_before_the_body() {
        let d = FrameDecoder::new(16);
        let mut buf = BytesMut::from(&[0, 0, 0, 17][..]);
        assert_eq!(
            d.decode(&mut buf),
            Err(FrameError::TooLarge { size: 17, max: 16 })
        );
        let mut buf = BytesMut::from(&[0xff, 0xff, 0xff, 0xfe][..]);
        assert_eq!(d.decode(&mut buf), Err(FrameError::NegativeSize(-2)));
    }

    #[test]
    fn a_tls_record_read_as_a_size_says_so() {
        let d = FrameDecoder::default();
        // A TLS 1.2 alert (and a handshake record) where a size should be.
        for prefix in [[0x15, 0x03, 0x03, 0x00], [0x16, 0x03, 0x01, 0x02]] {
            let e = d.decode(&mut BytesMut::from(&prefix[..])).unwrap_err();
            assert!(e.to_string().contains("TLS listener"), "{e}");
        }
        let e = d
            .decode(&mut BytesMut::from(&[0x7f, 0xff, 0xff, 0xff][..]))
            .unwrap_err();
        assert!(!e.to_string().contains("TLS"), "{e}");
    }

    #[test]
    fn frames_are_split_when_complete() {
        let d = FrameDecoder::default();
        let mut buf = BytesMut::from(&[0, 0, 0, 2, 0xaa][..]);
        assert_eq!(d.decode(&mut buf), Ok(None));
        buf.extend_from_slice(&[0xbb, 0, 0, 0, 0, 0, 0]);
        assert_eq!(
            d.decode(&mut buf),
            Ok(Some(Bytes::from_static(&[0xaa, 0xbb])))
        );
        assert_eq!(d.decode(&mut buf), Ok(Some(Bytes::new())));
        assert_eq!(d.decode(&mut buf), Ok(None));
        assert_eq!(&buf[..], &[0, 0]);
    }

    #[test]
    fn whole_frames_round_trip_with_the_right_headers() {
        use crate::protocol::messages::fetch::{FetchRequest, FetchResponse};
        use crate::protocol::messages::sasl_handshake::SaslHandshakeRequest;

        // Fetch v17 is flexible: request header v2, response header v1.
        let request = FetchRequest {
            max_wait_ms: 500,
            ..FetchRequest::default()
        };
        let frame = encode_request(&request, 17, 42, Some("lk")).unwrap();
        let mut buf = BytesMut::from(&frame[..]);
        let body = FrameDecoder::default().decode(&mut buf).unwrap().unwrap();
        // key 1, version 17, correlation id 42, client id "lk", no tags
        assert_eq!(
            &body[..13],
            &[0, 1, 0, 17, 0, 0, 0, 42, 0, 2, b'l', b'k', 0]
        );
        let (header, decoded) = decode_request::<FetchRequest>(body.clone()).unwrap();
        assert_eq!((header.correlation_id, decoded), (42, request));
        assert!(matches!(
            decode_request::<SaslHandshakeRequest>(body),
            Err(DecodeError::InvalidValue {
                what: "api_key",
                ..
            })
        ));

        let response = FetchResponse {
            session_id: 3,
            ..FetchResponse::default()
        };
        let frame = encode_response(&response, 17, 42).unwrap();
        // size, correlation id, empty tagged section of header v1
        assert_eq!(&frame[4..9], &[0, 0, 0, 42, 0]);
        let (header, decoded) = decode_response::<FetchResponse>(frame.slice(4..), 17).unwrap();
        assert_eq!((header.correlation_id, decoded), (42, response.clone()));
        // Fetch v11 is not flexible: response header v0.
        let frame = encode_response(&response, 11, 43).unwrap();
        let (header, decoded) = decode_response::<FetchResponse>(frame.slice(4..), 11).unwrap();
        assert_eq!((header.correlation_id, decoded), (43, response));
        assert_eq!(
            encode_response(&FetchResponse::default(), 3, 1),
            Err(EncodeError::UnsupportedVersion {
                api: "Fetch",
                version: 3
            })
        );
    }

    #[test]
    fn request_header_v2_round_trips() {
        let header = RequestHeader {
            api_key: ApiKey::Fetch.code(),
            api_version: 13,
            correlation_id: 7,
            client_id: Some("c".into()),
            unknown_tagged_fields: Vec::new(),
        };
        let mut w = Writer::new();
        header.encode(&mut w, true).unwrap();
        let bytes = w.into_inner().freeze();
        // key, version, correlation id, client id "c", zero tagged fields
        assert_eq!(&bytes[..], &[0, 1, 0, 13, 0, 0, 0, 7, 0, 1, b'c', 0]);
        let mut r = Reader::new(bytes);
        assert_eq!(RequestHeader::decode(&mut r).unwrap(), header);
        r.finish().unwrap();
    }
}
