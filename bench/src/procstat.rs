//! CPU time and peak memory of processes, read from Linux's `/proc`.

/// CPU time of a process in clock ticks: its own (user + system) and that of its children
/// it has waited for.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ticks {
    /// utime + stime.
    pub own: u64,
    /// cutime + cstime.
    pub children: u64,
}

/// Reads `/proc/<pid>/stat` (`pid` 0: this process); parent pid and CPU ticks.
pub fn stat(pid: u32) -> Option<(u32, Ticks)> {
    let path = if pid == 0 { "/proc/self/stat".to_owned() } else { format!("/proc/{pid}/stat") };
    let text = std::fs::read_to_string(path).ok()?;
    // The command name may contain spaces and parentheses: the fields start after the last ')'.
    let fields: Vec<&str> = text.get(text.rfind(')')? + 1..)?.split_whitespace().collect();
    let field = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    // Field 3 of proc(5) (state) is index 0 here: ppid 4, utime 14, stime 15, cutime 16, cstime 17.
    let ticks = Ticks { own: field(11)? + field(12)?, children: field(13)? + field(14)? };
    Some((u32::try_from(field(1)?).ok()?, ticks))
}

/// Own CPU ticks of `pid`, 0 when it is gone.
pub fn own_ticks(pid: u32) -> u64 {
    stat(pid).map_or(0, |(_, t)| t.own)
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 on every Linux we run).
pub fn ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse::<f64>().ok())
        .unwrap_or(100.0)
}

/// The pids whose parent is `parent`.
pub fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| stat(pid).is_some_and(|(ppid, _)| ppid == parent))
        .collect()
}

/// All CPU time a process tree has used: `root`'s own and reaped children's ticks plus the
/// own ticks of its live children (a child's ticks move to `root`'s children field when it is
/// reaped, so the sum only grows). Grandchildren are not counted (Postfix has none).
pub fn tree_ticks(root: u32) -> u64 {
    let Some((_, t)) = stat(root) else { return 0 };
    t.own + t.children + children_of(root).into_iter().map(own_ticks).sum::<u64>()
}

/// `VmHWM` (peak resident set) of `pid` in KiB.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    line.trim().trim_end_matches("kB").trim().parse().ok()
}

/// Proportional set size of `pid` in KiB (pages shared with n processes count 1/n), from
/// `/proc/<pid>/smaps_rollup`.
pub fn pss_kib(pid: u32) -> Option<u64> {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let line = rollup.lines().find_map(|l| l.strip_prefix("Pss:"))?;
    line.trim().trim_end_matches("kB").trim().parse().ok()
}

/// The effective user id of this process.
pub fn euid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|l| l.strip_prefix("Uid:"))?.split_whitespace().nth(1)?.parse().ok()
}

/// The `comm` (executable name, at most 15 bytes) of `pid`.
fn comm(pid: u32) -> Option<String> {
    Some(std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?.trim_end().to_owned())
}

/// The PostgreSQL postmaster on this machine: a `postgres` process whose parent is not one.
pub fn postmaster() -> Option<u32> {
    let entries = std::fs::read_dir("/proc").ok()?;
    entries.flatten().filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok()).find(|&pid| {
        comm(pid).as_deref() == Some("postgres")
            && stat(pid).is_some_and(|(ppid, _)| comm(ppid).as_deref() != Some("postgres"))
    })
}

/// The backends of `postmaster` connected to `database`: PostgreSQL sets each backend's
/// process title to `postgres: <cluster>: <user> <database> <client> <state>`.
pub fn backends_of(postmaster: u32, database: &str) -> Vec<u32> {
    let needle = format!(" {database} ");
    children_of(postmaster)
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|title| String::from_utf8_lossy(&title).contains(&needle))
        })
        .collect()
}

/// The machine's load averages over 1, 5 and 15 minutes, as `/proc/loadavg` gives them
/// (empty if it cannot be read): written beside every figure, since the machine is shared.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
