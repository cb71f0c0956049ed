//! Raw brokers of the tests' own, for behaviour no peer shows on demand.

use super::read_request;
use lazykafka::protocol::frame::encode_response;
use lazykafka::protocol::messages::api_versions::{ApiVersionRange, ApiVersionsResponse};
use lazykafka::protocol::messages::find_coordinator::FindCoordinatorResponse;
use lazykafka::protocol::messages::metadata::{
    MetadataResponse, MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use lazykafka::protocol::ApiKey;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A broker that answers ApiVersions, Metadata (itself as broker 1, leader
/// of `t`-0) and FindCoordinator (itself), and closes the connection in
/// answer to every JoinGroup, as a proxy or an authorizer might. Counts the
/// connections it accepts.
pub fn broker_dropping_joins() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(s) = stream else { return };
            count.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || serve(s, addr.port()));
        }
    });
    (addr.to_string(), accepted)
}

fn serve(mut s: TcpStream, port: u16) {
    while let Some(h) = read_request(&mut s) {
        let (v, c) = (h.api_version, h.correlation_id);
        let frame = match ApiKey::from_code(h.api_key) {
            Some(ApiKey::ApiVersions) => encode_response(
                &ApiVersionsResponse {
                    api_keys: [
                        ApiKey::ApiVersions,
                        ApiKey::Metadata,
                        ApiKey::FindCoordinator,
                        ApiKey::JoinGroup,
                    ]
                    .iter()
                    .map(|k| ApiVersionRange {
                        api_key: k.code(),
                        min_version: k.client_versions().min,
                        // FindCoordinator v0-3: one coordinator, no batch.
                        max_version: if *k == ApiKey::FindCoordinator {
                            3
                        } else {
                            k.client_versions().max
                        },
                        unknown_tagged_fields: Vec::new(),
                    })
                    .collect(),
                    ..ApiVersionsResponse::default()
                },
                v,
                c,
            ),
            Some(ApiKey::Metadata) => encode_response(
                &MetadataResponse {
                    brokers: vec![MetadataResponseBroker {
                        node_id: 1,
                        host: "127.0.0.1".into(),
                        port: i32::from(port),
                        ..MetadataResponseBroker::default()
                    }],
                    topics: vec![MetadataResponseTopic {
                        name: Some("t".into()),
                        partitions: vec![MetadataResponsePartition {
                            partition_index: 0,
                            leader_id: 1,
                            ..MetadataResponsePartition::default()
                        }],
                        ..MetadataResponseTopic::default()
                    }],
                    ..MetadataResponse::default()
                },
                v,
                c,
            ),
            Some(ApiKey::FindCoordinator) => encode_response(
                &FindCoordinatorResponse {
                    node_id: 1,
                    host: "127.0.0.1".into(),
                    port: i32::from(port),
                    ..FindCoordinatorResponse::default()
                },
                v,
                c,
            ),
            // JoinGroup, or anything else: hang up.
            _ => return hang_up(s),
        };
        if s.write_all(&frame.unwrap()).is_err() {
            return;
        }
    }
}

/// Closes our side first and reads what the client still sends until it
/// closes too, so that the client sees the broker's FIN rather than a
/// reset: a socket dropped with unread bytes, or written to after it was
/// dropped, answers with RST.
fn hang_up(mut s: TcpStream) {
    let _ = s.shutdown(std::net::Shutdown::Write);
    let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(5)));
    let mut sink = [0u8; 4096];
    while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
}
