//! The census of the child's sockets: a sampler thread that notes every
//! TCP socket the process holds to a broker port, and the process's CPU
//! time less the sampler's own.

use super::tally::Tally;
use super::threads::{spawn_named, CENSUS_THREAD};
use crate::common::{client_sockets, ESTABLISHED};
use crate::measure::{cpu_time, status_field};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The inodes of the sockets this process holds (`/proc/self/fd`).
fn socket_inodes() -> Vec<u64> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    dir.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|t| {
            t.to_str()?
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect()
}

/// (local port, remote port) of every TCP socket on the machine, by
/// inode (`/proc/net/tcp{,6}`).
fn tcp_sockets() -> BTreeMap<u64, (u16, u16)> {
    let mut out = BTreeMap::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let port = |field: &str| {
                u16::from_str_radix(field.rsplit(':').next().unwrap_or(""), 16).unwrap_or(0)
            };
            if let (Some(l), Some(r), Some(Ok(inode))) =
                (f.get(1), f.get(2), f.get(9).map(|i| i.parse()))
            {
                out.insert(inode, (port(l), port(r)));
            }
        }
    }
    out
}

/// Every (local port, remote port) of a TCP socket this process held to
/// a broker port, and the sampler's own CPU time (to subtract). Every
/// 2 ms it lists this process's socket inodes, which is cheap, and reads
/// the machine's TCP tables only when an inode it cannot place yet shows
/// up (walking those tables is costly in the kernel when the machine
/// holds many sockets, and would take CPU from the client measured).
pub(crate) struct Census {
    stop: Arc<AtomicBool>,
    /// The sampler thread's CPU time so far, in microseconds.
    cpu_us: Arc<AtomicU64>,
    handle: std::thread::JoinHandle<BTreeSet<(u16, u16)>>,
}

/// The sockets the sampler has seen so far: those to a broker port
/// (local, remote), the inodes placed (connected somewhere, or given up
/// on), and how often an unplaced one was looked for.
#[derive(Default)]
struct Seen {
    sockets: BTreeSet<(u16, u16)>,
    placed: BTreeSet<u64>,
    tries: BTreeMap<u64, u32>,
}

impl Seen {
    /// Places the inodes new since the last look, reading the TCP tables
    /// only when there are some.
    fn look(&mut self, ports: &[u16]) {
        let new: Vec<u64> = socket_inodes()
            .into_iter()
            .filter(|i| !self.placed.contains(i))
            .collect();
        if new.is_empty() {
            return;
        }
        let table = tcp_sockets();
        for inode in new {
            match table.get(&inode) {
                Some(&(local, remote)) if remote != 0 => {
                    if ports.contains(&remote) {
                        self.sockets.insert((local, remote));
                    }
                    self.placed.insert(inode);
                }
                // Not connected yet (or not TCP): look again, for up to
                // about 100 ms.
                _ => {
                    let n = self.tries.entry(inode).or_default();
                    *n += 1;
                    if *n > 50 {
                        self.placed.insert(inode);
                    }
                }
            }
        }
    }
}

impl Census {
    /// Starts the sampler, watching for sockets to `ports`.
    pub(crate) fn start(ports: Vec<u16>) -> Census {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let cpu_us = Arc::new(AtomicU64::new(0));
        let cpu = cpu_us.clone();
        // Named, so that the per-thread idle figures leave it out.
        let handle = spawn_named(CENSUS_THREAD, move || {
            let mut seen = Seen::default();
            while !flag.load(Ordering::Relaxed) {
                seen.look(&ports);
                cpu.store(
                    cpu_time(libc::RUSAGE_THREAD).as_micros() as u64,
                    Ordering::Relaxed,
                );
                std::thread::sleep(Duration::from_millis(2));
            }
            seen.sockets
        });
        Census {
            stop,
            cpu_us,
            handle,
        }
    }

    /// The process's CPU time less the sampler's, and the sockets held
    /// to the brokers now (ESTABLISHED).
    pub(crate) fn snapshot(&self, ports: &[u16], t: &mut Tally) {
        let now = client_sockets(ports);
        t.held = now.iter().filter(|s| s.state == ESTABLISHED).count();
        t.held_sockets = now.iter().map(|s| (s.local_port, s.remote_port)).collect();
        t.threads = status_field("Threads");
        t.cpu = self.process_cpu();
    }

    /// The process's CPU time less the sampler's.
    pub(crate) fn process_cpu(&self) -> Duration {
        let sampler = Duration::from_micros(self.cpu_us.load(Ordering::Relaxed));
        cpu_time(libc::RUSAGE_SELF).saturating_sub(sampler)
    }

    /// Stops the sampler: the sockets it saw to the brokers, and its CPU
    /// time.
    pub(crate) fn finish(self) -> (BTreeSet<(u16, u16)>, Duration) {
        self.stop.store(true, Ordering::Relaxed);
        let seen = self.handle.join().unwrap();
        (
            seen,
            Duration::from_micros(self.cpu_us.load(Ordering::Relaxed)),
        )
    }
}
