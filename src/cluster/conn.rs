//! One connection's protocol state, without the socket: its phase
//! (connecting, the ApiVersions handshake, SASL, ready), correlation ids,
//! the requests queued and in flight (answered strictly in order, as a
//! broker handles one request per connection at a time), and its received
//! bytes cut into response frames.

use super::authentication::Authentication;
use super::framing::{self, ResponseFrames};
use super::requests::Origin;
use crate::events::{ConnectionId, ConnectionState, Purpose};
use crate::protocol::frame::RequestHeader;
use crate::protocol::{
    ApiKey, ApiVersionTable, ApiVersionsExchange, DecodeError, EncodeError, FrameError, Writer,
};
use bytes::{Bytes, BytesMut};
use std::collections::VecDeque;
use std::fmt;
use std::net::SocketAddr;
use std::time::Instant;

/// A request body that can be encoded at a version chosen later, when the
/// connection that carries it has negotiated its versions.
pub trait RequestBody: Send + fmt::Debug {
    /// The API of the request.
    fn api_key(&self) -> ApiKey;
    /// Writes the body at `version`.
    fn encode_body(&self, w: &mut Writer, version: i16) -> Result<(), EncodeError>;
    /// About how many bytes the body takes (room is made for them before
    /// it is written, so that a large body is not copied as its buffer
    /// grows); 0 when small or unknown.
    fn size_hint(&self) -> usize {
        0
    }
}

impl<R: crate::protocol::Request + Send + fmt::Debug> RequestBody for R {
    fn api_key(&self) -> ApiKey {
        R::API_KEY
    }

    fn encode_body(&self, w: &mut Writer, version: i16) -> Result<(), EncodeError> {
        self.encode(w, version)
    }
}

/// Where a connection is in its life.
///
/// ```text
///   Connecting --TCP--> Handshake --ApiVersions--> Ready
///                           |                      ^  |
///                           | (SASL configured)    |  | session lifetime
///                           v                      |  v (KIP-368)
///                       Authenticating ------------+  Authenticating{reauth}
///                       SaslHandshake v1, SaslAuthenticate...
/// ```
#[derive(Debug)]
pub(crate) enum Phase {
    /// Waiting for the TCP connect to complete, until `deadline`.
    Connecting { deadline: Instant },
    /// Connected; the ApiVersions exchange runs.
    Handshake { exchange: ApiVersionsExchange },
    /// SASL authentication runs (see [`Authentication`]). Nothing else is
    /// sent meanwhile.
    Authenticating(Authentication),
    /// Versions negotiated (and authenticated, with SASL).
    Ready {
        versions: ApiVersionTable,
        /// When the SASL session must be renewed (KIP-368), if it ends.
        reauth_at: Option<Instant>,
    },
}

/// A request on the wire, waiting for its response.
#[derive(Debug)]
pub(crate) struct InFlight {
    pub correlation_id: i32,
    pub api: ApiKey,
    pub version: i16,
    pub origin: Origin,
    pub sent_at: Instant,
    pub deadline: Instant,
}

/// A request accepted for this connection but not yet written (the
/// connection is not ready, or `max.in.flight` requests are out).
#[derive(Debug)]
pub(crate) struct Queued {
    pub origin: Origin,
    pub body: Box<dyn RequestBody>,
    pub deadline: Instant,
    /// Whether the broker answers it (all requests but a Produce with
    /// `acks=0`).
    pub answered: bool,
}

/// What [`Conn::receive`] made of received bytes: the responses they
/// completed, in order, and the error that ended the stream, if one did.
#[derive(Debug, Default)]
pub(crate) struct Received {
    pub answers: Vec<(InFlight, Bytes)>,
    pub error: Option<StreamError>,
}

impl Received {
    /// One frame's outcome: an answer, or the error that ends the stream.
    fn add(&mut self, outcome: Result<(InFlight, Bytes), StreamError>) {
        match outcome {
            Ok(answer) => self.answers.push(answer),
            Err(e) => self.error = Some(e),
        }
    }
}

