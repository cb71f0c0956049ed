//! Connects to brokers, negotiates API versions, and prints them.
//!
//! ```text
//! cargo run --example api_versions                  # a 3-broker librdkafka mock cluster
//! cargo run --example api_versions -- HOST:PORT ..  # your brokers
//! ```
//!
//! With no address, the example starts librdkafka's mock cluster in-process
//! (from the `rdkafka` dev-dependency), so it needs nothing installed. For
//! each broker it prints the range the broker advertises, the range this
//! client speaks, and the version chosen for the connection.

use lazykafka::protocol::ApiKey;
use lazykafka::runtime::{BrokerConnection, ConnectOptions};
use std::process::ExitCode;

#[path = "support/logger.rs"]
mod logger;

fn main() -> ExitCode {
    // The library's warn and error lines on stderr (RUST_LOG picks the level).
    logger::init();
    let mut addrs: Vec<String> = std::env::args().skip(1).collect();
    // Kept alive until the end of main: dropping it stops the brokers.
    let mut _mock = None;
    if addrs.is_empty() {
        let cluster = match rdkafka::mocking::MockCluster::new(3) {
            Ok(cluster) => cluster,
            Err(e) => {
                eprintln!("error: cannot start the mock cluster: {e}");
                return ExitCode::FAILURE;
            }
        };
        println!(
            "started librdkafka's mock cluster: {}",
            cluster.bootstrap_servers()
        );
        addrs = cluster
            .bootstrap_servers()
            .split(',')
            .map(str::to_owned)
            .collect();
        _mock = Some(cluster);
    }
    async_std::task::block_on(async {
        for addr in &addrs {
            let conn = match BrokerConnection::connect(addr, ConnectOptions::default()).await {
                Ok(conn) => conn,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::FAILURE;
                }
            };
            println!();
            println!("connected to {} ({})", conn.addr(), conn.peer_addr());
            println!(
                "{:<24} {:>10} {:>10} {:>8}",
                "api", "broker", "client", "chosen"
            );
            for api in ApiKey::ALL {
                let broker = conn
                    .versions()
                    .broker_range(api)
                    .map_or("-".to_owned(), |r| r.to_string());
                let chosen = conn
                    .versions()
                    .version(api)
                    .map_or("none".to_owned(), |v| v.to_string());
                println!(
                    "{:<24} {:>10} {:>10} {:>8}",
                    api.name(),
                    broker,
                    api.client_versions().to_string(),
                    chosen
                );
            }
            conn.close().await;
        }
        ExitCode::SUCCESS
    })
}
