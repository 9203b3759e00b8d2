//! Per-op performance models: FLOPs and compulsory bytes of one framework op from its name,
//! `Input Dims`, `Input type` and `Concrete Inputs` (the shapes PyTorch records with
//! `record_shapes=True`). Each model names its formula ([`OpCost::model`]) and the source of
//! that formula is listed in `docs/analyses/ops.md`:
//!
//! - **GEMM family** (`mm`, `addmm`, `bmm`, `baddbmm`, `matmul`, `linear`, `_scaled_mm`,
//!   `_grouped_mm`): FLOPs = 2·M·N·K per product (one multiply-add = 2 FLOPs; NVIDIA "Matrix
//!   Multiplication Background User's Guide"), bytes = A + B (+ bias) read once, C written once.
//!   `_scaled_mm` takes its precision from its FP8 operands; its output element size from
//!   `out_dtype` when recorded, else the output bytes stay out (bytes unknown).
//! - **Attention** (`scaled_dot_product_attention`, `_scaled_dot_product_{flash,efficient,
//!   cudnn}_attention`, `_flash_attention_forward`, `_efficient_attention_forward` and their
//!   backward ops, `flash_attn` varlen with one sequence): forward FLOPs = 2·B·H·L·S·(E + Ev)
//!   (Q·Kᵀ and P·V), halved when causal; backward = 2.5 × forward (FlashAttention-2, Dao 2023,
//!   §4.1: five matmuls against two). Bytes = Q, K, V read and O written once (backward: those
//!   plus dO read and dQ, dK, dV written).
//! - **Convolution** forward (`conv{1,2,3}d`, `convolution`, `_convolution`, `cudnn_convolution`,
//!   `miopen_convolution`): FLOPs = 2·N·K·∏out·(C/g)·∏kernel (NVIDIA "Convolutional Layers User's
//!   Guide"); backward (`convolution_backward`): one forward's FLOPs per gradient its
//!   `output_mask` asks for (grad input, grad weight).
//! - **Memory-bound ops by bytes** (normalisations, softmax, elementwise, reductions, embedding,
//!   Triton kernels via their launching op): FLOPs are not modelled (`None`); bytes = every
//!   tensor read once plus the output written once. Their roofline is the memory roof.
//! - **Dtype conversions and copies** (`_to_copy`, `to`, `copy_`): the source read at *its*
//!   element size plus the destination written at *its* element size. The destination dtype is
//!   `copy_`'s `self` type; for `_to_copy` / `to` the `dtype` argument, a c10 `ScalarType` code
//!   in `Concrete Inputs` (an unset dtype, recorded as `""`, keeps the source's; `to.other`
//!   takes the other tensor's). A dtype recorded as `Scalar` without its value is refused.
//! - **Concatenation** (`cat`, `stack`): a copy: every tensor of the `TensorList` input read
//!   once and written once into the output. Kineto writes a list's shapes as a nested list in
//!   `Input Dims` and its type as `TensorList`, without the tensors' dtype: the elements are
//!   known ([`OpCost::unsized_elements`]) and the bytes wait for an element size from the
//!   kernel (see [`kernel_element_size`]).
//!
//! A model refuses (returns [`Unmodelled`] with the reason) rather than guess: missing shapes,
//! shapes that do not fit the op's signature, a causal flag or stride that is not recorded, or an
//! op no model covers. Pure function of its inputs; no window or conservation rule here (the op
//! table in [`crate::cross_stack::ops`] states those).

use serde_json::Value;

use crate::models::devices::Precision;

mod conv;
mod matmul;

use conv::{conv_backward, conv_forward};
use matmul::{attention, gemm};

/// The modelled cost of one op call.
#[derive(Debug, Clone, PartialEq)]
pub struct OpCost {
    /// The formula's name (documented in `docs/analyses/ops.md`).
    pub model: &'static str,
    /// Floating-point operations; `None` for ops modelled by bytes only.
    pub flops: Option<f64>,
    /// Compulsory bytes moved; `None` when an element size is not known.
    pub bytes: Option<f64>,
    /// The precision whose peak applies.
    pub precision: Option<Precision>,
    /// Elements moved (read + written) whose element size the args do not record (the tensors
    /// of a `TensorList`), when `bytes` is `None` for that reason only: bytes = this x the
    /// element size, once something else (the kernel's name, [`kernel_element_size`]) says it.
    pub unsized_elements: Option<f64>,
}

