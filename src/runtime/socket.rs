//! Opening a TCP connection the way every connection of this crate is
//! opened: DNS resolved at connect time, every resolved address tried in
//! turn (`client.dns.lookup=use_all_dns_ips`), a setup timeout across them
//! all, TCP_NODELAY, and SO_KEEPALIVE when asked.

use async_std::future::timeout;
use async_std::net::{TcpStream, ToSocketAddrs};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Why a connection could not be set up.
#[derive(Debug)]
pub(crate) enum ConnectError {
    /// The setup timeout passed.
    Timeout,
    /// The name did not resolve (or resolved to no address).
    Resolve(std::io::Error),
    /// Connecting failed; the error of the last address tried.
    Io(std::io::Error),
}

impl ConnectError {
    /// The cause, as the cluster and the events carry it.
    pub fn cause(&self) -> crate::events::ConnectionError {
        match self {
            ConnectError::Timeout => crate::events::ConnectionError::SetupTimeout,
            ConnectError::Resolve(e) => crate::events::ConnectionError::Resolve {
                message: e.to_string(),
            },
            ConnectError::Io(e) => crate::events::ConnectionError::from_io(e),
        }
    }
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::Timeout => f.write_str("connection setup timed out"),
            ConnectError::Resolve(e) | ConnectError::Io(e) => e.fmt(f),
        }
    }
}

/// Connects to `addr` (`host:port`) within `setup_timeout`.
pub(crate) async fn connect_socket(
    addr: &str,
    setup_timeout: Duration,
    keepalive: bool,
) -> Result<(TcpStream, SocketAddr), ConnectError> {
    let deadline = Instant::now() + setup_timeout;
    let candidates: Vec<SocketAddr> = match timeout(setup_timeout, addr.to_socket_addrs()).await {
        Ok(Ok(addrs)) => addrs.collect(),
        Ok(Err(e)) => return Err(ConnectError::Resolve(e)),
        Err(_) => return Err(ConnectError::Timeout),
    };
    let mut last_error = ConnectError::Resolve(std::io::Error::new(
        std::io::ErrorKind::NotFound,
        "the name resolved to no address",
    ));
    for candidate in candidates {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ConnectError::Timeout);
        }
        match timeout(left, TcpStream::connect(candidate)).await {
            Ok(Ok(stream)) => {
                configure(&stream, keepalive).map_err(ConnectError::Io)?;
                return Ok((stream, candidate));
            }
            Ok(Err(e)) => last_error = ConnectError::Io(e),
            Err(_) => return Err(ConnectError::Timeout),
        }
    }
    Err(last_error)
}

fn configure(stream: &TcpStream, keepalive: bool) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    if keepalive {
        socket2::SockRef::from(stream).set_keepalive(true)?;
    }
    Ok(())
}
