//! ApiVersions (key 18): which versions of which APIs a broker speaks.
//!
//! Schemas: `ApiVersionsRequest.json`, `ApiVersionsResponse.json`, versions
//! 0-4, flexible from 3. References: KIP-35 (the API), KIP-482 (flexible
//! versions), KIP-511 (client software name and version; an UNSUPPORTED_VERSION
//! answer still lists the broker's ranges, encoded as v0), KIP-584 (features).
//!
//! The response is always sent with response header v0, whatever its body
//! version (see [`ApiKey::response_header_version`]).

use super::{check_decode_version, check_encode_version, Message, Request};
use crate::protocol::api::{ApiKey, VersionRange};
use crate::protocol::codec::{DecodeError, EncodeError, RawTaggedField, Reader, Writer};

/// ApiVersions request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ApiVersionsRequest {
    /// The client's software name. Added in version 3.
    pub client_software_name: String,
    /// The client's software version. Added in version 3.
    pub client_software_version: String,
    /// Tagged fields this client does not know.
    pub unknown_tagged_fields: Vec<RawTaggedField>,
}

impl ApiVersionsRequest {
    /// The request this crate sends: its own name and version.
    pub fn from_this_client() -> Self {
        ApiVersionsRequest {
            client_software_name: env!("CARGO_PKG_NAME").to_owned(),
            client_software_version: env!("CARGO_PKG_VERSION").to_owned(),
            unknown_tagged_fields: Vec::new(),
        }
    }
}

impl Message for ApiVersionsRequest {
    const API_KEY: ApiKey = ApiKey::ApiVersions;
    const VERSIONS: VersionRange = ApiKey::ApiVersions.client_versions();

    fn encode(&self, w: &mut Writer, version: i16) -> Result<(), EncodeError> {
        check_encode_version::<Self>(version)?;
        // Versions 0-2 have no fields. The software name and version are
        // "ignorable": dropping them below v3 loses nothing the broker needs.
        if version >= 3 {
            w.string("client_software_name", &self.client_software_name, true)?;
            w.string(
                "client_software_version",
                &self.client_software_version,
                true,
            )?;
            w.tagged_fields(&[], &self.unknown_tagged_fields);
        }
        Ok(())
    }

    fn decode(r: &mut Reader, version: i16) -> Result<Self, DecodeError> {
        check_decode_version::<Self>(version)?;
        let mut req = ApiVersionsRequest::default();
        if version >= 3 {
            req.client_software_name = r.string("client_software_name", true)?;
            req.client_software_version = r.string("client_software_version", true)?;
            req.unknown_tagged_fields = r.unknown_tagged_fields()?;
        }
        Ok(req)
    }
}

impl Request for ApiVersionsRequest {
    type Response = ApiVersionsResponse;
}

/// One API's supported range, as the broker lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiVersionRange {
    /// The API key (raw: brokers list keys this client does not know).
    pub api_key: i16,
    /// Lowest supported version.
    pub min_version: i16,
    /// Highest supported version.
    pub max_version: i16,
    /// Tagged fields this client does not know.
    pub unknown_tagged_fields: Vec<RawTaggedField>,
}

/// A feature the broker supports (KIP-584). Added in version 3 (tagged).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupportedFeature {
    /// Feature name.
    pub name: String,
    /// Lowest supported version.
    pub min_version: i16,
    /// Highest supported version.
    pub max_version: i16,
    /// Tagged fields this client does not know.
    pub unknown_tagged_fields: Vec<RawTaggedField>,
}

/// A cluster-wide finalized feature (KIP-584). Added in version 3 (tagged).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinalizedFeature {
    /// Feature name.
    pub name: String,
    /// Finalized highest version level.
    pub max_version_level: i16,
    /// Finalized lowest version level.
    pub min_version_level: i16,
    /// Tagged fields this client does not know.
    pub unknown_tagged_fields: Vec<RawTaggedField>,
}

/// ApiVersions response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiVersionsResponse {
    /// Top-level error code (35, UNSUPPORTED_VERSION, when the request
    /// version was too new; the ranges are still filled in).
    pub error_code: i16,
    /// The APIs the broker supports.
    pub api_keys: Vec<ApiVersionRange>,
    /// Throttle time in milliseconds. Added in version 1.
    pub throttle_time_ms: i32,
    /// Supported features. Tag 0, version 3+.
    pub supported_features: Vec<SupportedFeature>,
    /// Epoch of the finalized features, -1 when unknown. Tag 1, version 3+.
    pub finalized_features_epoch: i64,
    /// Finalized features. Tag 2, version 3+.
    pub finalized_features: Vec<FinalizedFeature>,
    /// Set by a KRaft controller ready for ZK migration. Tag 3, version 3+.
    pub zk_migration_ready: bool,
    /// Tagged fields this client does not know.
    pub unknown_tagged_fields: Vec<RawTaggedField>,
}