/// Why an op has no model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unmodelled {
    #[error("no model for this op")]
    NoModel,
    #[error("the trace records no input shapes for this op (record_shapes off)")]
    NoShapes,
    #[error("input shapes do not fit the op's signature: {0}")]
    Shapes(&'static str),
    #[error("{0}")]
    Reason(&'static str),
}

/// Recorded inputs of one op call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct OpInputs {
    /// Shape of each input; `[]` for scalars, `None` and lists.
    pub dims: Vec<Vec<i64>>,
    pub types: Vec<String>,
    pub concrete: Vec<String>,
    /// Shapes of the tensors of each list input (`TensorList`, `GenericList`), as Kineto writes
    /// them: a nested list in `Input Dims` (`[[[4,1,768],[4,196,768]], []]`). Empty for an input
    /// that is not a list, and for a list whose shapes are not recorded (older PyTorch writes
    /// `[]`); empty as a whole when no input is a list.
    pub lists: Vec<Vec<Vec<i64>>>,
}

impl OpInputs {
    /// Reads `Input Dims`, `Input type` and `Concrete Inputs` from an op's args. `None` when the
    /// args carry no `Input Dims`.
    pub fn from_args(args: &Value) -> Option<OpInputs> {
        let recorded = args
            .get("Input Dims")
            .or_else(|| args.get("Input dims"))?
            .as_array()?;
        let shape = |v: &Value| -> Vec<i64> {
            v.as_array()
                .map(|v| v.iter().filter_map(Value::as_i64).collect())
                .unwrap_or_default()
        };
        let dims = recorded.iter().map(shape).collect();
        // A list input: an array whose items are arrays (each tensor's shape).
        let mut lists: Vec<Vec<Vec<i64>>> = recorded
            .iter()
            .map(|x| match x.as_array() {
                Some(items) if !items.is_empty() && items.iter().all(Value::is_array) => {
                    items.iter().map(shape).collect()
                }
                _ => Vec::new(),
            })
            .collect();
        if lists.iter().all(Vec::is_empty) {
            lists.clear();
        }
        let strings = |key: &str| -> Vec<String> {
            args.get(key)
                .and_then(Value::as_array)
                .map(|v| {
                    v.iter()
                        .map(|x| x.as_str().unwrap_or("").to_owned())
                        .collect()
                })
                .unwrap_or_default()
        };
        Some(OpInputs {
            dims,
            types: strings("Input type"),
            concrete: strings("Concrete Inputs"),
            lists,
        })
    }

    fn dim(&self, i: usize) -> &[i64] {
        self.dims.get(i).map(Vec::as_slice).unwrap_or(&[])
    }

    fn float(&self, i: usize) -> Option<(Precision, u64)> {
        self.types
            .get(i)
            .and_then(|t| Precision::from_torch_type(t))
    }

    /// Element size of input `i` (floating or integer types).
    fn elem_size(&self, i: usize) -> Option<u64> {
        let t = self.types.get(i)?;
        Precision::from_torch_type(t)
            .map(|p| p.1)
            .or_else(|| Precision::other_type_size(t))
    }

    /// Bytes of tensor input `i`, `None` when its element size is unknown.
    fn tensor_bytes(&self, i: usize) -> Option<f64> {
        Some(numel(self.dim(i)) * self.elem_size(i)? as f64)
    }

    /// Indices of the inputs that are tensors (non-empty dims; a 0-d tensor records `[]` and
    /// is skipped: it is a scalar's worth of traffic).
    fn tensors(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.dims.len()).filter(|&i| !self.dims[i].is_empty())
    }

    fn flag(&self, i: usize) -> Option<bool> {
        match self.concrete.get(i).map(|s| s.trim()) {
            Some("True") | Some("true") => Some(true),
            Some("False") | Some("false") => Some(false),
            _ => None,
        }
    }

    fn first_float(&self) -> Option<(Precision, u64)> {
        (0..self.types.len()).find_map(|i| self.float(i))
    }
}

fn numel(v: &[i64]) -> f64 {
    v.iter().map(|&x| x as f64).product()
}

/// `"[1, 2]"` / `"2"` into integers.
fn ints(text: &str) -> Option<Vec<i64>> {
    let t = text.trim().trim_start_matches('[').trim_end_matches(']');
    if t.trim().is_empty() {
        return None;
    }
    t.split(',').map(|x| x.trim().parse().ok()).collect()
}

/// Element size of a c10 `ScalarType` code as `Concrete Inputs` records a `dtype` / `out_dtype`
/// argument (the enum's order in c10/core/ScalarType.h: 0 Byte, 1 Char, 2 Short, 3 Int, 4 Long,
/// 5 Half, 6 Float, 7 Double, 8-10 complex, 11 Bool, 12-14 quantized, 15 BFloat16, 16-22
/// packed/bit types, 23-26 Float8, 27-29 UInt16/32/64). `None` for codes without a plain element
/// size (sub-byte and later types).
fn scalar_type_size(code: &str) -> Option<u64> {
    match code.trim().parse::<u32>().ok()? {
        0 | 1 | 11 | 12 | 13 | 21 | 23..=26 => Some(1),
        2 | 5 | 15 | 22 | 27 => Some(2),
        3 | 6 | 8 | 14 | 28 => Some(4),
        4 | 7 | 9 | 29 => Some(8),
        10 => Some(16),
        _ => None,
    }
}

