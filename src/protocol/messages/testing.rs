//! Helpers for the property tests of the message codecs: value strategies
//! shared by the generated `arb` functions, and the three properties every
//! message must have ([`message_properties!`]).

use crate::protocol::codec::{RawTaggedField, Reader, Writer};
use crate::protocol::messages::Message;
use bytes::Bytes;
use proptest::prelude::*;
use proptest::sample::Index;
use std::fmt::Debug;

/// Short strings, ASCII and not.
pub(crate) fn string() -> BoxedStrategy<String> {
    prop_oneof![4 => "[a-zA-Z0-9._-]{0,8}", 1 => "\\PC{0,4}"].boxed()
}

/// Short byte strings.
pub(crate) fn bytes() -> BoxedStrategy<Bytes> {
    proptest::collection::vec(any::<u8>(), 0..8)
        .prop_map(Bytes::from)
        .boxed()
}

/// Tagged fields no schema here defines (tags 100 and up), in increasing
/// tag order as they come off the wire.
pub(crate) fn unknown_tagged_fields() -> BoxedStrategy<Vec<RawTaggedField>> {
    proptest::collection::btree_map(
        100u32..104,
        proptest::collection::vec(any::<u8>(), 0..4),
        0..3,
    )
    .prop_map(|fields| {
        fields
            .into_iter()
            .map(|(tag, data)| RawTaggedField {
                tag,
                data: Bytes::from(data),
            })
            .collect()
    })
    .boxed()
}

/// Encodes `m` at `version`.
pub(crate) fn encode<M: Message>(m: &M, version: i16) -> Bytes {
    let mut w = Writer::new();
    m.encode(&mut w, version)
        .unwrap_or_else(|e| panic!("v{version}: {e}"));
    w.into_inner().freeze()
}

/// Encodes, decodes (using every byte) and encodes again: the value and the
/// bytes must both come back unchanged.
pub(crate) fn check_round_trip<M: Message + PartialEq + Debug>(
    m: &M,
    version: i16,
) -> Result<(), TestCaseError> {
    let bytes = encode(m, version);
    let mut r = Reader::new(bytes.clone());
    let decoded = M::decode(&mut r, version);
    prop_assert!(decoded.is_ok(), "v{}: {:?}", version, decoded);
    prop_assert!(r.finish().is_ok(), "v{}: trailing bytes", version);
    let decoded = decoded.unwrap();
    prop_assert_eq!(&decoded, m, "v{}", version);
    prop_assert_eq!(encode(&decoded, version), bytes, "v{}", version);
    Ok(())
}

/// Overwrites a few bytes of a valid encoding and maybe cuts it short, then
/// decodes it: an error or a value, never a panic.
pub(crate) fn decode_mangled<M: Message>(
    bytes: Bytes,
    version: i16,
    edits: &[(Index, u8)],
    cut: Option<Index>,
) {
    let mut v = bytes.to_vec();
    if !v.is_empty() {
        for (at, byte) in edits {
            let i = at.index(v.len());
            v[i] = *byte;
        }
    }
    if let Some(cut) = cut {
        v.truncate(cut.index(v.len() + 1));
    }
    let _ = M::decode(&mut Reader::new(Bytes::from(v)), version);
}

/// The properties every message type has: at every version it implements,
/// it round-trips, and random bytes and mangled encodings decode to an error
/// or a value, never a panic; versions outside its range are refused with
/// an error naming the API.
macro_rules! message_properties {
    ($name:ident, $ty:ty) => {
        mod $name {
            use super::*;
            use $crate::protocol::messages::testing;
            use $crate::protocol::messages::Message;

            fn versions() -> std::ops::RangeInclusive<i16> {
                <$ty as Message>::VERSIONS.min..=<$ty as Message>::VERSIONS.max
            }

            #[test]
            fn versions_outside_the_range_are_refused_naming_the_api() {
                let api = <$ty as Message>::API_KEY.name();
                let range = <$ty as Message>::VERSIONS;
                for version in [range.min - 1, range.max + 1] {
                    let mut w = $crate::protocol::codec::Writer::new();
                    let err = <$ty>::default().encode(&mut w, version).unwrap_err();
                    assert_eq!(
                        err,
                        $crate::protocol::codec::EncodeError::UnsupportedVersion { api, version }
                    );
                    assert!(err.to_string().contains(api), "{err}");
                    assert!(w.is_empty(), "nothing written for an unsupported version");
                    let mut r = $crate::protocol::codec::Reader::new(bytes::Bytes::new());
                    let err = <$ty as Message>::decode(&mut r, version).unwrap_err();
                    assert_eq!(
                        err,
                        $crate::protocol::codec::DecodeError::UnsupportedVersion { api, version }
                    );
                    assert!(err.to_string().contains(api), "{err}");
                }
            }

            proptest! {
                #[test]
                fn round_trips_at_every_version(
                    (version, value) in versions().prop_flat_map(|v| (Just(v), <$ty>::arb(v)))
                ) {
                    testing::check_round_trip(&value, version)?;
                }

                #[test]
                fn random_bytes_never_panic(
                    version in versions(),
                    bytes in proptest::collection::vec(any::<u8>(), 0..256),
                ) {
                    let mut r = $crate::protocol::codec::Reader::new(bytes::Bytes::from(bytes));
                    let _ = <$ty as Message>::decode(&mut r, version);
                }

                #[test]
                fn mangled_encodings_never_panic(
                    (version, value) in versions().prop_flat_map(|v| (Just(v), <$ty>::arb(v))),
                    edits in proptest::collection::vec((any::<proptest::sample::Index>(), any::<u8>()), 0..4),
                    cut in proptest::option::of(any::<proptest::sample::Index>()),
                ) {
                    let bytes = testing::encode(&value, version);
                    testing::decode_mangled::<$ty>(bytes, version, &edits, cut);
                }
            }
        }
    };
}
pub(crate) use message_properties;