/// Why a connection's byte stream cannot go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StreamError {
    Frame(FrameError),
    Decode(ApiKey, DecodeError),
    /// A response arrived with no request in flight, or with another
    /// correlation id than the oldest request's.
    Correlation {
        expected: Option<i32>,
        received: i32,
    },
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamError::Frame(e) => e.fmt(f),
            StreamError::Decode(api, e) => write!(f, "cannot decode {api} response: {e}"),
            StreamError::Correlation {
                expected: Some(expected),
                received,
            } => write!(
                f,
                "response with correlation id {received}, expected {expected}"
            ),
            StreamError::Correlation {
                expected: None,
                received,
            } => write!(
                f,
                "response with correlation id {received} and no request in flight"
            ),
        }
    }
}

/// One connection's state.
#[derive(Debug)]
pub(crate) struct Conn {
    pub id: ConnectionId,
    pub addr: String,
    pub broker: Option<i32>,
    pub purpose: Purpose,
    pub phase: Phase,
    pub peer: Option<SocketAddr>,
    pub in_flight: VecDeque<InFlight>,
    pub queue: VecDeque<Queued>,
    /// Requests the broker does not answer, handed to the runtime in the
    /// [`Action::Transmit`](super::Action::Transmit) of this number and
    /// done once it reports them written.
    pub unwritten: VecDeque<(u64, Origin, ApiKey, i16)>,
    /// How many transmits carried requests of `unwritten` so far.
    pub transmits: u64,
    /// The end of `socket.connection.setup.timeout.ms` for the whole setup
    /// (TCP, ApiVersions, SASL), until the connection first becomes ready.
    pub setup_deadline: Option<Instant>,
    /// Last time bytes crossed the socket (or it was started).
    pub last_activity: Instant,
    /// Whether it answered a request other than ApiVersions.
    pub answered: bool,
    /// Received bytes, cut into response frames.
    frames: ResponseFrames,
    next_correlation_id: i32,
}

impl Conn {
    pub fn new(
        id: ConnectionId,
        addr: String,
        broker: Option<i32>,
        purpose: Purpose,
        now: Instant,
        connect_deadline: Instant,
        max_frame_size: usize,
    ) -> Self {
        Conn {
            id,
            addr,
            broker,
            purpose,
            phase: Phase::Connecting {
                deadline: connect_deadline,
            },
            peer: None,
            in_flight: VecDeque::new(),
            queue: VecDeque::new(),
            unwritten: VecDeque::new(),
            transmits: 0,
            setup_deadline: Some(connect_deadline),
            last_activity: now,
            answered: false,
            frames: ResponseFrames::new(max_frame_size),
            next_correlation_id: 0,
        }
    }

    pub fn state(&self) -> ConnectionState {
        match self.phase {
            Phase::Connecting { .. } => ConnectionState::Connecting,
            Phase::Handshake { .. } => ConnectionState::Handshake,
            Phase::Authenticating { .. } => ConnectionState::Authenticating,
            Phase::Ready { .. } => ConnectionState::Ready,
        }
    }

    pub fn is_ready(&self) -> bool {
        matches!(self.phase, Phase::Ready { .. })
    }

    /// Ready, or renewing its SASL session (KIP-368): requests given to it
    /// go out once that is done, so it counts as live for least-loaded
    /// choice.
    pub fn is_usable(&self) -> bool {
        matches!(
            self.phase,
            Phase::Ready { .. } | Phase::Authenticating(Authentication { reauth: true, .. })
        )
    }

    pub fn versions(&self) -> Option<&ApiVersionTable> {
        match &self.phase {
            Phase::Ready { versions, .. }
            | Phase::Authenticating(Authentication { versions, .. }) => Some(versions),
            _ => None,
        }
    }

    /// Requests sent or waiting here: the load used for least-loaded choice.
    pub fn load(&self) -> usize {
        self.in_flight.len() + self.queue.len()
    }

