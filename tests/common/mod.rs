//! Helpers shared by the integration tests.
//!
//! The runtime a test runs a client on: async-std when the feature
//! `runtime-async-std` is built (alone, or with `runtime-tokio` beside it:
//! the test command's main run builds both), tokio when `runtime-tokio` is
//! built alone (its second run). Every test that drives a client runs its
//! body with [`block_on`] (`#[test] fn name() {
//! crate::common::block_on(async { ... }) }`, or through the macros of
//! `clusters` and `kafka`), which picks it the same way, and a client
//! made outside a tokio runtime runs on async-std when it is built, so
//! every client test runs on each runtime once; the tests of the choice
//! itself are `tests/runtime_choice.rs` and `tests/runtime_threads.rs`.

#![allow(dead_code)]

#[macro_use]
pub mod clusters;
pub mod cpu;
pub mod examples;
pub mod rebootstrap;
#[macro_use]
pub mod kafka;
pub mod mock;
pub mod mock216;
pub mod peers;
pub mod polling;
pub mod producing;
pub mod raw;
pub mod threads;
pub mod tls;

/// The address of the real broker (tansu) the test command started, from
/// `LAZYKAFKA_TEST_BROKER`.
///
/// Without it the calling test is skipped, and says so on stderr; but when
/// `LAZYKAFKA_REQUIRE_BROKER=1` (set by the test command) a missing broker
/// is a failure, so nothing is skipped there.
pub fn tansu_addr(test: &str) -> Option<String> {
    match std::env::var("LAZYKAFKA_TEST_BROKER") {
        Ok(addr) if !addr.is_empty() => Some(addr),
        _ => {
            assert!(
                std::env::var("LAZYKAFKA_REQUIRE_BROKER").as_deref() != Ok("1"),
                "{test}: LAZYKAFKA_REQUIRE_BROKER=1 but LAZYKAFKA_TEST_BROKER is not set"
            );
            eprintln!("{test}: skipped (no broker: LAZYKAFKA_TEST_BROKER is not set)");
            None
        }
    }
}

/// A loopback port that refuses connections, and keeps refusing them
/// while this lives: a socket bound to it that never listens. (A port
/// bound and closed again may be taken meanwhile by another test's
/// listener, and then answers.)
pub struct ClosedPort {
    _socket: socket2::Socket,
    /// `127.0.0.1:<port>`.
    pub addr: String,
}

pub fn closed_port() -> ClosedPort {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).expect("a socket");
    let any: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    socket.bind(&any.into()).expect("bind a loopback port");
    let addr = socket
        .local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .expect("its address")
        .to_string();
    ClosedPort {
        _socket: socket,
        addr,
    }
}

/// One TCP socket of this process, from `/proc/net/tcp{,6}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Socket {
    pub local_port: u16,
    pub remote_port: u16,
    /// The kernel's state number: 1 ESTABLISHED, 8 CLOSE_WAIT, ...
    pub state: u8,
}

pub const ESTABLISHED: u8 = 0x01;
pub const CLOSE_WAIT: u8 = 0x08;

/// The TCP sockets this process holds (by file descriptor) whose remote port
/// is one of `remote_ports`: the client side of connections to those brokers
/// (a broker running in this process holds the other side, whose *local*
/// port is the broker's).
pub fn client_sockets(remote_ports: &[u16]) -> Vec<Socket> {
    let mut inodes = std::collections::HashSet::new();
    for entry in std::fs::read_dir("/proc/self/fd").expect("/proc/self/fd") {
        let Ok(entry) = entry else { continue };
        if let Ok(target) = std::fs::read_link(entry.path()) {
            let t = target.to_string_lossy();
            if let Some(inode) = t.strip_prefix("socket:[").and_then(|s| s.strip_suffix(']')) {
                inodes.insert(inode.to_owned());
            }
        }
    }
    let mut out = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // `remove`: each socket once. /proc/net/tcp is read a page at
            // a time, and a socket that moves in the kernel's table between
            // two reads (other tests open and close sockets meanwhile) can
            // be listed twice.
            if f.len() < 10 || !inodes.remove(f[9]) {
                continue;
            }
            let port =
                |field: &str| u16::from_str_radix(field.rsplit(':').next().unwrap(), 16).unwrap();
            let socket = Socket {
                local_port: port(f[1]),
                remote_port: port(f[2]),
                state: u8::from_str_radix(f[3], 16).unwrap(),
            };
            if remote_ports.contains(&socket.remote_port) {
                out.push(socket);
            }
        }
    }
    out.sort_by_key(|s| (s.remote_port, s.local_port));
    out
}

