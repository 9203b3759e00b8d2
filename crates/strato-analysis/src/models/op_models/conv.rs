//! The convolution models of [`super`]: forward (FLOPs = 2·N·K·∏out·(C/g)·∏kernel) and
//! backward (one forward's FLOPs per gradient its `output_mask` asks for). Their formulas and
//! sources are the parent module's header and `docs/analyses/ops.md`.

use super::*;

/// Output spatial sizes of a forward convolution, or why they cannot be computed.
pub(super) fn conv_forward(base: &str, x: &OpInputs) -> Result<OpCost, Unmodelled> {
    let (inp, w) = (x.dim(0), x.dim(1));
    if inp.len() < 3 || w.len() != inp.len() || w[0] <= 0 || w[1] <= 0 || inp[1] % w[1] != 0 {
        return Err(Unmodelled::Shapes(
            "convolution needs [N,C,...] and [K,C/g,...]",
        ));
    }
    let spatial = inp.len() - 2;
    // Indices of stride, padding, dilation and (where it exists) `transposed`.
    // conv{1,2,3}d(input, weight, bias, stride, padding, dilation, groups);
    // convolution/_convolution(input, weight, bias, stride, padding, dilation, transposed, ...);
    // cudnn_convolution(input, weight, padding, stride, dilation, groups, ...);
    // miopen_convolution(input, weight, bias, padding, stride, dilation, groups, ...).
    let (si, pi, di, transposed) = match base {
        "cudnn_convolution" => (3, 2, 4, None),
        "miopen_convolution" => (4, 3, 5, None),
        "convolution" | "_convolution" => (3, 4, 5, Some(6)),
        _ => (3, 4, 5, None),
    };
    if let Some(t) = transposed {
        match x.flag(t) {
            Some(false) => {}
            Some(true) => return Err(Unmodelled::Reason("transposed convolution has no model")),
            None => {
                return Err(Unmodelled::Reason(
                    "convolution's `transposed` is not recorded",
                ))
            }
        }
    }
    let param = |i: usize| -> Result<Vec<i64>, Unmodelled> {
        let v = x
            .concrete
            .get(i)
            .and_then(|c| ints(c))
            .ok_or(Unmodelled::Reason(
                "convolution stride/padding/dilation are not recorded",
            ))?;
        match v.len() {
            1 => Ok(vec![v[0]; spatial]),
            l if l == spatial => Ok(v),
            _ => Err(Unmodelled::Shapes("stride/padding/dilation rank differs")),
        }
    };
    let (stride, pad, dil) = (param(si)?, param(pi)?, param(di)?);
    let mut out = Vec::with_capacity(spatial);
    for i in 0..spatial {
        if stride[i] <= 0 {
            return Err(Unmodelled::Shapes("non-positive stride"));
        }
        let o = (inp[2 + i] + 2 * pad[i] - dil[i] * (w[2 + i] - 1) - 1) / stride[i] + 1;
        if o <= 0 {
            return Err(Unmodelled::Shapes("empty convolution output"));
        }
        out.push(o);
    }
    let outputs = inp[0] as f64 * w[0] as f64 * numel(&out);
    let flops = 2.0 * outputs * numel(&w[1..]);
    let typed = x.float(0);
    Ok(OpCost {
        model: "conv 2·N·K·out·(C/g)·kernel",
        flops: Some(flops),
        bytes: typed.map(|(_, s)| s as f64 * (numel(inp) + numel(w) + outputs)),
        precision: typed.map(|p| p.0),
        unsized_elements: None,
    })
}

/// `convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
/// transposed, output_padding, groups, output_mask)`: the output's spatial size is
/// grad_output's, so no stride arithmetic is needed.
pub(super) fn conv_backward(x: &OpInputs) -> Result<OpCost, Unmodelled> {
    let (go, inp, w) = (x.dim(0), x.dim(1), x.dim(2));
    if inp.len() < 3 || go.len() != inp.len() || w.len() != inp.len() || go[1] != w[0] {
        return Err(Unmodelled::Shapes(
            "convolution_backward needs grad_output, input, weight of one rank",
        ));
    }
    if x.flag(7) != Some(false) {
        return Err(Unmodelled::Reason(
            "transposed (or unrecorded `transposed`) convolution backward has no model",
        ));
    }
    let mask: Vec<bool> = x
        .concrete
        .get(10)
        .map(|m| {
            m.trim_matches(|c| c == '[' || c == ']')
                .split(',')
                .map(|t| t.trim() == "True" || t.trim() == "true")
                .collect()
        })
        .unwrap_or_default();
    if mask.len() != 3 {
        return Err(Unmodelled::Reason(
            "convolution_backward's output_mask is not recorded",
        ));
    }
    let fwd = 2.0 * numel(go) * numel(&w[1..]);
    let grads = f64::from(u8::from(mask[0]) + u8::from(mask[1]));
    let mut elements = numel(go) + numel(inp) + numel(w);
    if mask[0] {
        elements += numel(inp);
    }
    if mask[1] {
        elements += numel(w);
    }
    let typed = x.float(0);
    Ok(OpCost {
        model: "conv bwd (per grad) 2·N·K·out·(C/g)·kernel",
        flops: Some(fwd * grads),
        bytes: typed.map(|(_, s)| s as f64 * elements),
        precision: typed.map(|p| p.0),
        unsized_elements: None,
    })
}
