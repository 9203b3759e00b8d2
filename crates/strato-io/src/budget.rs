//! Where an import's memory budget comes from (the accounting itself is
//! [`strato_trace::MemoryTracker`]): `STRATO_MEMORY_BUDGET` when set, else half of the
//! physical memory available to this process (the smaller of `MemTotal` in `/proc/meminfo` and
//! the cgroup v2 limit `/sys/fs/cgroup/memory.max`), else [`FALLBACK_BUDGET_BYTES`].
//!
//! `STRATO_MEMORY_BUDGET` is a byte count with an optional unit: `500000000`, `512M`, `8G`,
//! `8GiB`, `1.5T` (K, M, G, T are powers of 1024; a trailing `B` or `iB` is allowed). An
//! invalid value is an error, never ignored.

/// Name of the environment variable that sets the budget.
pub const MEMORY_BUDGET_VAR: &str = "STRATO_MEMORY_BUDGET";

/// Budget when physical memory cannot be read: 8 GiB.
pub const FALLBACK_BUDGET_BYTES: u64 = 8 << 30;

/// `STRATO_MEMORY_BUDGET` does not hold a size.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{MEMORY_BUDGET_VAR}={value:?} is not a size (examples: 500000000, 512M, 8G, 8GiB)")]
pub struct BadMemoryBudget {
    pub value: String,
}

/// Parses a size such as `8G` (see the module docs).
pub fn parse_size(text: &str) -> Result<u64, BadMemoryBudget> {
    let bad = || BadMemoryBudget {
        value: text.to_owned(),
    };
    let t = text.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix("ib"))
        .or_else(|| t.strip_suffix(['B', 'b']))
        .unwrap_or(t);
    let (number, shift) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 10),
        Some('m' | 'M') => (&t[..t.len() - 1], 20),
        Some('g' | 'G') => (&t[..t.len() - 1], 30),
        Some('t' | 'T') => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    let number = number.trim();
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err(bad());
    }
    let value: f64 = number.parse().map_err(|_| bad())?;
    let bytes = value * (1u64 << shift) as f64;
    if !bytes.is_finite() || bytes < 1.0 || bytes >= u64::MAX as f64 {
        return Err(bad());
    }
    Ok(bytes as u64)
}

/// The default budget: half of the physical memory this process may use.
pub fn default_budget() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|rest| rest.trim().strip_suffix("kB"))
                .and_then(|kb| kb.trim().parse::<u64>().ok())
                .map(|kb| kb * 1024)
        });
    let cgroup = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok());
    match (meminfo, cgroup) {
        (Some(a), Some(b)) => a.min(b) / 2,
        (Some(a), None) | (None, Some(a)) => a / 2,
        (None, None) => FALLBACK_BUDGET_BYTES,
    }
}

/// The budget: `STRATO_MEMORY_BUDGET` when set (an error when invalid), else
/// [`default_budget`].
pub fn memory_budget_from_env() -> Result<u64, BadMemoryBudget> {
    match std::env::var(MEMORY_BUDGET_VAR) {
        Ok(value) => parse_size(&value),
        Err(std::env::VarError::NotPresent) => Ok(default_budget()),
        Err(std::env::VarError::NotUnicode(v)) => Err(BadMemoryBudget {
            value: v.to_string_lossy().into_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_with_units() {
        assert_eq!(parse_size("500000000"), Ok(500_000_000));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("8G"), Ok(8 << 30));
        assert_eq!(parse_size("8GiB"), Ok(8 << 30));
        assert_eq!(parse_size(" 2k "), Ok(2048));
        assert_eq!(parse_size("1.5K"), Ok(1536));
        assert_eq!(parse_size("100B"), Ok(100));
        for bad in ["", "G", "lots", "-1G", "0", "1e3", "8X", "99999999999T"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn default_is_half_of_physical_memory() {
        let budget = default_budget();
        assert!(budget >= 1 << 28, "{budget}");
    }
}
