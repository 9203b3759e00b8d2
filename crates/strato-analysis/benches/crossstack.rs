//! Cross-stack analyses cost on the largest real trace (`hta_df_index_resolver.json.gz`:
//! 216k events, 123k spans): import alone vs import + breakdown + hierarchy, and the analyses
//! alone on a trace already in memory. The ratio (import + analyses) / import is the figure the
//! issue asks for.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use strato_analysis::analyzed::Analyzed;
use strato_analysis::cross_stack::breakdown::{breakdown, BreakdownOptions};
use strato_analysis::cross_stack::hierarchy;
use strato_io::{import_paths, ImportOptions};
use strato_trace::Trace;

fn input() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/kineto/hta_df_index_resolver.json.gz");
    p.exists().then_some(p)
}

fn import(path: &PathBuf) -> Trace {
    let options = ImportOptions {
        keep_args: false,
        ..ImportOptions::default()
    };
    import_paths(std::slice::from_ref(path), &options).expect("import")
}

fn analyses(trace: &Trace) -> usize {
    let analyzed = Analyzed::new(trace);
    let b = breakdown(&analyzed, &BreakdownOptions::default());
    let r = hierarchy::report(&analyzed);
    b.processes.len() + r.total.device_ops
}

fn crossstack(c: &mut Criterion) {
    let Some(path) = input() else {
        eprintln!("hta_df_index_resolver.json.gz not present: skipping");
        return;
    };
    let mut group = c.benchmark_group("crossstack/hta_df_index_resolver");
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(6));
    group.bench_function("import", |b| b.iter(|| black_box(import(&path))));
    group.bench_function("import+breakdown+hierarchy", |b| {
        b.iter(|| {
            let trace = import(&path);
            black_box(analyses(&trace))
        })
    });
    let trace = import(&path);
    group.bench_function("breakdown+hierarchy", |b| {
        b.iter(|| black_box(analyses(&trace)))
    });
    group.finish();
}

criterion_group!(benches, crossstack);
criterion_main!(benches);
