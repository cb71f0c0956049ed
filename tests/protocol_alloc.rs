//! Decoders never allocate beyond a bound proportional to their input,
//! whatever the input says: every length and count is checked against the
//! bytes left before anything is allocated (`Reader::array` divides the
//! bytes left by the smallest encoded size of one element).
//!
//! A counting global allocator measures the peak of live heap bytes while
//! one decode runs on the current thread, for every message at every
//! version, on inputs that announce huge counts and lengths.

use bytes::Bytes;
use lazykafka::protocol::group::{ConsumerProtocolAssignment, ConsumerProtocolSubscription};
use lazykafka::protocol::messages::*;
use lazykafka::protocol::{Message, Reader};
use proptest::prelude::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static TRACKING: Cell<bool> = const { Cell::new(false) };
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn add(n: usize) {
    if TRACKING.with(Cell::get) {
        let live = LIVE.with(|l| {
            let v = l.get() + n;
            l.set(v);
            v
        });
        PEAK.with(|p| p.set(p.get().max(live)));
    }
}

fn sub(n: usize) {
    if TRACKING.with(Cell::get) {
        LIVE.with(|l| l.set(l.get().saturating_sub(n)));
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator; the
// bookkeeping only touches const-initialised thread-locals, which do not
// allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        add(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        sub(layout.size());
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        add(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        sub(layout.size());
        add(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Peak live heap bytes while `f` runs on this thread.
fn peak_during(f: impl FnOnce()) -> usize {
    LIVE.with(|l| l.set(0));
    PEAK.with(|p| p.set(0));
    TRACKING.with(|t| t.set(true));
    f();
    TRACKING.with(|t| t.set(false));
    PEAK.with(Cell::get)
}

/// The bound asserted: a multiple of the input's size. The factor covers
/// the ratio of an element's in-memory size to its smallest encoding (a
/// `String` of 24 bytes from a 1-byte compact string, structs of ~100
/// bytes from 4 encoded bytes) for the few nesting levels in flight at once.
fn bound(input_len: usize) -> usize {
    64 * input_len + 4096
}

type Decoder = fn(Bytes, i16);

fn decoder<M: Message>(bytes: Bytes, version: i16) {
    let _ = M::decode(&mut Reader::new(bytes), version);
}

fn subscription(bytes: Bytes, _version: i16) {
    let _ = ConsumerProtocolSubscription::from_bytes(bytes);
}

fn assignment(bytes: Bytes, _version: i16) {
    let _ = ConsumerProtocolAssignment::from_bytes(bytes);
}

macro_rules! all {
    ($($ty:ty),* $(,)?) => {
        vec![$((stringify!($ty), <$ty as Message>::VERSIONS.min, <$ty as Message>::VERSIONS.max, decoder::<$ty> as Decoder)),*]
    };
}

fn decoders() -> Vec<(&'static str, i16, i16, Decoder)> {
    let mut list = all![
        api_versions::ApiVersionsRequest,
        api_versions::ApiVersionsResponse,
        consumer_group_heartbeat::ConsumerGroupHeartbeatRequest,
        consumer_group_heartbeat::ConsumerGroupHeartbeatResponse,
        create_topics::CreateTopicsRequest,
        create_topics::CreateTopicsResponse,
        fetch::FetchRequest,
        fetch::FetchResponse,
        find_coordinator::FindCoordinatorRequest,
        find_coordinator::FindCoordinatorResponse,
        heartbeat::HeartbeatRequest,
        heartbeat::HeartbeatResponse,
        init_producer_id::InitProducerIdRequest,
        init_producer_id::InitProducerIdResponse,
        join_group::JoinGroupRequest,
        join_group::JoinGroupResponse,
        leave_group::LeaveGroupRequest,
        leave_group::LeaveGroupResponse,
        list_offsets::ListOffsetsRequest,
        list_offsets::ListOffsetsResponse,
        metadata::MetadataRequest,
        metadata::MetadataResponse,
        offset_commit::OffsetCommitRequest,
        offset_commit::OffsetCommitResponse,
        offset_fetch::OffsetFetchRequest,
        offset_fetch::OffsetFetchResponse,
        offset_for_leader_epoch::OffsetForLeaderEpochRequest,
        offset_for_leader_epoch::OffsetForLeaderEpochResponse,
        produce::ProduceRequest,
        produce::ProduceResponse,
        sasl_authenticate::SaslAuthenticateRequest,
        sasl_authenticate::SaslAuthenticateResponse,
        sasl_handshake::SaslHandshakeRequest,
        sasl_handshake::SaslHandshakeResponse,
        sync_group::SyncGroupRequest,
        sync_group::SyncGroupResponse,
    ];
    list.push((
        "ConsumerProtocolSubscription",
        0,
        0,
        subscription as Decoder,
    ));
    list.push(("ConsumerProtocolAssignment", 0, 0, assignment as Decoder));
    list
}

/// Huge or borderline counts and lengths, classic and compact.
const BOMBS: &[&[u8]] = &[
    &[0x7f, 0xff, 0xff, 0xff],       // int32 count 2^31-1
    &[0x00, 0x00, 0x10, 0x00],       // int32 count 4096
    &[0x00, 0x00, 0x01, 0x00],       // int32 count 256
    &[0x7f, 0xff],                   // int16 length 32767
    &[0xff, 0xff, 0xff, 0xff, 0x0f], // uvarint 2^32-1
    &[0x80, 0x20],                   // uvarint 4096
    &[0x81, 0x02],                   // uvarint 257
    &[0x02],                         // compact count 1 (to reach nested arrays)
    &[0x00, 0x00, 0x00, 0x01],       // int32 count 1
];

#[test]
fn planted_counts_stay_within_the_bound() {
    let mut worst = (0.0f64, String::new());
    for (name, min, max, decode) in decoders() {
        for version in min..=max {
            for pad in [64usize, 2048] {
                for offset in 0..96 {
                    for bomb in BOMBS {
                        for second in [None, Some(&BOMBS[1]), Some(&BOMBS[5])] {
                            let mut input = vec![0u8; pad];
                            for (i, b) in bomb.iter().enumerate() {
                                if let Some(slot) = input.get_mut(offset + i) {
                                    *slot = *b;
                                }
                            }
                            if let Some(second) = second {
                                for (i, b) in second.iter().enumerate() {
                                    if let Some(slot) = input.get_mut(offset + 16 + i) {
                                        *slot = *b;
                                    }
                                }
                            }
                            let len = input.len();
                            let bytes = Bytes::from(input);
                            let peak = peak_during(|| decode(bytes, version));
                            assert!(
                                peak <= bound(len),
                                "{name} v{version}: {peak} bytes allocated for {len} input bytes"
                            );
                            let ratio = peak as f64 / len as f64;
                            if ratio > worst.0 {
                                worst = (ratio, format!("{name} v{version} offset {offset}"));
                            }
                        }
                    }
                }
            }
        }
    }
    println!("worst peak/input ratio: {:.1} ({})", worst.0, worst.1);
}

fn biased_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        3 => Just(0u8),
        1 => Just(1u8),
        1 => Just(2u8),
        1 => Just(0x7f),
        1 => Just(0xff),
        1 => Just(0x80),
        2 => any::<u8>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_inputs_stay_within_the_bound(
        input in proptest::collection::vec(biased_byte(), 0..1024),
    ) {
        for (name, min, max, decode) in decoders() {
            for version in min..=max {
                let len = input.len();
                let bytes = Bytes::from(input.clone());
                let peak = peak_during(|| decode(bytes, version));
                prop_assert!(
                    peak <= bound(len),
                    "{} v{}: {} bytes allocated for {} input bytes", name, version, peak, len
                );
            }
        }
    }
}
