//! Helpers shared by the integration tests.

#![allow(dead_code)]

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
