//! Tuning workloads. `opencl-matmul`: a grid-index tuner (deterministic order, as the paper
//! uses for one-to-one comparisons) over an OpenCL SGEMM family `C = A B` (N x N, f32):
//!
//! - `naive`: one output per work-item; work-group `WX x WY` in {1..32}^2; the k-loop unrolled
//!   by `UNROLL` in {1, 2, 4, 8};
//! - `tiled`: `TS x TS` tiles in local memory, `WPT` outputs per work-item (work-group
//!   `TS x TS/WPT`), the inner loop unrolled by `UNROLL`; combinations with `WPT > TS` or
//!   `UNROLL > TS` are rejected by the compiler (`#error`), as invalid schedules are.
//!
//! `opencl-reduce`: a workload of another shape, so that the measurement method is not tuned
//! to one kernel family: a memory-bound 1-D sum of `size * 8192` floats (1 Mi for the default
//! size 128) into one partial sum per work-group. Work-group size `WG` in {16, 64, 256},
//! `ITEMS` in {4, 16, 64, 256} elements (or float4s with `VEC` 4) per work-item, read
//! `strided` (coalesced across work-items) or `contig` (each work-item its own run), and the
//! partial sums combined by a local-memory `tree` or `serial`ly by the first work-item: 96
//! candidates whose latencies span two orders of magnitude (work-group count and scheduling
//! overhead dominate the small-`ITEMS` ones).

use serde_json::json;

use crate::candidate::{Arg, BufferInit, Candidate};

/// The naive kernel.
pub const NAIVE_SOURCE: &str = r#"
#if N % UNROLL != 0
#error "UNROLL must divide N"
#endif
__kernel void mm_naive(const int n, __global const float* A, __global const float* B,
                       __global float* C) {
    const int col = get_global_id(0);
    const int row = get_global_id(1);
    float acc = 0.0f;
    for (int k = 0; k < N; k += UNROLL) {
        for (int u = 0; u < UNROLL; u++) {
            acc += A[row * N + k + u] * B[(k + u) * N + col];
        }
    }
    C[row * N + col] = acc;
}
"#;

