//! Prints a table of iteration-mining time and peak RSS per sequence length, each size in a
//! fresh process (peak RSS, `VmHWM`, only grows), so that linear growth is visible.
//!
//! `cargo run --release -p strato-analysis --example iterations_scaling [-- SIZES_IN_M...]`
//! (default 1 2 5 10). `-- --one N` runs one size and prints one row.

use std::time::Instant;

use strato_analysis::patterns::iterations::{mine, synthetic, IterationOptions};

const PERIOD: usize = 2_000;

fn vm_hwm_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

fn one(millions: f64, estimate: bool) {
    let n = (millions * 1e6) as usize;
    let iters = n / PERIOD;
    let (s, starts) = synthetic(42, PERIOD, iters, 1_000, 0.2, 5, 300);
    let mut gaps = vec![1_000i64; s.len()];
    for &k in &starts {
        gaps[k] = 1_000_000;
    }
    let base = vm_hwm_kib().unwrap_or(0);
    let options = IterationOptions {
        iterations: if estimate { Vec::new() } else { vec![iters] },
        ..IterationOptions::default()
    };
    let t = Instant::now();
    let loops = mine(&s, Some(&gaps), &options);
    let secs = t.elapsed().as_secs_f64();
    let peak = vm_hwm_kib().unwrap_or(0);
    let found = loops.first().map_or(0, |l| l.matches.len());
    let exact = loops.first().map_or(0, |l| {
        l.matches
            .iter()
            .zip(&starts)
            .filter(|(m, &st)| m.start == st)
            .count()
    });
    println!(
        "{:>10} {:>9} {:>8.3} {:>10.1} {:>10.1} {:>9.1} {:>10} {:>10} {:>10}",
        s.len(),
        if estimate { "estimated" } else { "given" },
        secs,
        s.len() as f64 / secs / 1e6,
        peak as f64 / 1024.0,
        (peak.saturating_sub(base)) as f64 * 1024.0 / s.len() as f64,
        iters,
        found,
        exact
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--one") {
        let m: f64 = args.get(1).and_then(|v| v.parse().ok()).unwrap_or(1.0);
        let estimate = args.get(2).map(String::as_str) == Some("estimate");
        one(m, estimate);
        return;
    }
    let sizes: Vec<String> = if args.is_empty() {
        ["1", "2", "5", "10"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    } else {
        args
    };
    println!(
        "{:>10} {:>9} {:>8} {:>10} {:>10} {:>9} {:>10} {:>10} {:>10}",
        "ops", "i", "secs", "Mops/s", "peak MiB", "B/op", "true iters", "found", "exact"
    );
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    for size in &sizes {
        for mode in ["given", "estimate"] {
            let status = std::process::Command::new(&exe)
                .args(["--one", size, mode])
                .status();
            if let Err(e) = status {
                eprintln!("size {size}: {e}");
            }
        }
    }
}
