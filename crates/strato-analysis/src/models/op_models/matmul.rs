//! The compute-bound models of [`super`]: the GEMM family (FLOPs = 2·M·N·K per product) and
//! attention (Q·Kᵀ and P·V, halved when causal; backward 2.5 × forward). Their formulas and
//! sources are the parent module's header and `docs/analyses/ops.md`.

use super::*;

pub(super) fn gemm(base: &str, x: &OpInputs) -> Result<OpCost, Unmodelled> {
    let d = |i| x.dim(i);
    let size = |i| x.elem_size(i).map(|s| s as f64);
    // (model, flops, bytes, precision input)
    let (model, flops, bytes, typed): (&'static str, f64, Option<f64>, usize) = match base {
        "mm" => {
            let (a, b) = (d(0), d(1));
            if a.len() != 2 || b.len() != 2 || a[1] != b[0] {
                return Err(Unmodelled::Shapes("mm needs [M,K] x [K,N]"));
            }
            let (m, k, n) = (a[0] as f64, a[1] as f64, b[1] as f64);
            let bytes = size(0).map(|s| s * (m * k + k * n + m * n));
            ("gemm 2MNK", 2.0 * m * k * n, bytes, 0)
        }
        "addmm" => {
            let (c, a, b) = (d(0), d(1), d(2));
            if a.len() != 2 || b.len() != 2 || a[1] != b[0] || c.len() > 2 {
                return Err(Unmodelled::Shapes("addmm needs bias, [M,K], [K,N]"));
            }
            let (m, k, n) = (a[0] as f64, a[1] as f64, b[1] as f64);
            let bytes = size(1).map(|s| s * (numel(c) + m * k + k * n + m * n));
            ("gemm 2MNK", 2.0 * m * k * n, bytes, 1)
        }
        "bmm" | "baddbmm" => {
            let off = usize::from(base == "baddbmm");
            let (a, b) = (d(off), d(off + 1));
            if a.len() != 3 || b.len() != 3 || a[0] != b[0] || a[2] != b[1] {
                return Err(Unmodelled::Shapes("bmm needs [B,M,K] x [B,K,N]"));
            }
            let (bt, m, k, n) = (a[0] as f64, a[1] as f64, a[2] as f64, b[2] as f64);
            let bias = if off == 1 { numel(d(0)) } else { 0.0 };
            let bytes = size(off).map(|s| s * (bias + bt * (m * k + k * n + m * n)));
            ("batched gemm 2BMNK", 2.0 * bt * m * k * n, bytes, off)
        }
        "linear" => {
            let (a, w) = (d(0), d(1));
            if x.dims.len() > 3 || a.is_empty() || w.len() != 2 || a[a.len() - 1] != w[1] {
                return Err(Unmodelled::Shapes("linear needs [...,K], [N,K], bias"));
            }
            let rows = numel(&a[..a.len() - 1]);
            let (k, n) = (w[1] as f64, w[0] as f64);
            let bytes = size(0).map(|s| s * (numel(a) + numel(w) + numel(d(2)) + rows * n));
            ("gemm 2MNK", 2.0 * rows * k * n, bytes, 0)
        }
        "matmul" => {
            let (a, b) = (d(0), d(1));
            if x.dims.len() != 2 || a.len() < 2 || b.len() < 2 {
                return Err(Unmodelled::Shapes(
                    "matmul of vectors or of more than two inputs",
                ));
            }
            let (m, k) = (a[a.len() - 2], a[a.len() - 1]);
            let (k2, n) = (b[b.len() - 2], b[b.len() - 1]);
            if k != k2 {
                return Err(Unmodelled::Shapes("matmul inner dimensions differ"));
            }
            // Batch dims broadcast (numpy rules): the batch count is the broadcast product.
            let (ba, bb) = (&a[..a.len() - 2], &b[..b.len() - 2]);
            let len = ba.len().max(bb.len());
            let mut batch = 1.0;
            for i in 0..len {
                let pick = |v: &[i64]| -> i64 {
                    let pad = len - v.len();
                    if i < pad {
                        1
                    } else {
                        v[i - pad]
                    }
                };
                let (p, q) = (pick(ba), pick(bb));
                if p != q && p != 1 && q != 1 {
                    return Err(Unmodelled::Shapes(
                        "matmul batch dimensions do not broadcast",
                    ));
                }
                batch *= p.max(q) as f64;
            }
            let (m, k, n) = (m as f64, k as f64, n as f64);
            let bytes = size(0).map(|s| s * (numel(a) + numel(b) + batch * m * n));
            ("batched gemm 2BMNK", 2.0 * batch * m * k * n, bytes, 0)
        }
        "_scaled_mm" => {
            let (a, b) = (d(0), d(1));
            if a.len() != 2 || b.len() != 2 || a[1] != b[0] {
                return Err(Unmodelled::Shapes("_scaled_mm needs [M,K] x [K,N]"));
            }
            let (m, k, n) = (a[0] as f64, a[1] as f64, b[1] as f64);
            // _scaled_mm(self, mat2, scale_a, scale_b, bias, scale_result, out_dtype, ...).
            let out = x
                .concrete
                .get(6)
                .and_then(|c| scalar_type_size(c))
                .map(|s| s as f64);
            let bytes = match (size(0), size(1), out) {
                (Some(sa), Some(sb), Some(so)) => Some(sa * m * k + sb * k * n + so * m * n),
                _ => None,
            };
            ("scaled gemm 2MNK", 2.0 * m * k * n, bytes, 0)
        }
        "_grouped_mm" => {
            // _grouped_mm(mat_a, mat_b, offs, bias, out_dtype): 3D x 3D is a batched product;
            // 2D [sum M_g, K] x 3D [G, K, N] with offsets sums to 2·(sum M_g)·K·N exactly.
            let (a, b) = (d(0), d(1));
            let (flops, rows_out, groups_n) = match (a.len(), b.len()) {
                (3, 3) if a[0] == b[0] && a[2] == b[1] => (
                    2.0 * numel(a) * b[2] as f64,
                    a[0] as f64 * a[1] as f64,
                    b[2] as f64,
                ),
                (2, 3) if a[1] == b[1] => (2.0 * numel(a) * b[2] as f64, a[0] as f64, b[2] as f64),
                _ => {
                    return Err(Unmodelled::Shapes(
                        "grouped mm shapes other than 3Dx3D or 2Dx3D with offsets",
                    ))
                }
            };
            let bytes = size(0).map(|s| s * (numel(a) + numel(b) + rows_out * groups_n));
            ("grouped gemm 2MNK", flops, bytes, 0)
        }
        _ => return Err(Unmodelled::NoModel),
    };
    Ok(OpCost {
        model,
        flops: Some(flops),
        bytes,
        precision: x.float(typed).map(|p| p.0),
        unsized_elements: None,
    })
}