/// The tiled kernel (after C. Nugteren's SGEMM tutorial, kernel 3), column-major.
pub const TILED_SOURCE: &str = r#"
#if WPT > TS
#error "WPT must not exceed TS"
#endif
#if UNROLL > TS
#error "UNROLL must not exceed TS"
#endif
#if (N % TS != 0) || (TS % WPT != 0) || (TS % UNROLL != 0)
#error "tile sizes must divide"
#endif
#define RTS (TS / WPT)
__kernel void mm_tiled(const int n, __global const float* A, __global const float* B,
                       __global float* C) {
    const int row = get_local_id(0);
    const int col = get_local_id(1);
    const int globalRow = TS * get_group_id(0) + row;
    const int globalCol = TS * get_group_id(1) + col;
    __local float Asub[TS][TS];
    __local float Bsub[TS][TS];
    float acc[WPT];
    for (int w = 0; w < WPT; w++) acc[w] = 0.0f;
    const int numTiles = N / TS;
    for (int t = 0; t < numTiles; t++) {
        for (int w = 0; w < WPT; w++) {
            const int tiledRow = TS * t + row;
            const int tiledCol = TS * t + col;
            Asub[col + w * RTS][row] = A[(tiledCol + w * RTS) * N + globalRow];
            Bsub[col + w * RTS][row] = B[(globalCol + w * RTS) * N + tiledRow];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TS; k += UNROLL) {
            for (int u = 0; u < UNROLL; u++) {
                for (int w = 0; w < WPT; w++) {
                    acc[w] += Asub[k + u][row] * Bsub[col + w * RTS][k + u];
                }
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int w = 0; w < WPT; w++) C[(globalCol + w * RTS) * N + globalRow] = acc[w];
}
"#;

fn args(n: usize) -> Vec<Arg> {
    let bytes = (n * n * 4) as u64;
    vec![
        Arg::Int(n as i32),
        Arg::Buffer {
            bytes,
            init: BufferInit::Random,
        },
        Arg::Buffer {
            bytes,
            init: BufferInit::Random,
        },
        Arg::Buffer {
            bytes,
            init: BufferInit::Zero,
        },
    ]
}

/// The `opencl-matmul` candidates for an `n x n` product, in grid-index order
/// (144 naive + 80 tiled = 224 for the default grids; 15 tiled ones do not build).
pub fn opencl_matmul(n: usize) -> Vec<Candidate> {
    let mut out = Vec::new();
    let wg = [1usize, 2, 4, 8, 16, 32];
    for &wx in &wg {
        for &wy in &wg {
            for unroll in [1usize, 2, 4, 8] {
                let mut c = Candidate {
                    name: format!("naive_wg{wx}x{wy}_u{unroll}"),
                    source: Some(NAIVE_SOURCE.into()),
                    kernel: Some("mm_naive".into()),
                    build_options: format!("-DN={n} -DUNROLL={unroll}"),
                    global: vec![n, n],
                    local: Some(vec![wx, wy]),
                    args: args(n),
                    ..Candidate::default()
                };
                c.params.insert("variant".into(), json!("naive"));
                c.params.insert("wx".into(), json!(wx));
                c.params.insert("wy".into(), json!(wy));
                c.params.insert("unroll".into(), json!(unroll));
                out.push(c);
            }
        }
    }
    for ts in [4usize, 8, 16, 32] {
        for wpt in [1usize, 2, 4, 8] {
            for unroll in [1usize, 2, 4, 8, 16] {
                let mut c = Candidate {
                    name: format!("tiled_ts{ts}_wpt{wpt}_u{unroll}"),
                    source: Some(TILED_SOURCE.into()),
                    kernel: Some("mm_tiled".into()),
                    build_options: format!("-DN={n} -DTS={ts} -DWPT={wpt} -DUNROLL={unroll}"),
                    global: vec![n, n / wpt.min(ts).max(1)],
                    local: Some(vec![ts, (ts / wpt).max(1)]),
                    args: args(n),
                    ..Candidate::default()
                };
                c.params.insert("variant".into(), json!("tiled"));
                c.params.insert("ts".into(), json!(ts));
                c.params.insert("wpt".into(), json!(wpt));
                c.params.insert("unroll".into(), json!(unroll));
                out.push(c);
            }
        }
    }
    out
}

/// The reduction kernel.
pub const REDUCE_SOURCE: &str = r#"
__kernel void reduce(__global const float* in, __global float* out, __local float* scratch) {
    const size_t lid = get_local_id(0);
    const size_t gid = get_global_id(0);
    const size_t gsize = get_global_size(0);
    float acc = 0.0f;
#if VEC == 4
    __global const float4* in4 = (__global const float4*)in;
    for (int k = 0; k < ITEMS; k++) {
#if CONTIG
        const float4 v = in4[gid * ITEMS + k];
#else
        const float4 v = in4[gid + k * gsize];
#endif
        acc += (v.x + v.y) + (v.z + v.w);
    }
#else
    for (int k = 0; k < ITEMS; k++) {
#if CONTIG
        acc += in[gid * ITEMS + k];
#else
        acc += in[gid + k * gsize];
#endif
    }
#endif
    scratch[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
#if TREE
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (lid < s) scratch[lid] += scratch[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) out[get_group_id(0)] = scratch[0];
#else
    if (lid == 0) {
        float t = 0.0f;
        for (int i = 0; i < WG; i++) t += scratch[i];
        out[get_group_id(0)] = t;
    }
#endif
}
"#;

/// The `opencl-reduce` candidates: a sum of `size * 8192` floats, in grid-index order
/// (96 candidates).
pub fn opencl_reduce(size: usize) -> Vec<Candidate> {
    let n = size * 8192;
    let mut out = Vec::new();
    for vec in [1usize, 4] {
        for items in [4usize, 16, 64, 256] {
            for wg in [16usize, 64, 256] {
                for contig in [false, true] {
                    for tree in [true, false] {
                        let global = (n / (vec * items)).max(1);
                        let groups = global.div_ceil(wg);
                        let access = if contig { "contig" } else { "strided" };
                        let combine = if tree { "tree" } else { "serial" };
                        let mut c = Candidate {
                            name: format!("reduce_v{vec}_i{items}_wg{wg}_{access}_{combine}"),
                            source: Some(REDUCE_SOURCE.into()),
                            kernel: Some("reduce".into()),
                            build_options: format!(
                                "-DN={n} -DVEC={vec} -DITEMS={items} -DWG={wg} -DCONTIG={} -DTREE={}",
                                u8::from(contig),
                                u8::from(tree)
                            ),
                            global: vec![global],
                            local: Some(vec![wg]),
                            args: vec![
                                Arg::Buffer {
                                    bytes: (n * 4) as u64,
                                    init: BufferInit::Random,
                                },
                                Arg::Buffer {
                                    bytes: (groups * 4) as u64,
                                    init: BufferInit::Zero,
                                },
                                Arg::Local {
                                    bytes: (wg * 4) as u64,
                                },
                            ],
                            ..Candidate::default()
                        };
                        c.params.insert("vec".into(), json!(vec));
                        c.params.insert("items".into(), json!(items));
                        c.params.insert("wg".into(), json!(wg));
                        c.params.insert("access".into(), json!(access));
                        c.params.insert("combine".into(), json!(combine));
                        out.push(c);
                    }
                }
            }
        }
    }
    out
}

/// Names of the built-in workloads.
pub const NAMES: &[&str] = &["opencl-matmul", "opencl-reduce"];

/// A built-in workload by name, with its size parameter (`N` of the `N x N` matmul; the
/// reduction sums `size * 8192` floats).
pub fn by_name(name: &str, n: usize) -> Option<Vec<Candidate>> {
    match name {
        "opencl-matmul" => Some(opencl_matmul(n)),
        "opencl-reduce" => Some(opencl_reduce(n)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn matmul_family_size_and_order() {
        let c = super::opencl_matmul(128);
        assert_eq!(c.len(), 224);
        assert_eq!(c[0].name, "naive_wg1x1_u1");
        assert_eq!(c[223].name, "tiled_ts32_wpt8_u16");
        let again = super::opencl_matmul(128);
        assert_eq!(c, again);
    }

    #[test]
    fn reduce_family_size_order_and_shapes() {
        let c = super::opencl_reduce(128);
        assert_eq!(c.len(), 96);
        assert_eq!(c[0].name, "reduce_v1_i4_wg16_strided_tree");
        assert_eq!(c[95].name, "reduce_v4_i256_wg256_contig_serial");
        let n = 128 * 8192;
        for cand in &c {
            let (vec, items) = (
                cand.params["vec"].as_u64().unwrap(),
                cand.params["items"].as_u64().unwrap(),
            );
            // Every element is read exactly once: global size x elements per work-item = n.
            assert_eq!(
                cand.global[0] as u64 * vec * items,
                n as u64,
                "{}",
                cand.name
            );
            assert_eq!(
                cand.global[0] % cand.local.as_ref().unwrap()[0],
                0,
                "{}",
                cand.name
            );
        }
        assert_eq!(super::by_name("opencl-reduce", 128).unwrap(), c);
    }
}
