//! Brokers that misbehave: a raw TCP server speaks just enough Kafka (a
//! correct ApiVersions answer) and then sends garbage, an absurd or
//! negative frame length, a truncated response, a response with an
//! unknown correlation id, or one whose header cannot be read. Each time
//! the connection manager must fail the request with an error that names
//! the fault, close only that connection, and go on with the other broker
//! (librdkafka's mock).

// Drives a `Consumer` or `runtime::*`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

mod common;

use common::read_request;

use lazykafka::cluster::{Cluster, ClusterConfig, RequestError, Target};
use lazykafka::events::{CloseReason, EventKind};
use lazykafka::protocol::frame::encode_response;
use lazykafka::protocol::messages::api_versions::{
    ApiVersionRange, ApiVersionsRequest, ApiVersionsResponse,
};
use lazykafka::protocol::messages::metadata::MetadataRequest;
use lazykafka::protocol::ApiKey;
use lazykafka::runtime::{ClusterDriver, SocketOptions};
use std::io::Write;
use std::net::TcpListener;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(15);

#[derive(Clone, Copy, Debug)]
enum Fault {
    /// Bytes that are no Kafka frame at all.
    Garbage,
    /// A size prefix of 2^31-1.
    AbsurdLength,
    /// A negative size prefix.
    NegativeLength,
    /// Half a frame, then EOF.
    Truncated,
    /// A well-formed response to a request nobody sent.
    UnknownCorrelationId,
    /// The request's correlation id, then nothing: the flexible response
    /// header's tagged fields are missing.
    BadHeader,
}

/// Reads one request frame; returns its header.
/// A server that answers ApiVersions correctly, then commits `fault` on the
/// next request. Returns its address.
fn evil_broker(fault: Fault) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { return };
            std::thread::spawn(move || {
                while let Some(header) = read_request(&mut s) {
                    if header.api_key == ApiKey::ApiVersions.code() {
                        let ranges = ApiKey::ALL
                            .iter()
                            .map(|k| ApiVersionRange {
                                api_key: k.code(),
                                min_version: k.client_versions().min,
                                max_version: k.client_versions().max,
                                unknown_tagged_fields: Vec::new(),
                            })
                            .collect();
                        let resp = ApiVersionsResponse {
                            api_keys: ranges,
                            ..ApiVersionsResponse::default()
                        };
                        let frame =
                            encode_response(&resp, header.api_version, header.correlation_id)
                                .unwrap();
                        s.write_all(&frame).unwrap();
                        continue;
                    }
                    let bytes: Vec<u8> = match fault {
                        Fault::Garbage => {
                            let garbage = b"\xde\xad\xbe\xef not kafka at all";
                            let mut v = (garbage.len() as i32).to_be_bytes().to_vec();
                            v.extend_from_slice(garbage);
                            v
                        }
                        Fault::AbsurdLength => i32::MAX.to_be_bytes().to_vec(),
                        Fault::NegativeLength => (-5i32).to_be_bytes().to_vec(),
                        Fault::Truncated => {
                            let mut v = 100i32.to_be_bytes().to_vec();
                            v.extend_from_slice(&header.correlation_id.to_be_bytes());
                            v.extend_from_slice(&[0; 6]);
                            v
                        }
                        Fault::BadHeader => {
                            let mut v = 4i32.to_be_bytes().to_vec();
                            v.extend_from_slice(&header.correlation_id.to_be_bytes());
                            v
                        }
                        Fault::UnknownCorrelationId => {
                            let resp = ApiVersionsResponse::default();
                            encode_response(&resp, 0, header.correlation_id + 1000)
                                .unwrap()
                                .to_vec()
                        }
                    };
                    let _ = s.write_all(&bytes);
                    if let Fault::Truncated = fault {
                        return; // EOF in the middle of the frame
                    }
                }
            });
        }
    });
    addr
}

/// A request the evil broker answers correctly.
fn request(driver: &mut ClusterDriver) -> lazykafka::cluster::RequestId {
    driver.request(
        Target::AnyBroker,
        Box::new(ApiVersionsRequest::from_this_client()),
    )
}

/// A request the evil broker answers with its fault.
fn faulty_request(driver: &mut ClusterDriver) -> lazykafka::cluster::RequestId {
    driver.request(Target::AnyBroker, Box::new(MetadataRequest::default()))
}