impl Default for ApiVersionsResponse {
    fn default() -> Self {
        ApiVersionsResponse {
            error_code: 0,
            api_keys: Vec::new(),
            throttle_time_ms: 0,
            supported_features: Vec::new(),
            finalized_features_epoch: -1,
            finalized_features: Vec::new(),
            zk_migration_ready: false,
            unknown_tagged_fields: Vec::new(),
        }
    }
}

impl ApiVersionsResponse {
    /// The `(api_key, min, max)` ranges, as [`crate::protocol::ApiVersionTable::negotiate`] takes them.
    pub fn ranges(&self) -> impl Iterator<Item = (i16, i16, i16)> + '_ {
        self.api_keys
            .iter()
            .map(|k| (k.api_key, k.min_version, k.max_version))
    }
}

impl Message for ApiVersionsResponse {
    const API_KEY: ApiKey = ApiKey::ApiVersions;
    const VERSIONS: VersionRange = ApiKey::ApiVersions.client_versions();

    fn encode(&self, w: &mut Writer, version: i16) -> Result<(), EncodeError> {
        check_encode_version::<Self>(version)?;
        let flexible = version >= 3;
        w.i16(self.error_code);
        w.array("api_keys", &self.api_keys, flexible, |w, k| {
            w.i16(k.api_key);
            w.i16(k.min_version);
            w.i16(k.max_version);
            if flexible {
                w.tagged_fields(&[], &k.unknown_tagged_fields);
            }
            Ok(())
        })?;
        if version >= 1 {
            w.i32(self.throttle_time_ms);
        }
        if flexible {
            let mut known = Vec::new();
            if !self.supported_features.is_empty() {
                known.push(Writer::tagged(0, |w| {
                    w.array(
                        "supported_features",
                        &self.supported_features,
                        true,
                        |w, f| {
                            w.string("name", &f.name, true)?;
                            w.i16(f.min_version);
                            w.i16(f.max_version);
                            w.tagged_fields(&[], &f.unknown_tagged_fields);
                            Ok(())
                        },
                    )
                })?);
            }
            if self.finalized_features_epoch != -1 {
                known.push(Writer::tagged(1, |w| {
                    w.i64(self.finalized_features_epoch);
                    Ok(())
                })?);
            }
            if !self.finalized_features.is_empty() {
                known.push(Writer::tagged(2, |w| {
                    w.array(
                        "finalized_features",
                        &self.finalized_features,
                        true,
                        |w, f| {
                            w.string("name", &f.name, true)?;
                            w.i16(f.max_version_level);
                            w.i16(f.min_version_level);
                            w.tagged_fields(&[], &f.unknown_tagged_fields);
                            Ok(())
                        },
                    )
                })?);
            }
            if self.zk_migration_ready {
                known.push(Writer::tagged(3, |w| {
                    w.bool(true);
                    Ok(())
                })?);
            }
            w.tagged_fields(&known, &self.unknown_tagged_fields);
        }
        Ok(())
    }

