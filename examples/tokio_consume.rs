//! The consumer on tokio: built with the feature `runtime-tokio` (the
//! default `runtime-async-std` may stay on), a consumer created inside a
//! tokio runtime runs on tokio's reactor and timers, with no other
//! executor beside it.
//!
//! ```text
//! cargo run --example tokio_consume --features runtime-tokio,mock
//! cargo run --example tokio_consume --features runtime-tokio,mock -- HOST:PORT TOPIC
//! ```
//!
//! With no arguments it starts a 3-broker cluster in this process
//! (`lazykafka::mock`), writes a few records, and reads them back on a
//! current-thread runtime: the consumer's background task, its connects
//! and socket readers are all tasks of that one thread. With a bootstrap
//! address and a topic it reads partitions 0 and 1 of that topic from the
//! beginning until 10 records came or 10 seconds passed.

use lazykafka::mock::{MockCluster, MockRecord};
use lazykafka::{Consumer, ConsumerConfig, OffsetReset, TopicPartition};
use std::time::{Duration, Instant};

#[path = "support/logger.rs"]
mod logger;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The library's warn and error lines on stderr (RUST_LOG picks the level).
    logger::init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Kept alive until the end of main: dropping it stops the brokers.
    let mut _mock = None;
    let (bootstrap, topic) = match args.as_slice() {
        [bootstrap, topic] => (bootstrap.clone(), topic.clone()),
        [] => {
            let mock = MockCluster::new(3)?;
            mock.create_topic("invoices", 2)?;
            for i in 0..10 {
                mock.produce("invoices", i % 2, [MockRecord::new(format!("invoice {i}"))])?;
            }
            let bootstrap = mock.bootstrap_servers();
            _mock = Some(mock);
            (bootstrap, "invoices".to_owned())
        }
        _ => return Err("usage: tokio_consume [HOST:PORT TOPIC]".into()),
    };

    let config = ConsumerConfig::builder()
        .bootstrap_servers(&bootstrap)
        .auto_offset_reset(OffsetReset::Earliest)
        .build()?;
    let consumer = Consumer::new(config)?; // no socket, no DNS, no task
    consumer.assign([
        TopicPartition::new(&topic, 0),
        TopicPartition::new(&topic, 1),
    ])?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = 0;
    while seen < 10 && Instant::now() < deadline {
        // The first poll starts the background task on this runtime.
        for record in consumer.poll(Duration::from_millis(500)).await? {
            let value = String::from_utf8_lossy(record.value().unwrap_or_default());
            println!(
                "{}/{}@{}: {value}",
                record.topic(),
                record.partition(),
                record.offset()
            );
            seen += 1;
        }
    }
    for c in consumer.connections() {
        println!("{:?} broker {:?} {}", c.purpose, c.broker, c.addr);
    }
    consumer.close().await?;
    Ok(())
}