async fn check(fault: Fault, expected_reason: &str) {
    let evil = evil_broker(fault);
    let mut config = ClusterConfig::new([evil.clone()]);
    config.request_timeout = Duration::from_secs(10);
    let mut driver = ClusterDriver::new(
        Cluster::new(config, Instant::now(), 1),
        SocketOptions::default(),
    );
    // ApiVersions is answered correctly: the connection becomes ready.
    let first = request(&mut driver);
    let ok = driver.wait_response(first, WAIT).await.expect("answered");
    assert!(ok.is_ok(), "{fault:?}: {ok:?}");
    // The next request meets the fault.
    let second = faulty_request(&mut driver);
    let outcome = driver
        .wait_response(second, WAIT)
        .await
        .expect("an outcome");
    match &outcome {
        Err(RequestError::ConnectionLost { cause, .. }) => assert!(
            cause.to_string().contains(expected_reason),
            "{fault:?}: {cause:?} should mention {expected_reason:?}"
        ),
        other => panic!("{fault:?}: expected a lost connection, got {other:?}"),
    }
    let events = driver.take_events();
    let closed = events.iter().find(|e| {
        matches!(
            &e.kind,
            EventKind::Closed {
                reason: CloseReason::Error | CloseReason::Peer,
                ..
            }
        )
    });
    assert!(closed.is_some(), "{fault:?}: {events:#?}");
    assert!(
        driver.connections().is_empty(),
        "only that connection existed, and it is closed"
    );
}

#[test]
fn garbage_bytes_close_the_connection_with_a_typed_error() {
    crate::common::block_on(async {
        check(Fault::Garbage, "correlation id").await;
    })
}

#[test]
fn an_absurd_frame_length_is_refused_before_anything_is_buffered() {
    crate::common::block_on(async {
        check(Fault::AbsurdLength, "exceeds the limit").await;
    })
}

#[test]
fn a_negative_frame_length_is_refused() {
    crate::common::block_on(async {
        check(Fault::NegativeLength, "negative frame size").await;
    })
}

#[test]
fn a_truncated_response_fails_the_request_as_a_lost_connection() {
    crate::common::block_on(async {
        check(Fault::Truncated, "closed by the broker").await;
    })
}

#[test]
fn a_response_with_an_unknown_correlation_id_is_refused() {
    crate::common::block_on(async {
        check(Fault::UnknownCorrelationId, "correlation id").await;
    })
}

#[test]
fn a_response_header_that_cannot_be_read_fails_its_request() {
    crate::common::block_on(async {
        check(Fault::BadHeader, "cannot decode Metadata response").await;
    })
}

#[test]
fn other_brokers_keep_working_after_one_misbehaves() {
    crate::common::block_on(async {
        let mock = common::mock::RawMock::new(1);
        let good = mock.bootstraps()[0].clone();
        let evil = evil_broker(Fault::AbsurdLength);
        let mut config = ClusterConfig::new([evil.clone(), good.clone()]);
        config.request_timeout = Duration::from_secs(10);
        // Try seeds until the evil broker is the first bootstrap address tried,
        // so the test always crosses it.
        for seed in 0..64 {
            let mut driver = ClusterDriver::new(
                Cluster::new(config.clone(), Instant::now(), seed),
                SocketOptions::default(),
            );
            let first = request(&mut driver);
            driver
                .wait_response(first, WAIT)
                .await
                .expect("answered")
                .ok();
            if driver.connections().first().map(|c| c.addr.as_str()) != Some(evil.as_str()) {
                continue;
            }
            let lost = faulty_request(&mut driver);
            let outcome = driver.wait_response(lost, WAIT).await.expect("an outcome");
            assert!(
                matches!(outcome, Err(RequestError::ConnectionLost { .. })),
                "{outcome:?}"
            );
            // The evil address is in backoff now; the next request goes to the
            // good broker and succeeds.
            let next = request(&mut driver);
            let ok = driver.wait_response(next, WAIT).await.expect("answered");
            assert!(ok.is_ok(), "{ok:?}");
            let addrs: Vec<String> = driver
                .connections()
                .iter()
                .map(|c| c.addr.clone())
                .collect();
            assert_eq!(addrs, vec![good.clone()]);
            return;
        }
        panic!("no seed made the evil broker the first address");
    })
}
