//! The census of another process, from outside: the TCP sockets it holds
//! to the brokers (its `/proc/PID/fd` placed in `/proc/net/tcp*`), each
//! with its state; a sampler thread noting every one it ever held; and
//! its threads, memory and CPU time from `/proc/PID/status` and
//! `/proc/PID/stat`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// TCP states, as `/proc/net/tcp` numbers them.
pub(crate) const ESTABLISHED: u8 = 0x01;
pub(crate) const CLOSE_WAIT: u8 = 0x08;

/// A TCP state's name.
pub(crate) fn state_name(state: u8) -> &'static str {
    match state {
        0x01 => "ESTABLISHED",
        0x02 => "SYN_SENT",
        0x03 => "SYN_RECV",
        0x04 => "FIN_WAIT1",
        0x05 => "FIN_WAIT2",
        0x06 => "TIME_WAIT",
        0x07 => "CLOSE",
        0x08 => "CLOSE_WAIT",
        0x09 => "LAST_ACK",
        0x0A => "LISTEN",
        0x0B => "CLOSING",
        _ => "OTHER",
    }
}

/// One socket a process holds: its local and remote ports, its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Sock {
    pub(crate) local: u16,
    pub(crate) remote: u16,
    pub(crate) state: u8,
}

/// The inodes of the sockets process `pid` holds.
fn socket_inodes(pid: u32) -> Vec<u64> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
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

/// Every TCP socket on the machine, by inode (`/proc/net/tcp{,6}`).
fn tcp_table() -> BTreeMap<u64, Sock> {
    let mut out = BTreeMap::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 10 {
                continue;
            }
            let port = |field: &str| {
                u16::from_str_radix(field.rsplit(':').next().unwrap_or(""), 16).unwrap_or(0)
            };
            if let Ok(inode) = f[9].parse::<u64>() {
                out.insert(
                    inode,
                    Sock {
                        local: port(f[1]),
                        remote: port(f[2]),
                        state: u8::from_str_radix(f[3], 16).unwrap_or(0),
                    },
                );
            }
        }
    }
    out
}

/// The sockets process `pid` holds now to one of `ports`, in any state,
/// ordered by remote port.
pub(crate) fn sockets(pid: u32, ports: &[u16]) -> Vec<Sock> {
    let inodes = socket_inodes(pid);
    if inodes.is_empty() {
        return Vec::new();
    }
    let table = tcp_table();
    let mut out: Vec<Sock> = inodes
        .iter()
        .filter_map(|i| table.get(i))
        .filter(|s| ports.contains(&s.remote))
        .copied()
        .collect();
    out.sort_by_key(|s| (s.remote, s.local));
    out
}

/// A sampler thread that notes every socket process `pid` holds to one
/// of `ports`, every 2 ms (the process's inodes, cheap; the machine's
/// TCP tables only when an inode it cannot place yet shows up, as the
/// children's own census does). A lower bound: a connect refused at once
/// never shows.
pub(crate) struct Watch {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<BTreeSet<(u16, u16)>>,
}

impl Watch {
    pub(crate) fn start(pid: u32, ports: Vec<u16>) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut seen = BTreeSet::new();
            let mut placed: BTreeSet<u64> = BTreeSet::new();
            let mut tries: BTreeMap<u64, u32> = BTreeMap::new();
            while !flag.load(Ordering::Relaxed) {
                let new: Vec<u64> = socket_inodes(pid)
                    .into_iter()
                    .filter(|i| !placed.contains(i))
                    .collect();
                if !new.is_empty() {
                    let table = tcp_table();
                    for inode in new {
                        match table.get(&inode) {
                            Some(s) if s.remote != 0 => {
                                if ports.contains(&s.remote) {
                                    seen.insert((s.local, s.remote));
                                }
                                placed.insert(inode);
                            }
                            // Not connected yet, or not TCP: looked for
                            // again, for about 100 ms.
                            _ => {
                                let n = tries.entry(inode).or_default();
                                *n += 1;
                                if *n > 50 {
                                    placed.insert(inode);
                                }
                            }
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            seen
        });
        Watch { stop, handle }
    }

    /// Stops the sampler: every (local, remote) port pair it saw.
    pub(crate) fn finish(self) -> BTreeSet<(u16, u16)> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

/// A field of `/proc/PID/status` (`VmHWM`, `VmRSS` in kB, `Threads`), 0
/// when it cannot be read.
pub(crate) fn status_field(pid: u32, name: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The CPU time (user + system) process `pid` has used so far, every
/// thread's, exited ones included (`/proc/PID/stat`, in clock ticks).
pub(crate) fn cpu_s(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name, which is in parentheses: the
    // state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some(ticks as f64 / hz)
}
