//! A loop that runs past the layers it mostly is: `lines_up_with` names the best partial match
//! and how many iterations line up with it (issue 28). Constructed: one inference step of 24
//! decoder layers and a tail of 10 blocks running the same kernels outside any layer module,
//! so the miner finds 34 iterations of which 24 are `DecoderLayer` instances.

#![allow(clippy::unwrap_used)] // test helpers panic on broken fixtures by design

use strato_analysis::analyzed::Analyzed;
use strato_analysis::patterns::iterations::{
    attach_lines_up, iterations, Diagnosis, IterationOptions,
};
use strato_trace::testing::{rank, TraceBuilder};
use strato_trace::{Level, Ns, Trace};

const US: Ns = 1_000;
const KERNELS: usize = 10;

/// `layers` blocks under `nn.Module: DecoderLayer_k`, then `tail` blocks under
/// `nn.Module: Tail_k`, each launching the same 10 kernels, inside one `ProfilerStep#1`.
fn trace(layers: usize, tail: usize) -> Trace {
    let mut b = TraceBuilder::new();
    b.rank(rank(Some(0), "partial"));
    let cpu = b.thread(1, 1);
    let gpu = b.queue(0, 7);
    let block_len = 100 * US;
    let blocks = layers + tail;
    b.span(
        cpu,
        Level::Operation,
        "ProfilerStep#1",
        0,
        blocks as Ns * block_len + 10 * US,
    );
    let mut correlation = 0;
    for k in 0..blocks {
        let start = k as Ns * block_len + US;
        let module = if k < layers {
            format!("nn.Module: DecoderLayer_{k}")
        } else {
            format!("nn.Module: Tail_{}", k - layers)
        };
        b.span(cpu, Level::Python, &module, start, start + 90 * US);
        for j in 0..KERNELS {
            correlation += 1;
            let at = start + US + j as Ns * 8 * US;
            b.span(cpu, Level::AcceleratorApi, "cudaLaunchKernel", at, at + US)
                .correlation(correlation);
            let run = at + 2 * US;
            b.span(
                gpu,
                Level::DeviceKernel,
                &format!("kernel_{j}"),
                run,
                run + 5 * US,
            )
            .correlation(correlation);
        }
    }
    b.build()
}

fn first_loop(t: &Trace) -> strato_analysis::patterns::iterations::LoopReport {
    let mut r = iterations(t, &IterationOptions::default());
    attach_lines_up(&Analyzed::new(t), &mut r);
    r.sequences.into_iter().next().unwrap()
}

#[test]
fn a_loop_with_a_tail_is_named_after_its_layers_with_the_count() {
    let seq = first_loop(&trace(24, 10));
    assert_eq!(seq.iterations.len(), 34, "one iteration per block");
    assert_eq!(seq.lines_up_with.as_deref(), Some("DecoderLayer"));
    assert_eq!(seq.lines_up_kind, Some("module"));
    assert_eq!(seq.lines_up_iterations, Some(24));
    let Diagnosis::LayersInOneStep {
        module,
        iterations,
        lined_up,
    } = &seq.diagnosis[0]
    else {
        panic!("{:?}", seq.diagnosis);
    };
    assert_eq!(
        (module.as_deref(), *iterations, *lined_up),
        (Some("DecoderLayer"), 34, 24)
    );
    assert!(
        seq.diagnosis[0]
            .message()
            .contains("24 of the 34 iterations are the DecoderLayer modules"),
        "{}",
        seq.diagnosis[0].message()
    );
}

#[test]
fn a_full_match_has_no_count_and_the_majority_names_the_loop() {
    let seq = first_loop(&trace(34, 0));
    assert_eq!(seq.lines_up_with.as_deref(), Some("DecoderLayer"));
    assert_eq!(seq.lines_up_iterations, None, "every iteration lines up");
    // 10 layers among 34 blocks: the 24 tail blocks are the best partial match.
    let seq = first_loop(&trace(10, 24));
    assert_eq!(seq.iterations.len(), 34);
    assert_eq!(
        (seq.lines_up_with.as_deref(), seq.lines_up_iterations),
        (Some("Tail"), Some(24)),
        "the tail is now the majority"
    );
}
