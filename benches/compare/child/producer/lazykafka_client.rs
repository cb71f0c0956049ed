//! The producer child on lazykafka: every `send` awaited, the delivery
//! futures kept in the order sent, on the runtime the consumer's child
//! uses, under a watchdog.

use super::Work;
use crate::child::census::Census;
use crate::child::runtime::Runtime;
use crate::child::tally::Tally;
use crate::child::threads::spawn_named;
use crate::child::{add_own_counters, ports_of, CHILD_TIMEOUT};
use crate::client_config::{
    PRODUCE_ACKS, PRODUCE_BATCH_SIZE, PRODUCE_IDEMPOTENCE, PRODUCE_LINGER_MS, PRODUCE_MAX_IN_FLIGHT,
};
use crate::measure::mono_us;
use futures::FutureExt as _;
use lazykafka::{Producer, ProducerConfig, ProducerRecord};
use serde_json::{json, Value};
use std::future::Future;

/// lazykafka: every `send` awaited (it waits only for the topic's
/// metadata and for room in `buffer.memory`), each delivery future
/// kept in a queue in the order sent, the done ones taken from its
/// front after each send, then the rest awaited in order. The clock starts before `Producer::new`.
pub(crate) fn produce(
    bootstrap: &str,
    w: &Work,
    census: &Census,
    extra: &mut serde_json::Map<String, Value>,
) -> Tally {
    let mut t = Tally::default();
    let mut first_error: Option<String> = None;
    t.first_poll_us = mono_us();
    let producer = Producer::new(config(bootstrap, w)).expect("lazykafka producer");
    // The runtime, as the consumer's child picks it.
    let runtime = Runtime::new();
    let finished = finish_in_time(&runtime, send_all(&producer, w, &mut t, &mut first_error));
    t.timed_out = !finished;
    census.snapshot(&ports_of(bootstrap), &mut t);
    add_own_counters(&producer.broker_counters(), extra);
    let metrics = producer.metrics();
    extra.insert(
        "batches_own".into(),
        json!(metrics.partitions.iter().map(|p| p.batches).sum::<u64>()),
    );
    extra.insert(
        "batch_bytes_own".into(),
        json!(metrics.partitions.iter().map(|p| p.bytes).sum::<u64>()),
    );
    extra.insert("first_error".into(), json!(first_error));
    extra.insert("runtime".into(), json!(Runtime::name()));
    t
}

/// The producer's configuration: the settings both producers get, and
/// the work's compression.
fn config(bootstrap: &str, w: &Work) -> ProducerConfig {
    ProducerConfig::builder()
        .set_all([
            ("bootstrap.servers", bootstrap),
            ("client.id", "bench-lazykafka"),
            ("acks", PRODUCE_ACKS),
            ("enable.idempotence", PRODUCE_IDEMPOTENCE),
            ("linger.ms", PRODUCE_LINGER_MS),
            ("batch.size", PRODUCE_BATCH_SIZE),
            (
                "max.in.flight.requests.per.connection",
                PRODUCE_MAX_IN_FLIGHT,
            ),
            ("compression.type", w.compression.as_str()),
        ])
        .and_then(|b| b.build())
        .expect("lazykafka producer config")
}

/// Runs `work` on `runtime`; a watchdog thread aborts it after
/// [`CHILD_TIMEOUT`] (it is gone before threads are counted). Whether
/// the work finished.
fn finish_in_time(runtime: &Runtime, work: impl Future<Output = ()>) -> bool {
    let (done, until_done) = std::sync::mpsc::channel::<()>();
    let (work, abort) = futures::future::abortable(work);
    let watchdog = spawn_named("watchdog", move || {
        if until_done.recv_timeout(CHILD_TIMEOUT).is_err() {
            abort.abort();
        }
    });
    let finished = runtime.block_on(work);
    let _ = done.send(());
    watchdog.join().expect("watchdog");
    finished.is_ok()
}

/// Sends every record of `w`, settling the deliveries done after each
/// send, then the rest in order; each delivery counted in `t`, the first
/// error kept.
async fn send_all(producer: &Producer, w: &Work, t: &mut Tally, first_error: &mut Option<String>) {
    let mut pending = std::collections::VecDeque::new();
    let mut settle = |t: &mut Tally, outcome: Result<_, lazykafka::Error>| match outcome {
        Ok(_) => {
            t.record(w.value_len);
            t.last_record_us = mono_us();
        }
        Err(e) => {
            t.errors += 1;
            first_error.get_or_insert_with(|| e.to_string());
        }
    };
    for i in 0..w.records {
        let record = ProducerRecord::new(w.topic.as_str()).value(w.value(i).clone());
        let record = match w.key(i) {
            Some(key) => record.key(key.clone()),
            None => record.partition(w.partition(i)),
        };
        match producer.send(record).await {
            Ok(delivery) => pending.push_back(delivery),
            Err(e) => settle(t, Err(e)),
        }
        // The deliveries done, oldest first: they complete in
        // the order of their partition's batches.
        while let Some(outcome) = pending.front_mut().and_then(|d| d.now_or_never()) {
            pending.pop_front();
            settle(t, outcome);
        }
    }
    for delivery in pending {
        settle(t, delivery.await);
    }
}
