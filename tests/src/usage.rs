//! What a running process costs, read from `/proc/<pid>`: CPU time as a share of one core and
//! the bytes it moved through syscalls, over a window. For the cost benchmarks (examples).

use std::time::Duration;

/// utime + stime of `pid`, in clock ticks.
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Bytes the process read and wrote through syscalls (`rchar` + `wchar` of `/proc/<pid>/io`).
/// At steady state a coordinator with no jobs logs nothing, so this is its socket traffic
/// (TLS records included) plus the files it reads (the TLS files a rotation check reads).
pub fn io_bytes(pid: u32) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap();
    io.lines()
        .filter_map(|l| {
            l.strip_prefix("rchar: ")
                .or_else(|| l.strip_prefix("wchar: "))
        })
        .map(|v| v.trim().parse::<u64>().unwrap())
        .sum()
}

/// Clock ticks per second (`getconf CLK_TCK`).
pub fn clock_ticks_per_sec() -> u64 {
    let out = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(100)
}

/// Over `window`, each of `pids`' CPU use (percent of one core) and bytes moved per second.
pub fn measure(pids: &[u32], window: Duration) -> Vec<(f64, f64)> {
    let cpu: Vec<u64> = pids.iter().map(|p| cpu_ticks(*p)).collect();
    let io: Vec<u64> = pids.iter().map(|p| io_bytes(*p)).collect();
    #[expect(
        clippy::disallowed_types,
        reason = "real processes run on the real clock"
    )]
    let start = std::time::Instant::now();
    std::thread::sleep(window);
    let elapsed = start.elapsed().as_secs_f64();
    let hz = clock_ticks_per_sec() as f64;
    pids.iter()
        .enumerate()
        .map(|(i, p)| {
            (
                (cpu_ticks(*p) - cpu[i]) as f64 / hz / elapsed * 100.0,
                (io_bytes(*p) - io[i]) as f64 / elapsed,
            )
        })
        .collect()
}
