//! What the fuzz targets run on each input (`record_set`, `frame_reader`,
//! `response`). The main crate's `tests/fuzz_corpus.rs` includes this file
//! to replay each target's corpus under `cargo test`, and
//! `tests/records_props.rs` runs `record_set` on generated inputs, so all of
//! them apply the same checks.

use bytes::Bytes;
use lazykafka::records::{
    AbortedTransaction, DecodeOptions, DecodedRecords, IsolationLevel, RecordSetDecoder,
};

/// Decodes `data` as a record set every way there is (CRCs checked and
/// not, so inputs reach the record parser and the codecs; both isolation
/// levels) and checks what any outcome must satisfy. Panics on a
/// violation, as the decoder itself must never do.
pub fn record_set(data: &[u8]) {
    let bytes = Bytes::copy_from_slice(data);
    // Producer 4242 is the aborted one of the transaction fixture.
    let aborted = [
        AbortedTransaction {
            producer_id: 4242,
            first_offset: 10,
        },
        AbortedTransaction {
            producer_id: 0,
            first_offset: 0,
        },
    ];
    for check_crcs in [true, false] {
        let decoder = RecordSetDecoder::new(
            DecodeOptions::default()
                .with_check_crcs(check_crcs)
                .with_max_decompressed_bytes(1 << 20),
        );
        for isolation in [
            IsolationLevel::ReadUncommitted,
            IsolationLevel::ReadCommitted,
        ] {
            let mut out = DecodedRecords::new();
            let result = decoder.decode_into(bytes.clone(), isolation, &aborted, &mut out);
            if let Some(tail) = out.partial_tail {
                // A partial tail ends the set and is not an error.
                assert!(result.is_ok());
                assert_eq!(tail.position + tail.bytes, bytes.len());
            }
            if let Err(e) = &result {
                // The error names a batch within the input.
                assert!(e.position() < bytes.len());
                let _ = e.to_string();
            }
            if !out.is_empty() {
                assert!(out.next_offset.is_some());
            }
            assert!(out.batches >= out.control_batches + out.aborted_batches);
            for r in &out {
                let _ = (r.key(), r.value(), r.key_bytes(), r.value_bytes());
                assert_eq!(r.headers().iter().count(), r.headers().len());
            }
        }
    }
}

/// Splits `data` into frames the way a connection does (a 1 MiB limit,
/// fed in two pieces cut where the first byte says), then reads each
/// frame's response header at both versions and its request header.
/// Checks that nothing panics and that frames never claim more bytes than
/// arrived.
pub fn frame_reader(data: &[u8]) {
    use lazykafka::protocol::frame::{RequestHeader, ResponseHeader};
    use lazykafka::protocol::{FrameDecoder, Reader};
    let Some((&cut, rest)) = data.split_first() else {
        return;
    };
    let cut = usize::from(cut).min(rest.len());
    let decoder = FrameDecoder::new(1 << 20);
    let mut buf = bytes::BytesMut::new();
    let mut framed = 0usize;
    for piece in [&rest[..cut], &rest[cut..]] {
        buf.extend_from_slice(piece);
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(frame)) => {
                    framed += 4 + frame.len();
                    assert!(framed <= rest.len(), "a frame beyond the input");
                    for version in [0, 1] {
                        let _ = ResponseHeader::decode(&mut Reader::new(frame.clone()), version);
                    }
                    let _ = RequestHeader::decode(&mut Reader::new(frame));
                }
                Ok(None) => break,
                Err(e) => {
                    let _ = e.to_string();
                    return;
                }
            }
        }
    }
}

/// Decodes `data[2..]` as the response of the API picked by `data[0]` at
/// the version picked by `data[1]` (within the versions this client
/// speaks), with every decoder there is.
pub fn response(data: &[u8]) {
    use lazykafka::protocol::messages::*;
    use lazykafka::protocol::{ApiKey, Message, Reader};
    let [api, version, body @ ..] = data else {
        return;
    };
    let api = ApiKey::ALL[usize::from(*api) % ApiKey::ALL.len()];
    let range = api.client_versions();
    let span = (range.max - range.min + 1) as u8;
    let version = range.min + i16::from(*version % span);
    let body = Bytes::copy_from_slice(body);
    fn run<M: Message + std::fmt::Debug>(body: Bytes, version: i16) {
        let mut r = Reader::new(body.clone());
        if let Ok(m) = M::decode(&mut r, version) {
            // Whatever decodes also encodes.
            let mut w = lazykafka::protocol::Writer::new();
            let _ = m.encode(&mut w, version);
            let _ = format!("{m:?}");
        }
        let _ = decode_response_body::<M>(body, version);
    }
    match api {
        ApiKey::Produce => run::<produce::ProduceResponse>(body, version),
        ApiKey::Fetch => run::<fetch::FetchResponse>(body, version),
        ApiKey::ListOffsets => run::<list_offsets::ListOffsetsResponse>(body, version),
        ApiKey::Metadata => run::<metadata::MetadataResponse>(body, version),
        ApiKey::OffsetCommit => run::<offset_commit::OffsetCommitResponse>(body, version),
        ApiKey::OffsetFetch => run::<offset_fetch::OffsetFetchResponse>(body, version),
        ApiKey::FindCoordinator => run::<find_coordinator::FindCoordinatorResponse>(body, version),
        ApiKey::JoinGroup => run::<join_group::JoinGroupResponse>(body, version),
        ApiKey::Heartbeat => run::<heartbeat::HeartbeatResponse>(body, version),
        ApiKey::LeaveGroup => run::<leave_group::LeaveGroupResponse>(body, version),
        ApiKey::SyncGroup => run::<sync_group::SyncGroupResponse>(body, version),
        ApiKey::SaslHandshake => run::<sasl_handshake::SaslHandshakeResponse>(body, version),
        ApiKey::ApiVersions => run::<api_versions::ApiVersionsResponse>(body, version),
        ApiKey::CreateTopics => run::<create_topics::CreateTopicsResponse>(body, version),
        ApiKey::OffsetForLeaderEpoch => {
            run::<offset_for_leader_epoch::OffsetForLeaderEpochResponse>(body, version)
        }
        ApiKey::SaslAuthenticate => {
            run::<sasl_authenticate::SaslAuthenticateResponse>(body, version)
        }
        ApiKey::ConsumerGroupHeartbeat => {
            run::<consumer_group_heartbeat::ConsumerGroupHeartbeatResponse>(body, version)
        }
        _ => {}
    }
}
