//! What a process measures about itself: the machine-wide monotonic
//! clock, its CPU time, its minor page faults and fields of
//! `/proc/self/status`.

use std::time::Duration;

/// CLOCK_MONOTONIC in microseconds: the clock of librdkafka's `rd_clock()`,
/// shared by every process on the machine.
pub(crate) fn mono_us() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000 + ts.tv_nsec / 1_000
}

/// User + system CPU time of `who` (RUSAGE_SELF or RUSAGE_THREAD).
pub(crate) fn cpu_time(who: libc::c_int) -> Duration {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut ru) };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(us(ru.ru_utime) + us(ru.ru_stime))
}

/// Minor page faults of this process so far (`getrusage`).
pub(crate) fn minor_faults() -> u64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    ru.ru_minflt as u64
}

/// A field of `/proc/self/status` (such as `VmHWM`, in kB, or `Threads`).
pub(crate) fn status_field(name: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}
