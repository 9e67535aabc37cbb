//! The standard `process_*` figures of a Prometheus client (the names Go's
//! and every other official client export), read from Linux's `/proc` at each
//! scrape. On a system without `/proc` they are left out.

use std::fs;

use super::exporter::Text;

/// Clock ticks per second of `/proc`'s times: `USER_HZ`, 100 on every Linux
/// architecture's user interface (as Prometheus' own procfs library assumes).
const USER_HZ: f64 = 100.0;

/// Appends the process families that could be read.
pub fn sample(text: &mut Text<'_>) {
    let stat = fs::read_to_string("/proc/self/stat").ok();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .as_deref()
        .and_then(|s| s.rsplit_once(')'))
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // `fields[0]` is field 3 of proc(5): field n is `fields[n - 3]`.
    let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<f64>().ok());
    if let (Some(user), Some(system)) = (field(14), field(15)) {
        text.family(
            "process_cpu_seconds_total",
            "Total user and system CPU time spent in seconds.",
            "counter",
        );
        text.sample("process_cpu_seconds_total", &[], (user + system) / USER_HZ);
    }
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|v| v.parse::<i64>().ok())
            .map(|v| v * 1024)
    };
    if let Some(rss) = kib("VmRSS:") {
        text.family(
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            "gauge",
        );
        text.sample("process_resident_memory_bytes", &[], rss);
    }
    if let Some(size) = kib("VmSize:") {
        text.family(
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes.",
            "gauge",
        );
        text.sample("process_virtual_memory_bytes", &[], size);
    }
    if let Ok(entries) = fs::read_dir("/proc/self/fd") {
        text.family(
            "process_open_fds",
            "Number of open file descriptors.",
            "gauge",
        );
        text.sample("process_open_fds", &[], entries.count());
    }
    let max_fds = fs::read_to_string("/proc/self/limits").ok().and_then(|l| {
        l.lines()
            .find_map(|line| line.strip_prefix("Max open files"))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|v| v.parse::<i64>().ok())
    });
    if let Some(max) = max_fds {
        text.family(
            "process_max_fds",
            "Maximum number of open file descriptors.",
            "gauge",
        );
        text.sample("process_max_fds", &[], max);
    }
    let boot_time = fs::read_to_string("/proc/stat").ok().and_then(|s| {
        s.lines()
            .find_map(|line| line.strip_prefix("btime "))
            .and_then(|v| v.trim().parse::<f64>().ok())
    });
    if let (Some(boot), Some(start)) = (boot_time, field(22)) {
        text.family(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
            "gauge",
        );
        text.sample("process_start_time_seconds", &[], boot + start / USER_HZ);
    }
}