/// Layout of an attention op's Q/K/V and where its causal flag is.
struct AttentionSignature {
    /// Index of Q (K and V follow).
    q: usize,
    /// `[B, H, L, E]` (SDPA) rather than `[B, L, H, E]` (flash/efficient kernels' own ops).
    heads_first: bool,
    /// Index of `is_causal` in `Concrete Inputs`; `None`: never causal (no such argument).
    causal: Option<usize>,
    backward: bool,
}

fn attention_signature(name: &str, base: &str) -> Option<AttentionSignature> {
    let s = |q, heads_first, causal: Option<usize>, backward| AttentionSignature {
        q,
        heads_first,
        causal,
        backward,
    };
    Some(match base {
        // (query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
        "scaled_dot_product_attention" => s(0, true, Some(5), false),
        // (query, key, value, dropout_p, is_causal, return_debug_mask, scale)
        "_scaled_dot_product_flash_attention" => s(0, true, Some(4), false),
        // (query, key, value, attn_bias, compute_log_sumexp, dropout_p, is_causal, scale)
        "_scaled_dot_product_efficient_attention" => s(0, true, Some(6), false),
        // (query, key, value, attn_bias, compute_log_sumexp, dropout_p, is_causal, ...)
        "_scaled_dot_product_cudnn_attention" => s(0, true, Some(6), false),
        // (query, key, value, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, ...)
        "_flash_attention_forward" => s(0, false, Some(8), false),
        // (query, key, value, bias, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
        //  dropout_p, custom_mask_type, ...): causal is a mask type, not a flag.
        "_efficient_attention_forward" => return None,
        // (grad_out, query, key, value, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k,
        //  dropout_p, is_causal, ...)
        "_scaled_dot_product_flash_attention_backward" => s(1, true, Some(11), true),
        "_flash_attention_backward" => s(1, false, Some(11), true),
        // (grad_out, query, key, value, attn_bias, out, logsumexp, philox_seed, philox_offset,
        //  dropout_p, grad_input_mask, is_causal, scale)
        "_scaled_dot_product_efficient_attention_backward" => s(1, true, Some(11), true),
        // (grad_out, query, key, value, out, logsumexp, philox_seed, philox_offset, attn_bias,
        //  cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, scale)
        "_scaled_dot_product_cudnn_attention_backward" => s(1, true, Some(14), true),
        _ if name.starts_with("flash_attn::") && name.contains("varlen") => {
            // flash_attn varlen forward: (q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
            // max_seqlen_k, dropout_p, softmax_scale, causal, ...), q [total, H, E].
            return (!name.contains("backward")).then(|| s(0, false, Some(9), false));
        }
        _ => return None,
    })
}

