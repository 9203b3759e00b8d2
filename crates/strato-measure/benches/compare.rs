//! The item-5 benchmark without the CLI: serial harness vs engine pinned to 1 vs engine free,
//! on the `opencl-matmul` workload. `cargo bench -p strato-measure --bench compare` prints the
//! comparison JSON (the same as `strato measure --compare-serial --example opencl-matmul
//! --json`). Environment: `STRATO_BENCH_N` (matrix size, 128), `STRATO_BENCH_LIMIT` (first k
//! candidates), `STRATO_BENCH_PARAMS` (calibrator parameters as JSON), `STRATO_BENCH_SWEEP`
//! (comma-separated fixed parallelism levels to sweep instead), `STRATO_BENCH_NO_LOCK`
//! (set: naive parallel measurement, no device lock), `STRATO_BENCH_STAT` (mean|median|min).

use strato_measure::calibrate::Params;
use strato_measure::compare::{self, CompareConfig};
use strato_measure::engine::EngineConfig;
use strato_measure::WorkerSpec;

fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return; // `cargo test --benches` / `--list` probes
    }
    let worker = std::env::var("STRATO_MEASURE_WORKER")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_strato-measure-worker").to_string());
    let n: usize = std::env::var("STRATO_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(128);
    let mut candidates = strato_measure::examples::opencl_matmul(n);
    if let Some(k) = std::env::var("STRATO_BENCH_LIMIT")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        candidates.truncate(k);
    }
    let mut engine = EngineConfig::new(WorkerSpec::new(vec![worker]));
    engine.device_lock = std::env::var("STRATO_BENCH_NO_LOCK").is_err();
    if let Ok(s) = std::env::var("STRATO_BENCH_STAT") {
        engine.statistic = match s.as_str() {
            "mean" => strato_measure::Statistic::Mean,
            "min" => strato_measure::Statistic::Min,
            _ => strato_measure::Statistic::Median,
        };
    }
    if let Ok(p) = std::env::var("STRATO_BENCH_PARAMS") {
        match serde_json::from_str::<Params>(&p) {
            Ok(p) => engine.params = p,
            Err(e) => {
                eprintln!("STRATO_BENCH_PARAMS: {e}");
                std::process::exit(2);
            }
        }
    }
    if let Ok(levels) = std::env::var("STRATO_BENCH_SWEEP") {
        let levels: Vec<usize> = levels
            .split(',')
            .filter_map(|v| v.trim().parse().ok())
            .collect();
        match compare::sweep(&engine, &candidates, &levels) {
            Ok(runs) => {
                let rows: Vec<serde_json::Value> = runs
                    .iter()
                    .map(|(dp, r)| {
                        serde_json::json!({
                            "dp": dp, "time_s": r.total_s, "best": r.best,
                            "delta_by_dp": r.delta_by_dp, "counts": r.counts,
                        })
                    })
                    .collect();
                println!("{}", serde_json::Value::Array(rows));
            }
            Err(e) => {
                eprintln!("sweep: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    let cfg = CompareConfig::new(engine);
    match compare::run(&cfg, &candidates, &mut |l| eprintln!("compare: {l}")) {
        Ok(report) => match serde_json::to_string_pretty(&report) {
            Ok(s) => println!("{s}"),
            Err(e) => eprintln!("{e}"),
        },
        Err(e) => {
            eprintln!("compare: {e}");
            std::process::exit(1);
        }
    }
}