/// Waits until `cond` holds, checking every 10 ms, for at most `timeout`.
pub fn wait_for(timeout: std::time::Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A tansu broker of the test's own, on a free loopback port, killed (by its
/// PID) when dropped or by [`Tansu::kill`]. Needs `LAZYKAFKA_TANSU_BIN` (set
/// by the test command); `None`, with a note on stderr, without it — unless
/// `LAZYKAFKA_REQUIRE_BROKER=1`.
pub struct Tansu {
    child: std::process::Child,
    pub addr: String,
    pub port: u16,
}

impl Tansu {
    pub fn start(test: &str) -> Option<Tansu> {
        let bin = match std::env::var("LAZYKAFKA_TANSU_BIN") {
            Ok(bin) if !bin.is_empty() => bin,
            _ => {
                assert!(
                    std::env::var("LAZYKAFKA_REQUIRE_BROKER").as_deref() != Ok("1"),
                    "{test}: LAZYKAFKA_REQUIRE_BROKER=1 but LAZYKAFKA_TANSU_BIN is not set"
                );
                eprintln!("{test}: skipped (LAZYKAFKA_TANSU_BIN is not set)");
                return None;
            }
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let url = format!("tcp://{addr}");
        let child = std::process::Command::new(bin)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
            ])
            .args(["--storage-engine", "memory://tansu/"])
            .env_remove("LISTENER_URL")
            .env_remove("ADVERTISED_LISTENER_URL")
            .env_remove("STORAGE_ENGINE")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start tansu");
        let tansu = Tansu { child, addr, port };
        assert!(
            wait_for(std::time::Duration::from_secs(20), || {
                std::net::TcpStream::connect(&tansu.addr).is_ok()
            }),
            "tansu did not accept connections"
        );
        Some(tansu)
    }

    /// Stops the broker now; the kernel closes its sockets.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Tansu {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Reads one request frame from a raw test server's socket and decodes its
/// header (`None` at EOF or on a malformed frame).
pub fn read_request(
    s: &mut std::net::TcpStream,
) -> Option<lazykafka::protocol::frame::RequestHeader> {
    use std::io::Read;
    let mut prefix = [0u8; 4];
    s.read_exact(&mut prefix).ok()?;
    let mut body = vec![0u8; usize::try_from(i32::from_be_bytes(prefix)).ok()?];
    s.read_exact(&mut body).ok()?;
    lazykafka::protocol::frame::RequestHeader::decode(&mut lazykafka::protocol::Reader::new(
        body.into(),
    ))
    .ok()
}

/// Runs `future` to completion on the tests' runtime (see the module
/// documentation): async-std's executor, or, with `runtime-tokio` alone, a
/// multi-thread tokio runtime made for it.
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    #[cfg(not(feature = "runtime-async-std"))]
    {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("tokio runtime")
            .block_on(future)
    }
    #[cfg(feature = "runtime-async-std")]
    {
        async_std::task::block_on(future)
    }
}

/// Waits until `cond` holds, without blocking the runtime's thread: true,
/// or false once `timeout` passed.
#[allow(dead_code)]
pub async fn wait_for_async(timeout: std::time::Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Runs `future` as a task of its own on the tests' runtime; the returned
/// future completes with its output.
#[allow(dead_code)]
pub fn spawn<F>(future: F) -> impl std::future::Future<Output = F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    #[cfg(not(feature = "runtime-async-std"))]
    {
        let handle = tokio::spawn(future);
        async move { handle.await.expect("the task ran to its end") }
    }
    #[cfg(feature = "runtime-async-std")]
    {
        async_std::task::spawn(future)
    }
}

/// Waits `duration` on the tests' runtime's timer, without blocking its
/// thread.
pub async fn sleep(duration: std::time::Duration) {
    #[cfg(not(feature = "runtime-async-std"))]
    tokio::time::sleep(duration).await;
    #[cfg(feature = "runtime-async-std")]
    async_std::task::sleep(duration).await;
}

/// `future`'s output, or `None` when `duration` passed first.
pub async fn timeout<F: std::future::Future>(
    duration: std::time::Duration,
    future: F,
) -> Option<F::Output> {
    #[cfg(not(feature = "runtime-async-std"))]
    {
        tokio::time::timeout(duration, future).await.ok()
    }
    #[cfg(feature = "runtime-async-std")]
    {
        async_std::future::timeout(duration, future).await.ok()
    }
}