pub(super) fn attention(name: &str, base: &str, x: &OpInputs) -> Result<OpCost, Unmodelled> {
    let sig = attention_signature(name, base).ok_or(Unmodelled::Reason(
        "the causal mask of this attention op is not a recorded flag",
    ))?;
    let (q, k, v) = (x.dim(sig.q), x.dim(sig.q + 1), x.dim(sig.q + 2));
    let varlen = name.starts_with("flash_attn::");
    // (B, H, L, S, E, Ev)
    let (b, h, l, s, e, ev) = if varlen {
        if q.len() != 3 || k.len() != 3 || v.len() != 3 {
            return Err(Unmodelled::Shapes("varlen attention needs [total, H, E]"));
        }
        // cu_seqlens_q has batch + 1 entries; only one sequence has its lengths in the dims.
        if x.dim(3) != [2] {
            return Err(Unmodelled::Reason(
                "varlen attention over several sequences: their lengths are in cu_seqlens \
                 (tensor values), not recorded",
            ));
        }
        (1, q[1], q[0], k[0], q[2], v[2])
    } else {
        if q.len() != 4 || k.len() != 4 || v.len() != 4 {
            return Err(Unmodelled::Shapes("attention needs 4-D query, key, value"));
        }
        if sig.heads_first {
            (q[0], q[1], q[2], k[2], q[3], v[3])
        } else {
            (q[0], q[2], q[1], k[1], q[3], v[3])
        }
    };
    if k.first() != v.first() || (!varlen && k[0] != q[0]) {
        return Err(Unmodelled::Shapes(
            "query, key and value batch sizes differ",
        ));
    }
    let causal = match sig.causal {
        Some(i) => x.flag(i).ok_or(Unmodelled::Reason(
            "the attention op's is_causal argument is not recorded",
        ))?,
        None => false,
    };
    let (bf, hf, lf, sf) = (b as f64, h as f64, l as f64, s as f64);
    let mut flops = 2.0 * bf * hf * lf * sf * (e as f64 + ev as f64);
    if causal {
        flops /= 2.0;
    }
    let out = bf * hf * lf * ev as f64;
    let qkv = numel(q) + numel(k) + numel(v);
    let (flops, elements, model) = if sig.backward {
        // Reads dO, Q, K, V, O; writes dQ, dK, dV.
        (2.5 * flops, 2.0 * qkv + 2.0 * out, "attention bwd 2.5x fwd")
    } else {
        (flops, qkv + out, "attention 2BHLS(E+Ev)")
    };
    let typed = x.float(sig.q);
    Ok(OpCost {
        model: if causal && !sig.backward {
            "attention causal BHLS(E+Ev)"
        } else {
            model
        },
        flops: Some(flops),
        bytes: typed.map(|(_, sz)| elements * sz as f64),
        precision: typed.map(|p| p.0),
        unsized_elements: None,
    })
}