/// Element size a device kernel's name states, for ops whose args do not record it
/// ([`OpCost::unsized_elements`]): PyTorch's CUDA/HIP concatenation kernel is
/// `CatArrayBatchedCopy<OpaqueType<N>, ...>` with N = the element size in bytes
/// (aten/src/ATen/native/cuda/Shape.cu), older builds `CatArrayBatchedCopy<float, ...>`
/// (the element type). `None` when the name says neither.
pub fn kernel_element_size(kernel: &str) -> Option<u64> {
    if let Some(at) = kernel.find("OpaqueType<") {
        let digits: String = kernel[at + "OpaqueType<".len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        return digits.parse().ok().filter(|n| (1..=16).contains(n));
    }
    let at = kernel.find("CatArrayBatchedCopy<")?;
    let first = kernel[at + "CatArrayBatchedCopy<".len()..]
        .split([',', '>'])
        .next()?;
    crate::distributed::collectives::dtype_size(first)
}

/// Whether a model covers ops named `name` ([`model`] answers [`Unmodelled::NoModel`] for
/// every other name, whatever the inputs): a caller may skip reading the inputs of the rest.
pub fn has_model(name: &str) -> bool {
    Family::of(name, name.strip_prefix("aten::").unwrap_or(name)) != Family::None
}

/// The model of one op call: its cost, or why there is none.
pub fn model(name: &str, inputs: Option<&OpInputs>) -> Result<OpCost, Unmodelled> {
    let base = name.strip_prefix("aten::").unwrap_or(name);
    if name == "vllm::unified_attention_with_output" || name == "vllm::unified_attention" {
        return Err(Unmodelled::Reason(
            "KV-cache attention: the context length of each sequence lives in vLLM's attention \
             metadata, not in the op's inputs (Input Dims give only the new tokens)",
        ));
    }
    let family = Family::of(name, base);
    if family == Family::None {
        return Err(Unmodelled::NoModel);
    }
    let x = inputs.ok_or(Unmodelled::NoShapes)?;
    if x.dims.is_empty() {
        return Err(Unmodelled::NoShapes);
    }
    match family {
        Family::Gemm => gemm(base, x),
        Family::Attention => attention(name, base, x),
        Family::Conv => conv_forward(base, x),
        Family::ConvBackward => conv_backward(x),
        Family::Norm | Family::Elementwise | Family::Triton | Family::Softmax => {
            by_bytes(family, x)
        }
        Family::Reduction => reduction(x),
        Family::Embedding => embedding(x),
        Family::Convert => convert(base, x),
        Family::Concat => concat(base, x),
        Family::None => Err(Unmodelled::NoModel),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Gemm,
    Attention,
    Conv,
    ConvBackward,
    Norm,
    Softmax,
    Elementwise,
    Reduction,
    Embedding,
    Triton,
    Convert,
    Concat,
    None,
}

const ELEMENTWISE: &[&str] = &[
    "add",
    "add_",
    "sub",
    "sub_",
    "mul",
    "mul_",
    "div",
    "div_",
    "neg",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "pow",
    "abs",
    "sin",
    "cos",
    "tanh",
    "tanh_",
    "sigmoid",
    "sigmoid_",
    "relu",
    "relu_",
    "gelu",
    "gelu_",
    "silu",
    "silu_",
    "hardtanh",
    "hardtanh_",
    "leaky_relu",
    "threshold_backward",
    "gelu_backward",
    "silu_backward",
    "sigmoid_backward",
    "tanh_backward",
    "where",
    "clamp",
    "clamp_",
    "clone",
    "fill_",
    "zero_",
    "masked_fill",
    "masked_fill_",
    "addcmul_",
    "addcdiv_",
    "lerp_",
    "native_dropout",
    "native_dropout_backward",
    "maximum",
    "minimum",
    "eq",
    "ne",
    "gt",
    "lt",
    "ge",
    "le",
    "logical_and",
    "logical_not",
    "bitwise_and",
    "_foreach_copy_",
    "index_select",
];
const REDUCTIONS: &[&str] = &[
    "sum",
    "mean",
    "amax",
    "amin",
    "max",
    "min",
    "argmax",
    "argmin",
    "prod",
    "norm",
    "linalg_vector_norm",
    "var",
    "std",
    "var_mean",
    "cumsum",
    "all",
    "any",
];

impl Family {
    fn of(name: &str, base: &str) -> Family {
        if !name.starts_with("aten::") {
            if name.starts_with("triton_") || name.starts_with("triton::") {
                return Family::Triton;
            }
            if name.starts_with("flash_attn::") && name.contains("varlen") {
                return Family::Attention;
            }
            return match name {
                "_C::rms_norm" | "_C::fused_add_rms_norm" => Family::Norm,
                _ => Family::None,
            };
        }
        match base {
            "mm" | "addmm" | "bmm" | "baddbmm" | "matmul" | "linear" | "_scaled_mm"
            | "_grouped_mm" => Family::Gemm,
            "scaled_dot_product_attention"
            | "_scaled_dot_product_flash_attention"
            | "_scaled_dot_product_efficient_attention"
            | "_scaled_dot_product_cudnn_attention"
            | "_flash_attention_forward"
            | "_efficient_attention_forward"
            | "_scaled_dot_product_flash_attention_backward"
            | "_scaled_dot_product_efficient_attention_backward"
            | "_scaled_dot_product_cudnn_attention_backward"
            | "_flash_attention_backward"
            | "_efficient_attention_backward" => Family::Attention,
            "conv1d" | "conv2d" | "conv3d" | "convolution" | "_convolution"
            | "cudnn_convolution" | "miopen_convolution" => Family::Conv,
            "convolution_backward" => Family::ConvBackward,
            "layer_norm"
            | "native_layer_norm"
            | "native_layer_norm_backward"
            | "rms_norm"
            | "_fused_rms_norm"
            | "batch_norm"
            | "native_batch_norm"
            | "_batch_norm_impl_index"
            | "cudnn_batch_norm"
            | "miopen_batch_norm"
            | "native_batch_norm_backward"
            | "group_norm"
            | "native_group_norm"
            | "native_group_norm_backward" => Family::Norm,
            "softmax"
            | "_softmax"
            | "log_softmax"
            | "_log_softmax"
            | "_softmax_backward_data"
            | "_log_softmax_backward_data" => Family::Softmax,
            "embedding" => Family::Embedding,
            "_to_copy" | "to" | "copy_" => Family::Convert,
            "cat" | "_cat" | "concat" | "concatenate" | "stack" => Family::Concat,
            b if ELEMENTWISE.contains(&b) => Family::Elementwise,
            b if REDUCTIONS.contains(&b) => Family::Reduction,
            _ => Family::None,
        }
    }
}

/// Shape two or more elementwise operands broadcast to (numpy rules).
fn broadcast(shapes: &[&[i64]]) -> Option<Vec<i64>> {
    let len = shapes.iter().map(|s| s.len()).max()?;
    let mut out = vec![1i64; len];
    for s in shapes {
        let pad = len - s.len();
        for (i, &d) in s.iter().enumerate() {
            let o = &mut out[pad + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return None;
            }
        }
    }
    Some(out)
}

/// Memory-bound ops: every tensor input read once, one output written once. The output is the
/// broadcast of the inputs (elementwise), the first input's shape (normalisations, softmax,
/// Triton: the launching op's tensors are its kernel's buffers, each touched once, so no extra
/// output is added).
fn by_bytes(family: Family, x: &OpInputs) -> Result<OpCost, Unmodelled> {
    let tensors: Vec<usize> = x.tensors().collect();
    if tensors.is_empty() {
        return Err(Unmodelled::Shapes("no tensor inputs"));
    }
    let mut read = 0.0;
    for &i in &tensors {
        read += x.tensor_bytes(i).ok_or(Unmodelled::Reason(
            "an input's element type is not recorded",
        ))?;
    }
    let out_size = x
        .first_float()
        .map(|p| p.1)
        .or_else(|| x.elem_size(tensors[0]))
        .unwrap_or(0) as f64;
    let (model, written) = match family {
        Family::Triton => ("triton kernel args read/written once", 0.0),
        Family::Elementwise => {
            let shapes: Vec<&[i64]> = tensors.iter().map(|&i| x.dim(i)).collect();
            let out = broadcast(&shapes)
                .ok_or(Unmodelled::Shapes("elementwise inputs do not broadcast"))?;
            ("elementwise bytes", numel(&out) * out_size)
        }
        _ => (
            if family == Family::Softmax {
                "softmax bytes"
            } else {
                "normalization bytes"
            },
            numel(x.dim(tensors[0])) * out_size,
        ),
    };
    Ok(OpCost {
        model,
        flops: None,
        bytes: Some(read + written),
        precision: x.first_float().map(|p| p.0),
        unsized_elements: None,
    })
}

/// Reductions: the input read once (the output is at most the input and usually far smaller:
/// it is not counted, so the bytes are a lower bound the docs state).
fn reduction(x: &OpInputs) -> Result<OpCost, Unmodelled> {
    let first = x
        .tensors()
        .next()
        .ok_or(Unmodelled::Shapes("no tensor input"))?;
    let bytes = x.tensor_bytes(first).ok_or(Unmodelled::Reason(
        "the input's element type is not recorded",
    ))?;
    Ok(OpCost {
        model: "reduction input bytes",
        flops: None,
        bytes: Some(bytes),
        precision: x.float(first).map(|p| p.0),
        unsized_elements: None,
    })
}

/// `embedding(weight [V, D], indices)`: the indices and one row per index read, the output
/// (indices × D) written.
fn embedding(x: &OpInputs) -> Result<OpCost, Unmodelled> {
    let (w, idx) = (x.dim(0), x.dim(1));
    if w.len() != 2 || idx.is_empty() {
        return Err(Unmodelled::Shapes(
            "embedding needs [V,D] weight and indices",
        ));
    }
    let rows = numel(idx);
    let (p, size) = x.float(0).ok_or(Unmodelled::Reason(
        "the embedding table's element type is not recorded",
    ))?;
    let idx_size = x.elem_size(1).unwrap_or(8) as f64;
    Ok(OpCost {
        model: "embedding gather bytes",
        flops: None,
        bytes: Some(rows * idx_size + 2.0 * rows * w[1] as f64 * size as f64),
        precision: Some(p),
        unsized_elements: None,
    })
}

/// Element size of the dtype argument at input `i` of `_to_copy` / `to`: `""` (an unset
/// dtype: the source's is kept) -> `source`; `Scalar` -> the c10 `ScalarType` code recorded in
/// `Concrete Inputs`, refused when not recorded.
fn dtype_arg_size(x: &OpInputs, i: usize, source: u64) -> Result<u64, Unmodelled> {
    match x.types.get(i).map(|t| t.trim()) {
        None | Some("") => Ok(source),
        Some("Scalar") => match x.concrete.get(i).map(|c| c.trim()) {
            Some(code) if !code.is_empty() => scalar_type_size(code).ok_or(Unmodelled::Reason(
                "the target dtype's ScalarType code has no element size in the table",
            )),
            _ => Err(Unmodelled::Reason(
                "the target dtype is recorded as a Scalar without its value (Concrete Inputs \
                 not recorded): the output element size is unknown",
            )),
        },
        Some(_) => Err(Unmodelled::Shapes("the dtype argument is not a Scalar")),
    }
}

/// Dtype conversions and copies: the source read at its element size, the destination written
/// at its own (a bf16 <- fp32 copy of n elements moves 4n + 2n bytes, not 2 x 4n).
///
/// - `copy_(self, src, non_blocking)`: reads `src`, writes `self` (broadcast from `src`).
/// - `_to_copy(self, dtype, layout, device, pin_memory, non_blocking, memory_format)`.
/// - `to`: its overload from the recorded arguments: `to.dtype(self, dtype, non_blocking, copy,
///   memory_format)` (5, no tensor second), `to.other(self, other, ...)` (5, a tensor second:
///   its dtype), `to.device(self, device, dtype, ...)` (6), `to.dtype_layout(self, dtype, layout,
///   device, pin_memory, non_blocking, copy, memory_format)` (8).
fn convert(base: &str, x: &OpInputs) -> Result<OpCost, Unmodelled> {
    let (src, numel_out, out_size) = if base == "copy_" {
        let (dst, src) = (x.dim(0), x.dim(1));
        if dst.is_empty() || src.is_empty() {
            return Err(Unmodelled::Shapes("copy_ needs two tensors"));
        }
        let out = x.elem_size(0).ok_or(Unmodelled::Reason(
            "the destination's element type is not recorded",
        ))?;
        (1, numel(dst), out)
    } else {
        if x.dim(0).is_empty() {
            return Err(Unmodelled::Shapes("no tensor input"));
        }
        let source = x.elem_size(0).ok_or(Unmodelled::Reason(
            "the input's element type is not recorded",
        ))?;
        let out = match (base, x.dims.len()) {
            ("_to_copy", _) => dtype_arg_size(x, 1, source)?,
            ("to", 5) if !x.dim(1).is_empty() => x.elem_size(1).ok_or(Unmodelled::Reason(
                "the other tensor's element type is not recorded",
            ))?,
            ("to", 5 | 8) => dtype_arg_size(x, 1, source)?,
            ("to", 6) => dtype_arg_size(x, 2, source)?,
            _ => {
                return Err(Unmodelled::Shapes(
                    "an overload of `to` whose dtype argument is not known",
                ))
            }
        };
        (0, numel(x.dim(0)), out)
    };
    let read = x.tensor_bytes(src).ok_or(Unmodelled::Reason(
        "the source's element type is not recorded",
    ))?;
    Ok(OpCost {
        model: "copy bytes: source read + destination written, each at its dtype",
        flops: None,
        bytes: Some(read + numel_out * out_size as f64),
        precision: x.float(src).map(|p| p.0),
        unsized_elements: None,
    })
}

/// `cat(tensors, dim)` / `stack(tensors, dim)`: every tensor of the list read once and written
/// once into the output (2 x the list's elements). Bytes when the list's element type is
/// recorded (a plain dtype in `Input type`, which Kineto does not write for lists today); else
/// the elements stay in [`OpCost::unsized_elements`].
fn concat(base: &str, x: &OpInputs) -> Result<OpCost, Unmodelled> {
    let list = x.lists.first().filter(|l| !l.is_empty());
    let elements: f64 = match list {
        Some(list) => list.iter().map(|s| numel(s)).sum(),
        None if !x.dim(0).is_empty() => {
            return Err(Unmodelled::Shapes(
                "the first input is a tensor, not a list of tensors",
            ))
        }
        None => {
            return Err(Unmodelled::Reason(
                "the shapes of the TensorList input are not recorded (PyTorch before 2.x \
                 writes `[]` for a list)",
            ))
        }
    };
    let size = x.elem_size(0);
    Ok(OpCost {
        model: if base == "stack" {
            "stack bytes: the list read + written once"
        } else {
            "concatenation bytes: the list read + written once"
        },
        flops: None,
        bytes: size.map(|s| 2.0 * elements * s as f64),
        precision: x.float(0).map(|p| p.0),
        unsized_elements: size.is_none().then_some(2.0 * elements),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(dims: &[&[i64]], types: &[&str], concrete: &[&str]) -> OpInputs {
        OpInputs {
            dims: dims.iter().map(|d| d.to_vec()).collect(),
            types: types.iter().map(|t| t.to_string()).collect(),
            concrete: concrete.iter().map(|t| t.to_string()).collect(),
            lists: Vec::new(),
        }
    }

    #[test]
    fn gemm_family_by_hand() {
        let bf = "c10::BFloat16";
        let x = inputs(&[&[640], &[888, 2880], &[2880, 640]], &[bf, bf, bf], &[]);
        let c = model("aten::addmm", Some(&x)).unwrap();
        assert_eq!(c.flops, Some(2.0 * 888.0 * 2880.0 * 640.0));
        assert_eq!(
            c.bytes,
            Some(2.0 * (640.0 + 888.0 * 2880.0 + 2880.0 * 640.0 + 888.0 * 640.0))
        );
        assert_eq!(c.precision, Some(Precision::Bf16));
        // matmul broadcasts its batch dims: [2,1,4,8] x [3,8,5] -> 2*3 products of 4x8x5.
        let x = inputs(&[&[2, 1, 4, 8], &[3, 8, 5]], &["float", "float"], &[]);
        let c = model("aten::matmul", Some(&x)).unwrap();
        assert_eq!(c.flops, Some(2.0 * 6.0 * 4.0 * 8.0 * 5.0));
        assert_eq!(c.precision, Some(Precision::Fp32));
        // FP8 scaled mm with a bf16 output (out_dtype 15).
        let f8 = "c10::Float8_e4m3fn";
        let x = inputs(
            &[&[16, 32], &[32, 64], &[], &[], &[], &[]],
            &[f8, f8, "float", "float", "", "", "Scalar"],
            &["", "", "", "", "", "", "15"],
        );
        let c = model("aten::_scaled_mm", Some(&x)).unwrap();
        assert_eq!(c.flops, Some(2.0 * 16.0 * 32.0 * 64.0));
        assert_eq!(c.bytes, Some(16.0 * 32.0 + 32.0 * 64.0 + 2.0 * 16.0 * 64.0));
        assert_eq!(c.precision, Some(Precision::Fp8));
        // Grouped mm, 2D x 3D with offsets: total rows 48 over 4 experts.
        let x = inputs(&[&[48, 16], &[4, 16, 8], &[4]], &[bf, bf, "int"], &[]);
        let c = model("aten::_grouped_mm", Some(&x)).unwrap();
        assert_eq!(c.flops, Some(2.0 * 48.0 * 16.0 * 8.0));
        // Inconsistent shapes are refused, not guessed.
        let x = inputs(&[&[4, 5], &[6, 7]], &[bf, bf], &[]);
        assert!(matches!(
            model("aten::mm", Some(&x)),
            Err(Unmodelled::Shapes(_))
        ));
    }

    #[test]
    fn attention_by_hand() {
        let bf = "c10::BFloat16";
        // SDPA [B=4,H=12,L=197,E=64], not causal.
        let q: &[i64] = &[4, 12, 197, 64];
        let x = inputs(
            &[q, q, q, &[], &[], &[], &[], &[]],
            &[bf, bf, bf, "", "Scalar", "Scalar", "", "Scalar"],
            &["", "", "", "", "0.", "False", "", "False"],
        );
        let c = model("aten::scaled_dot_product_attention", Some(&x)).unwrap();
        let fwd = 4.0 * 4.0 * 12.0 * 197.0 * 197.0 * 64.0;
        assert_eq!(c.flops, Some(fwd));
        assert_eq!(c.bytes, Some(2.0 * 4.0 * numel(q)));
        // The same, causal: half.
        let mut causal = x.clone();
        causal.concrete[5] = "True".into();
        let c = model("aten::scaled_dot_product_attention", Some(&causal)).unwrap();
        assert_eq!(c.flops, Some(fwd / 2.0));
        // _flash_attention_forward lays out [B, L, H, E].
        let qf: &[i64] = &[4, 197, 12, 64];
        let mut fl = inputs(&[qf, qf, qf], &[bf, bf, bf], &[""; 15]);
        fl.concrete[8] = "False".into();
        let c = model("aten::_flash_attention_forward", Some(&fl)).unwrap();
        assert_eq!(c.flops, Some(fwd));
        // Unrecorded causal flag: refused.
        let mut none = x.clone();
        none.concrete.clear();
        assert!(model("aten::scaled_dot_product_attention", Some(&none)).is_err());
        // vLLM's paged attention: unmodelled with the reason.
        let err = model("vllm::unified_attention_with_output", Some(&x)).unwrap_err();
        assert!(err.to_string().contains("context length"), "{err}");
    }

    #[test]
    fn convolution_and_bytes_models() {
        // miopen_convolution(input, weight, bias, padding, stride, dilation, groups, ...).
        let bf = "c10::BFloat16";
        let x = inputs(
            &[&[10, 256, 14, 14], &[512, 256, 3, 3], &[]],
            &[bf, bf, ""],
            &[
                "", "", "", "[1, 1]", "[2, 2]", "[1, 1]", "1", "False", "False",
            ],
        );
        let c = model("aten::miopen_convolution", Some(&x)).unwrap();
        // out = (14 + 2 - 2 - 1) / 2 + 1 = 7.
        assert_eq!(c.flops, Some(2.0 * 10.0 * 512.0 * 49.0 * 256.0 * 9.0));
        // Elementwise add with broadcast [4,197,768] + [1,197,768].
        let x = inputs(
            &[&[4, 197, 768], &[1, 197, 768], &[]],
            &[bf, bf, "Scalar"],
            &["", "", "1"],
        );
        let c = model("aten::add", Some(&x)).unwrap();
        assert_eq!(c.flops, None);
        assert_eq!(
            c.bytes,
            Some(2.0 * (4.0 * 197.0 * 768.0 * 2.0 + 197.0 * 768.0))
        );
        assert!(matches!(
            model("aten::nonexistent_op", Some(&x)),
            Err(Unmodelled::NoModel)
        ));
        assert!(matches!(
            model("aten::add", None),
            Err(Unmodelled::NoShapes)
        ));
    }

    /// Dtype conversions move the source at its size and the destination at its own: a
    /// bf16 <- fp32 copy of n elements is 4n + 2n bytes (the input's size counted twice gave 8n).
    #[test]
    fn conversions_count_each_side_at_its_dtype() {
        let n = 1024.0 * 1024.0;
        let bf = "c10::BFloat16";
        // _to_copy(self, dtype=BFloat16 (15), layout, device, pin_memory, non_blocking, format).
        let to_bf16 = inputs(
            &[&[1024, 1024], &[], &[], &[], &[], &[], &[]],
            &["float", "Scalar", "", "", "", "Scalar", ""],
            &["", "15", "", "", "", "False", ""],
        );
        let c = model("aten::_to_copy", Some(&to_bf16)).unwrap();
        assert_eq!(c.bytes, Some(4.0 * n + 2.0 * n));
        assert_eq!(c.precision, Some(Precision::Fp32));
        // An unset dtype (`""`: a device move) keeps the source's: 2 x 4n.
        let mut same = to_bf16.clone();
        same.types[1] = String::new();
        same.concrete[1] = String::new();
        assert_eq!(
            model("aten::_to_copy", Some(&same)).unwrap().bytes,
            Some(8.0 * n)
        );
        // A dtype recorded as a Scalar without its value is refused, not guessed.
        let mut unrecorded = to_bf16.clone();
        unrecorded.concrete.clear();
        let err = model("aten::_to_copy", Some(&unrecorded)).unwrap_err();
        assert!(err.to_string().contains("without its value"), "{err}");
        // copy_(self = bf16 destination, src = fp32).
        let copy = inputs(
            &[&[1024, 1024], &[1024, 1024], &[]],
            &[bf, "float", "Scalar"],
            &[],
        );
        assert_eq!(
            model("aten::copy_", Some(&copy)).unwrap().bytes,
            Some(6.0 * n)
        );
        // copy_ broadcasting a [1024] fp32 row into a [1024,1024] bf16 destination.
        let row = inputs(
            &[&[1024, 1024], &[1024], &[]],
            &[bf, "float", "Scalar"],
            &[],
        );
        assert_eq!(
            model("aten::copy_", Some(&row)).unwrap().bytes,
            Some(4.0 * 1024.0 + 2.0 * n)
        );
        // to.dtype (5 args): int -> Long (4), as sglang records it.
        let to_dtype = inputs(
            &[&[32], &[], &[], &[], &[]],
            &["int", "Scalar", "Scalar", "Scalar", ""],
            &["", "4", "False", "False", ""],
        );
        assert_eq!(
            model("aten::to", Some(&to_dtype)).unwrap().bytes,
            Some(32.0 * 4.0 + 32.0 * 8.0)
        );
        // to.other (5 args, a tensor second): the other tensor's dtype.
        let to_other = inputs(
            &[&[8, 8], &[2, 2], &[], &[], &[]],
            &["float", "double", "Scalar", "Scalar", ""],
            &[],
        );
        assert_eq!(
            model("aten::to", Some(&to_other)).unwrap().bytes,
            Some(64.0 * 4.0 + 64.0 * 8.0)
        );
        // to.device (6 args): dtype third, Half (5).
        let to_device = inputs(
            &[&[10], &[], &[], &[], &[], &[]],
            &["float", "Device", "Scalar", "Scalar", "Scalar", ""],
            &["", "cuda:0", "5", "False", "False", ""],
        );
        assert_eq!(
            model("aten::to", Some(&to_device)).unwrap().bytes,
            Some(10.0 * 4.0 + 10.0 * 2.0)
        );
        // ScalarType codes (c10/core/ScalarType.h order).
        let sizes: Vec<Option<u64>> = ["0", "3", "4", "5", "6", "7", "11", "15", "24", "30", "x"]
            .iter()
            .map(|c| scalar_type_size(c))
            .collect();
        let want = [1, 4, 8, 2, 4, 8, 1, 2, 1].map(Some);
        assert_eq!(&sizes[..9], &want[..]);
        assert_eq!(&sizes[9..], &[None, None]);
    }

    /// `cat` of a TensorList as Kineto records it (the H100 Falconsai trace's args): the list's
    /// shapes parsed from the nested `Input Dims`, read + written once; the element size is not
    /// in the args, so the elements wait for the kernel's name.
    #[test]
    fn cat_reads_the_tensor_list_shapes() {
        let args: Value = serde_json::from_str(
            r#"{"Concrete Inputs": ["", "1"], "Input type": ["TensorList", "Scalar"],
                "Input Dims": [[[4, 1, 768], [4, 196, 768]], []]}"#,
        )
        .unwrap();
        let x = OpInputs::from_args(&args).unwrap();
        assert_eq!(x.lists[0], vec![vec![4, 1, 768], vec![4, 196, 768]]);
        assert!(x.lists[1].is_empty());
        assert_eq!(x.dims, vec![Vec::<i64>::new(), Vec::new()]);
        let c = model("aten::cat", Some(&x)).unwrap();
        let elements = 4.0 * 768.0 + 4.0 * 196.0 * 768.0;
        assert_eq!((c.bytes, c.unsized_elements), (None, Some(2.0 * elements)));
        let s = model("aten::stack", Some(&x)).unwrap();
        assert_eq!(s.unsized_elements, Some(2.0 * elements));
        // Older PyTorch writes `[]` for the list: refused with that reason.
        let old: Value = serde_json::from_str(
            r#"{"Input type": ["TensorList", "Scalar"], "Input Dims": [[], []]}"#,
        )
        .unwrap();
        let err = model("aten::cat", OpInputs::from_args(&old).as_ref()).unwrap_err();
        assert!(err.to_string().contains("TensorList"), "{err}");
        // The element size from the kernel PyTorch launches for it.
        let kernel = "void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::\
                      (anonymous namespace)::OpaqueType<2u>, unsigned int, 3, 64, 64>(...)";
        assert_eq!(kernel_element_size(kernel), Some(2));
        assert_eq!(
            kernel_element_size("CatArrayBatchedCopy<float, unsigned int, 4, 128, 1>"),
            Some(4)
        );
        assert_eq!(kernel_element_size("ampere_sgemm_128x64_nn"), None);
        // A list with its element type recorded gets its bytes directly.
        let mut typed = x.clone();
        typed.types[0] = "float".into();
        assert_eq!(
            model("aten::cat", Some(&typed)).unwrap().bytes,
            Some(2.0 * elements * 4.0)
        );
    }
}