    fn decode(r: &mut Reader, version: i16) -> Result<Self, DecodeError> {
        check_decode_version::<Self>(version)?;
        let flexible = version >= 3;
        let mut resp = ApiVersionsResponse {
            error_code: r.i16("error_code")?,
            ..ApiVersionsResponse::default()
        };
        resp.api_keys = r.array("api_keys", flexible, 6, |r| {
            Ok(ApiVersionRange {
                api_key: r.i16("api_key")?,
                min_version: r.i16("min_version")?,
                max_version: r.i16("max_version")?,
                unknown_tagged_fields: if flexible {
                    r.unknown_tagged_fields()?
                } else {
                    Vec::new()
                },
            })
        })?;
        if version >= 1 {
            resp.throttle_time_ms = r.i32("throttle_time_ms")?;
        }
        if flexible {
            let mut supported = Vec::new();
            let mut epoch = -1;
            let mut finalized = Vec::new();
            let mut zk = false;
            resp.unknown_tagged_fields = r.tagged_fields(|tag, r| {
                match tag {
                    0 => {
                        supported = r.array("supported_features", true, 6, |r| {
                            Ok(SupportedFeature {
                                name: r.string("name", true)?,
                                min_version: r.i16("min_version")?,
                                max_version: r.i16("max_version")?,
                                unknown_tagged_fields: r.unknown_tagged_fields()?,
                            })
                        })?
                    }
                    1 => epoch = r.i64("finalized_features_epoch")?,
                    2 => {
                        finalized = r.array("finalized_features", true, 6, |r| {
                            Ok(FinalizedFeature {
                                name: r.string("name", true)?,
                                max_version_level: r.i16("max_version_level")?,
                                min_version_level: r.i16("min_version_level")?,
                                unknown_tagged_fields: r.unknown_tagged_fields()?,
                            })
                        })?
                    }
                    3 => zk = r.bool("zk_migration_ready")?,
                    _ => return Ok(false),
                }
                Ok(true)
            })?;
            resp.supported_features = supported;
            resp.finalized_features_epoch = epoch;
            resp.finalized_features = finalized;
            resp.zk_migration_ready = zk;
        }
        Ok(resp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn round_trip<M: Message + PartialEq + std::fmt::Debug>(m: &M, version: i16) {
        let mut w = Writer::new();
        m.encode(&mut w, version).unwrap();
        let mut r = Reader::new(w.into_inner().freeze());
        assert_eq!(&M::decode(&mut r, version).unwrap(), m, "v{version}");
        r.finish().unwrap();
    }

    #[test]
    fn request_v3_bytes() {
        let req = ApiVersionsRequest {
            client_software_name: "lk".into(),
            client_software_version: "1".into(),
            unknown_tagged_fields: Vec::new(),
        };
        let mut w = Writer::new();
        req.encode(&mut w, 3).unwrap();
        assert_eq!(&w.into_inner()[..], &[3, b'l', b'k', 2, b'1', 0]);
        let mut w = Writer::new();
        req.encode(&mut w, 2).unwrap();
        assert!(w.is_empty());
    }

    #[test]
    fn every_version_round_trips() {
        let full = ApiVersionsResponse {
            error_code: 0,
            api_keys: vec![ApiVersionRange {
                api_key: 1,
                min_version: 0,
                max_version: 17,
                unknown_tagged_fields: Vec::new(),
            }],
            throttle_time_ms: 5,
            supported_features: vec![SupportedFeature {
                name: "metadata.version".into(),
                min_version: 1,
                max_version: 20,
                unknown_tagged_fields: Vec::new(),
            }],
            finalized_features_epoch: 9,
            finalized_features: vec![FinalizedFeature {
                name: "metadata.version".into(),
                max_version_level: 20,
                min_version_level: 20,
                unknown_tagged_fields: Vec::new(),
            }],
            zk_migration_ready: true,
            unknown_tagged_fields: vec![RawTaggedField {
                tag: 9,
                data: Bytes::from_static(b"x"),
            }],
        };
        for v in 3..=4 {
            round_trip(&full, v);
            round_trip(&ApiVersionsRequest::from_this_client(), v);
        }
        let classic = ApiVersionsResponse {
            supported_features: Vec::new(),
            finalized_features_epoch: -1,
            finalized_features: Vec::new(),
            zk_migration_ready: false,
            unknown_tagged_fields: Vec::new(),
            ..full
        };
        for v in 1..=2 {
            round_trip(&classic, v);
        }
        round_trip(
            &ApiVersionsResponse {
                throttle_time_ms: 0,
                ..classic
            },
            0,
        );
    }

    // An UNSUPPORTED_VERSION answer, as brokers send it: encoded as v0
    // whatever version was asked for (error 35, one range: ApiVersions 0..=3).
    #[test]
    fn unsupported_version_answer_reads_as_v0() {
        let bytes: &[u8] = &[0, 35, 0, 0, 0, 1, 0, 18, 0, 0, 0, 3];
        let mut r = Reader::new(Bytes::from_static(bytes));
        let resp = ApiVersionsResponse::decode(&mut r, 0).unwrap();
        r.finish().unwrap();
        assert_eq!(resp.error_code, 35);
        assert_eq!(resp.ranges().collect::<Vec<_>>(), vec![(18, 0, 3)]);
        // Read as v4 the same bytes are not a valid message.
        let mut r = Reader::new(Bytes::from_static(bytes));
        let as_v4 = ApiVersionsResponse::decode(&mut r, 4).and_then(|_| r.finish());
        assert!(as_v4.is_err());
    }
}
