//! Iteration mining cost: synthetic kernel sequences of 1M..10M ops with a known period and
//! noise, and one real trace's main stream. The scaling table with peak RSS comes from
//! `cargo run --release -p strato-analysis --example iterations_scaling`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use strato_analysis::patterns::iterations::{iterations, mine, synthetic, IterationOptions};

const PERIOD: usize = 2_000;

fn synthetic_sizes(c: &mut Criterion) {
    let mut group = c.benchmark_group("iterations/synthetic");
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(5));
    for millions in [1usize, 2, 5, 10] {
        let n = millions * 1_000_000;
        let iters = n / PERIOD;
        let (s, starts) = synthetic(42, PERIOD, iters, 1_000, 0.2, 5, 300);
        let mut gaps = vec![1_000i64; s.len()];
        for &k in &starts {
            gaps[k] = 1_000_000;
        }
        let options = IterationOptions {
            iterations: vec![iters],
            ..IterationOptions::default()
        };
        group.throughput(Throughput::Elements(s.len() as u64));
        group.bench_with_input(
            BenchmarkId::from_parameter(format!("{millions}M")),
            &s,
            |b, s| b.iter(|| black_box(mine(s, Some(&gaps), &options))),
        );
    }
    group.finish();
}

fn dev_trace(c: &mut Criterion) {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/kineto/hta_df_index_resolver.json.gz");
    if !path.exists() {
        eprintln!("skipping dev trace bench: {} not found", path.display());
        return;
    }
    let Ok(trace) = strato_io::import_paths(&[path], &strato_io::ImportOptions::default()) else {
        return;
    };
    let mut group = c.benchmark_group("iterations/dev");
    group.sample_size(10);
    group.bench_function("hta_df_index_resolver", |b| {
        b.iter(|| black_box(iterations(&trace, &IterationOptions::default())))
    });
    group.finish();
}

criterion_group!(benches, synthetic_sizes, dev_trace);
criterion_main!(benches);
