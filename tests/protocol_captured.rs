//! Table-driven check of the whole-frame fixtures in `tests/fixtures/protocol/`
//! (see the README there): every file decodes (size prefix, header, body,
//! every byte used) and encodes back to the same bytes, unless its README
//! entry says why it "re-encodes differently:"; the value must then still
//! survive encoding and decoding again.

use bytes::{Bytes, BytesMut};
use lazykafka::protocol::frame::{FrameDecoder, RequestHeader, ResponseHeader};
use lazykafka::protocol::messages::*;
use lazykafka::protocol::{Message, Reader, Writer};
use std::fmt::Debug;
use std::path::{Path, PathBuf};

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/protocol")
}

/// Splits off the frame body, checking the size prefix like a connection would.
fn body_of(frame: &[u8]) -> Bytes {
    let mut buf = BytesMut::from(frame);
    let body = FrameDecoder::default()
        .decode(&mut buf)
        .expect("size prefix accepted")
        .expect("a complete frame");
    assert!(buf.is_empty(), "bytes after the frame");
    body
}

fn with_size(content: &[u8]) -> Vec<u8> {
    let mut out = (content.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(content);
    out
}

/// Encodes `body` again and compares: the bytes must match unless the
/// README says why they may not (`exact` false); the value must always
/// survive a second decode.
fn compare_reencoded<M: Message + PartialEq + Debug>(
    name: &str,
    frame: &[u8],
    reencoded: Vec<u8>,
    header_len: usize,
    body: &M,
    version: i16,
    exact: bool,
) {
    if exact {
        assert_eq!(reencoded, frame, "{name}: re-encoded");
    }
    let mut r = Reader::new(Bytes::from(reencoded).slice(4 + header_len..));
    let again = M::decode(&mut r, version).unwrap_or_else(|e| panic!("{name}: again: {e}"));
    r.finish().unwrap();
    assert_eq!(&again, body, "{name}: value after re-encoding");
}

fn request<M: Message + PartialEq + Debug>(name: &str, frame: &[u8], version: i16, exact: bool) {
    let mut r = Reader::new(body_of(frame));
    let header = RequestHeader::decode(&mut r).unwrap_or_else(|e| panic!("{name}: header: {e}"));
    assert_eq!(header.api_key, M::API_KEY.code(), "{name}: api key");
    assert_eq!(header.api_version, version, "{name}: api version");
    let body = M::decode(&mut r, version).unwrap_or_else(|e| panic!("{name}: body: {e}"));
    r.finish().unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut w = Writer::new();
    header
        .encode(&mut w, M::API_KEY.request_header_version(version) == 2)
        .unwrap();
    let header_len = w.len();
    body.encode(&mut w, version).unwrap();
    let reencoded = with_size(&w.into_inner());
    compare_reencoded(name, frame, reencoded, header_len, &body, version, exact);
}

fn response<M: Message + PartialEq + Debug>(name: &str, frame: &[u8], version: i16, exact: bool) {
    let header_version = M::API_KEY.response_header_version(version);
    let mut r = Reader::new(body_of(frame));
    let header = ResponseHeader::decode(&mut r, header_version)
        .unwrap_or_else(|e| panic!("{name}: header: {e}"));
    let body = M::decode(&mut r, version).unwrap_or_else(|e| panic!("{name}: body: {e}"));
    r.finish().unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut w = Writer::new();
    header.encode(&mut w, header_version);
    let header_len = w.len();
    body.encode(&mut w, version).unwrap();
    let reencoded = with_size(&w.into_inner());
    compare_reencoded(name, frame, reencoded, header_len, &body, version, exact);
}

macro_rules! by_api {
    ($api:expr, $is_request:expr, $name:expr, $frame:expr, $version:expr, $exact:expr;
     $($module:ident => $req:ty, $resp:ty;)*) => {
        match $api {
            $(stringify!($module) => if $is_request {
                request::<$req>($name, $frame, $version, $exact)
            } else {
                response::<$resp>($name, $frame, $version, $exact)
            },)*
            other => panic!("{}: unknown API {other:?}", $name),
        }
    };
}

fn check_file(path: &Path, exact: bool) {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let parts: Vec<&str> = name.split('.').collect();
    let [api, direction, version, _source, "bin"] = parts[..] else {
        panic!("{name}: expected <api>.<request|response>.v<N>.<source>.bin");
    };
    let is_request = match direction {
        "request" => true,
        "response" => false,
        other => panic!("{name}: direction {other:?}"),
    };
    let version: i16 = version
        .strip_prefix('v')
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name}: version {version:?}"));
    let frame = std::fs::read(path).unwrap();
    by_api!(api, is_request, &name, &frame, version, exact;
        api_versions => api_versions::ApiVersionsRequest, api_versions::ApiVersionsResponse;
        consumer_group_heartbeat => consumer_group_heartbeat::ConsumerGroupHeartbeatRequest,
            consumer_group_heartbeat::ConsumerGroupHeartbeatResponse;
        create_topics => create_topics::CreateTopicsRequest, create_topics::CreateTopicsResponse;
        fetch => fetch::FetchRequest, fetch::FetchResponse;
        find_coordinator => find_coordinator::FindCoordinatorRequest,
            find_coordinator::FindCoordinatorResponse;
        heartbeat => heartbeat::HeartbeatRequest, heartbeat::HeartbeatResponse;
        init_producer_id => init_producer_id::InitProducerIdRequest,
            init_producer_id::InitProducerIdResponse;
        join_group => join_group::JoinGroupRequest, join_group::JoinGroupResponse;
        leave_group => leave_group::LeaveGroupRequest, leave_group::LeaveGroupResponse;
        list_offsets => list_offsets::ListOffsetsRequest, list_offsets::ListOffsetsResponse;
        metadata => metadata::MetadataRequest, metadata::MetadataResponse;
        offset_commit => offset_commit::OffsetCommitRequest, offset_commit::OffsetCommitResponse;
        offset_fetch => offset_fetch::OffsetFetchRequest, offset_fetch::OffsetFetchResponse;
        offset_for_leader_epoch => offset_for_leader_epoch::OffsetForLeaderEpochRequest,
            offset_for_leader_epoch::OffsetForLeaderEpochResponse;
        produce => produce::ProduceRequest, produce::ProduceResponse;
        sasl_authenticate => sasl_authenticate::SaslAuthenticateRequest,
            sasl_authenticate::SaslAuthenticateResponse;
        sasl_handshake => sasl_handshake::SaslHandshakeRequest,
            sasl_handshake::SaslHandshakeResponse;
        sync_group => sync_group::SyncGroupRequest, sync_group::SyncGroupResponse;
    );
}

#[test]
fn every_frame_fixture_round_trips_and_says_where_it_came_from() {
    let readme = std::fs::read_to_string(fixture_dir().join("README.md")).unwrap();
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixture_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no frame fixtures found");
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy();
        let entry = readme
            .split("\n- ")
            .find(|entry| entry.contains(&format!("`{name}`")) && entry.contains("from:"))
            .unwrap_or_else(|| {
                panic!("{name}: no `from:` entry in tests/fixtures/protocol/README.md")
            });
        check_file(path, !entry.contains("re-encodes differently:"));
    }
}
