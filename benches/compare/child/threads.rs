//! The child's threads: naming them (so the census thread can be left out
//! of per-thread figures) and each one's run time from
//! `/proc/self/task/*/schedstat`.

use std::collections::BTreeMap;

/// The name of the census thread.
pub(crate) const CENSUS_THREAD: &str = "census";

/// A thread named `name`.
pub(crate) fn spawn_named<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .expect("spawn a thread")
}

/// Each thread's run time so far, by thread id and name, from
/// `/proc/self/task/*/schedstat` (nanoseconds on a CPU).
pub(crate) fn thread_run_times() -> BTreeMap<(u32, String), (u64, u64)> {
    let mut out = BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for task in tasks.flatten() {
        let Ok(tid) = task.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        let mut fields = stat.split_whitespace().map(|f| f.parse::<u64>().ok());
        let (Some(Some(ns)), Some(_), Some(Some(slices))) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        out.insert((tid, name.trim_end().to_owned()), (ns, slices));
    }
    out
}
