//! What both clients report of the brokers they talked to, in their
//! metrics ([`ConsumerMetrics::brokers`](crate::consumer::metrics::ConsumerMetrics::brokers),
//! [`ProducerMetrics::brokers`](crate::producer::ProducerMetrics::brokers)).

use crate::events::BrokerCounters;
use serde::Serialize;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One broker address, over every connection the client had to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct BrokerMetrics {
    /// The broker id, once known.
    pub broker: Option<i32>,
    /// Connection attempts.
    pub connects: u64,
    /// Failed attempts and connections that broke (closed by the broker
    /// or on an error).
    pub connection_errors: u64,
    /// Requests sent.
    pub requests: u64,
    /// Requests answered.
    pub responses: u64,
    /// Requests that got no answer (connection lost, timed out).
    pub request_errors: u64,
    /// Bytes written.
    pub bytes_out: u64,
    /// Bytes read.
    pub bytes_in: u64,
    /// Round trips of the answered requests.
    pub latency: Latency,
}

impl From<&BrokerCounters> for BrokerMetrics {
    fn from(c: &BrokerCounters) -> Self {
        BrokerMetrics {
            broker: c.broker,
            connects: c.connects,
            connection_errors: c.connection_errors(),
            requests: c.requests,
            responses: c.responses,
            request_errors: c.request_errors,
            bytes_out: c.bytes_out,
            bytes_in: c.bytes_in,
            latency: Latency {
                min_us: c.rtt_min.map(micros),
                avg_us: c.rtt_avg().map(micros),
                max_us: c.rtt_max.map(micros),
            },
        }
    }
}

/// Request round trips, in microseconds (`None` before the first answer).
/// A Fetch's round trip includes the time the broker held it waiting for
/// records (up to `fetch.max.wait.ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Latency {
    /// The shortest.
    pub min_us: Option<u64>,
    /// The mean.
    pub avg_us: Option<u64>,
    /// The longest.
    pub max_us: Option<u64>,
}

pub(crate) fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

pub(crate) fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