    /// Encodes one request frame with the next correlation id, appended to
    /// `out` (several frames for one write share a buffer), and records it
    /// as in flight; on an error `out` is left as it was.
    #[allow(clippy::too_many_arguments)]
    pub fn encode(
        &mut self,
        out: &mut BytesMut,
        now: Instant,
        origin: Origin,
        body: &dyn RequestBody,
        version: i16,
        client_id: Option<&str>,
        deadline: Instant,
    ) -> Result<(), EncodeError> {
        let start = out.len();
        out.reserve(64 + client_id.map_or(0, str::len) + body.size_hint());
        let mut w = Writer::from_buf(out.split_off(start));
        // On an error the partial frame is dropped with `w`.
        Self::write_frame(&mut w, self.next_correlation_id, body, version, client_id)?;
        out.unsplit(w.into_inner());
        let api = body.api_key();
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        self.in_flight.push_back(InFlight {
            correlation_id,
            api,
            version,
            origin,
            sent_at: now,
            deadline,
        });
        self.last_activity = now;
        Ok(())
    }

    /// Writes one frame (size prefix, header, body) to the empty `w`.
    fn write_frame(
        w: &mut Writer,
        correlation_id: i32,
        body: &dyn RequestBody,
        version: i16,
        client_id: Option<&str>,
    ) -> Result<(), EncodeError> {
        let api = body.api_key();
        let header = RequestHeader {
            api_key: api.code(),
            api_version: version,
            correlation_id,
            client_id: client_id.map(str::to_owned),
            unknown_tagged_fields: Vec::new(),
        };
        w.i32(0);
        header.encode(w, api.request_header_version(version) == 2)?;
        body.encode_body(w, version)?;
        crate::protocol::frame::finish_frame_in_place(w.buf_mut())
    }

    /// Takes received bytes and returns every response they complete, each
    /// with its request and its body (header removed). One whole frame, as
    /// the runtime's reader delivers it, is taken as it is: the response
    /// body is a slice of it, nothing is copied; other bytes are joined to
    /// those received before.
    ///
    /// A frame that cannot be read ends the stream: the responses before
    /// it are still returned, and its request stays in flight, so closing
    /// the connection fails it with those after it.
    pub fn receive(&mut self, now: Instant, bytes: Bytes) -> Received {
        self.last_activity = now;
        let mut received = Received::default();
        if let Some(frame) = self.frames.whole(&bytes) {
            received.add(self.respond(frame));
            return received;
        }
        self.frames.push(&bytes);
        while received.error.is_none() {
            match self.frames.next_frame() {
                Ok(Some(frame)) => received.add(self.respond(frame)),
                Ok(None) => break,
                Err(e) => received.error = Some(StreamError::Frame(e)),
            }
        }
        received
    }

    /// Matches one frame's contents (prefix removed) to the oldest request
    /// in flight and strips the response header. The request leaves the
    /// flight only with its answer: a frame whose header cannot be read
    /// leaves it there.
    fn respond(&mut self, frame: Bytes) -> Result<(InFlight, Bytes), StreamError> {
        let received = framing::correlation_id(&frame);
        let Some(request) = self
            .in_flight
            .front()
            .filter(|r| r.correlation_id == received)
        else {
            let expected = self.in_flight.front().map(|r| r.correlation_id);
            return Err(StreamError::Correlation { expected, received });
        };
        let (api, header_version) = (
            request.api,
            request.api.response_header_version(request.version),
        );
        let body = framing::split_response(frame, header_version)
            .map_err(|e| StreamError::Decode(api, e))?;
        let request = self
            .in_flight
            .pop_front()
            .expect("checked: a request is in flight");
        Ok((request, body))
    }

    /// The earliest deadline of a request in flight or queued here.
    pub fn next_request_deadline(&self) -> Option<Instant> {
        let flying = self.in_flight.iter().map(|r| r.deadline).min();
        let queued = self.queue.iter().map(|r| r.deadline).min();
        flying.into_iter().chain(queued).min()
    }
}
