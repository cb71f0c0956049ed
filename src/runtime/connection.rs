//! One TCP connection to one broker, on async-std.

use super::socket::{connect_socket, ConnectError};
use crate::error::Error;
use crate::protocol::frame::{self, encode_request, frame_size, peek_correlation_id};
use crate::protocol::messages::api_versions::ApiVersionsRequest;
use crate::protocol::{
    ApiVersionTable, ApiVersionsExchange, ExchangeError, ExchangeStep, Request,
    DEFAULT_MAX_FRAME_SIZE,
};
use async_std::future::timeout;
use async_std::net::TcpStream;
use bytes::Bytes;
use futures::{AsyncReadExt, AsyncWriteExt};
use std::net::SocketAddr;
use std::time::Duration;

/// How a [`BrokerConnection`] is set up.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// Sent as `client_id` in every request header (`client.id`).
    pub client_id: Option<String>,
    /// How long one TCP connect may take (`socket.connection.setup.timeout.ms`).
    pub setup_timeout: Duration,
    /// How long a request may wait for its response (`request.timeout.ms`).
    pub request_timeout: Duration,
    /// Turn on TCP keepalive (`socket.keepalive.enable`).
    pub keepalive: bool,
    /// The largest response frame accepted, checked before it is buffered.
    pub max_frame_size: usize,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            client_id: Some(env!("CARGO_PKG_NAME").to_owned()),
            setup_timeout: Duration::from_millis(10_000),
            request_timeout: Duration::from_millis(30_000),
            keepalive: true,
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
        }
    }
}

/// A connection to one broker whose API versions have been negotiated.
///
/// Requests are sent one at a time and answered in order.
#[derive(Debug)]
pub struct BrokerConnection {
    stream: TcpStream,
    addr: String,
    peer: SocketAddr,
    versions: ApiVersionTable,
    next_correlation_id: i32,
    options: ConnectOptions,
}

impl BrokerConnection {
    /// Resolves `addr` (`host:port`), connects to the first address that
    /// answers (every resolved address is tried in turn), sets TCP_NODELAY
    /// and keepalive, and runs the ApiVersions exchange.
    pub async fn connect(addr: &str, options: ConnectOptions) -> Result<Self, Error> {
        let (stream, peer) = connect_socket(addr, options.setup_timeout, options.keepalive)
            .await
            .map_err(|e| match e {
                ConnectError::Timeout => Error::ConnectTimeout {
                    addr: addr.to_owned(),
                },
                ConnectError::Resolve(source) | ConnectError::Io(source) => Error::Io {
                    addr: addr.to_owned(),
                    source,
                },
            })?;
        let mut conn = BrokerConnection {
            peer,
            stream,
            addr: addr.to_owned(),
            versions: ApiVersionTable::default(),
            next_correlation_id: 0,
            options,
        };
        conn.negotiate().await?;
        Ok(conn)
    }

    async fn negotiate(&mut self) -> Result<(), Error> {
        let mut exchange = ApiVersionsExchange::new();
        let request = ApiVersionsRequest::from_this_client();
        loop {
            let version = exchange.version();
            // The response body is read raw: it may come back as v0 whatever
            // version was sent, and the exchange knows how to read it.
            let body = self.round_trip(&request, version).await?;
            match exchange.handle_response(body) {
                Ok(ExchangeStep::Retry(_)) => continue,
                Ok(ExchangeStep::Done(table)) => {
                    self.versions = table;
                    return Ok(());
                }
                Err(ExchangeError::Decode(source)) => {
                    return Err(Error::Decode {
                        api: "ApiVersions",
                        addr: self.addr.clone(),
                        source,
                    })
                }
                Err(ExchangeError::Broker(code)) => {
                    return Err(Error::Broker {
                        api: "ApiVersions",
                        code,
                    })
                }
            }
        }
    }

    /// The address this connection was asked to reach (`host:port`).
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The socket address actually connected to.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// The versions negotiated on this connection.
    pub fn versions(&self) -> &ApiVersionTable {
        &self.versions
    }

    /// Sends `request` at the negotiated version and waits for its response.
    pub async fn request<R: Request>(&mut self, request: &R) -> Result<R::Response, Error> {
        let version =
            self.versions
                .version(R::API_KEY)
                .map_err(|source| Error::NoCommonVersion {
                    addr: self.addr.clone(),
                    source,
                })?;
        let body = self.round_trip(request, version).await?;
        crate::protocol::messages::decode_response_body::<R::Response>(body, version)
            .map(|(response, _)| response)
            .map_err(|source| Error::Decode {
                api: R::API_KEY.name(),
                addr: self.addr.clone(),
                source,
            })
    }

    /// Sends one request and returns the response body with its header
    /// removed and its correlation id checked.
    async fn round_trip<R: Request>(&mut self, request: &R, version: i16) -> Result<Bytes, Error> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let frame = encode_request(
            request,
            version,
            correlation_id,
            self.options.client_id.as_deref(),
        )
        .map_err(|source| Error::Encode {
            api: R::API_KEY.name(),
            source,
        })?;
        let exchange = async {
            self.stream.write_all(&frame).await?;
            let mut prefix = [0u8; 4];
            self.stream.read_exact(&mut prefix).await?;
            let size = frame_size(prefix, self.options.max_frame_size)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
            let mut body = vec![0u8; size];
            self.stream.read_exact(&mut body).await?;
            Ok::<_, std::io::Error>(Bytes::from(body))
        };
        let body = match timeout(self.options.request_timeout, exchange).await {
            Err(_) => {
                return Err(Error::RequestTimeout {
                    api: R::API_KEY.name(),
                    addr: self.addr.clone(),
                })
            }
            Ok(Err(e)) => return Err(self.io_error(e)),
            Ok(Ok(body)) => body,
        };
        let header_version = R::API_KEY.response_header_version(version);
        let received = peek_correlation_id(&body).unwrap_or(-1);
        if received != correlation_id {
            return Err(Error::UnexpectedCorrelationId {
                addr: self.addr.clone(),
                expected: correlation_id,
                received,
            });
        }
        let mut reader = crate::protocol::Reader::new(body);
        frame::ResponseHeader::decode(&mut reader, header_version).map_err(|source| {
            Error::Decode {
                api: R::API_KEY.name(),
                addr: self.addr.clone(),
                source,
            }
        })?;
        Ok(reader.take("body", reader.remaining()).unwrap_or_default())
    }

    fn io_error(&self, e: std::io::Error) -> Error {
        match e.kind() {
            std::io::ErrorKind::UnexpectedEof => Error::ConnectionClosed {
                addr: self.addr.clone(),
            },
            std::io::ErrorKind::InvalidData => match e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<crate::protocol::FrameError>())
            {
                Some(source) => Error::Frame {
                    addr: self.addr.clone(),
                    source: source.clone(),
                },
                None => Error::Io {
                    addr: self.addr.clone(),
                    source: e,
                },
            },
            _ => Error::Io {
                addr: self.addr.clone(),
                source: e,
            },
        }
    }

    /// Closes the connection (both directions) now.
    pub async fn close(self) {
        // The peer may already be gone; there is nothing to do about it.
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}
