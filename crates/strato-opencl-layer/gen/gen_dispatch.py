#!/usr/bin/env python3
"""Generates src/generated.rs from the installed OpenCL ICD header (Debian `opencl-headers`).

    python3 crates/strato-opencl-layer/gen/gen_dispatch.py > crates/strato-opencl-layer/src/generated.rs
    cargo fmt -p strato-opencl-layer

It runs the C preprocessor over <CL/cl_icd.h> (CL_TARGET_OPENCL_VERSION=300), reads the field
order of `struct _cl_icd_dispatch` and every `cl_api_*` function-pointer typedef, resolves each
argument and return type to its C base type, and writes:

- `NAMES`: the dispatch table's entries in order (a unit test re-checks it against the header);
- `idx::*`: each entry's index; `pfn::*`: a Rust function-pointer type per entry that has one;
- a generic wrapper per entry (an API span around the call to the next layer) unless the entry
  has a hand-written hook in `hooks.rs` (`CUSTOM` below): one line per entry, its signature,
  expanded by the one wrapper template, the `api_span_wrappers!` macro;
- `generic_entries()` / `custom_entries()`: (index, function) of every wrapper and hook, which
  `dispatch.rs` puts into the layer's table.

Entries whose typedef is `void *` in this configuration (Windows D3D/DX9 sharing) and the GL/EGL
interop entries are passed through untouched (the layer never sees those calls).
"""
import re
import subprocess
import sys

CUSTOM = {
    "clCreateCommandQueue", "clCreateCommandQueueWithProperties", "clReleaseCommandQueue",
    "clGetCommandQueueInfo", "clCreateBuffer", "clCreateBufferWithProperties",
    "clReleaseMemObject", "clCreateKernel", "clCreateKernelsInProgram", "clCloneKernel",
    "clReleaseKernel", "clFinish", "clWaitForEvents", "clEnqueueNDRangeKernel", "clEnqueueTask",
    "clEnqueueReadBuffer", "clEnqueueWriteBuffer", "clEnqueueCopyBuffer",
    "clEnqueueReadBufferRect", "clEnqueueWriteBufferRect", "clEnqueueCopyBufferRect",
    "clEnqueueFillBuffer", "clEnqueueMapBuffer", "clEnqueueUnmapMemObject",
    "clEnqueueMarkerWithWaitList", "clEnqueueBarrierWithWaitList", "clEnqueueMigrateMemObjects",
    "clEnqueueSVMMemcpy", "clEnqueueSVMMemFill",
}
SKIP_PREFIX = ("clCreateFromGL", "clGetGL", "clEnqueueAcquireGL", "clEnqueueReleaseGL",
               "clCreateEventFromGL", "clCreateFromEGL", "clEnqueueAcquireEGL",
               "clEnqueueReleaseEGL", "clCreateEventFromEGL")

src = '#define CL_TARGET_OPENCL_VERSION 300\n#include <CL/cl_icd.h>\n'
pp = subprocess.run(["gcc", "-E", "-P", "-"], input=src, capture_output=True, text=True,
                    check=True).stdout
pp = re.sub(r"__attribute__\s*\(\(.*?\)\)", "", pp)
flat = " ".join(pp.split())

typedefs = {}
for m in re.finditer(r"typedef ([^;{}()]+?) \*?\s*(\w+);", flat):
    whole = m.group(0)
    body = whole[len("typedef "):-1].strip()
    name = re.search(r"(\w+)$", body).group(1)
    base = body[: -len(name)].strip()
    typedefs[name] = base

SCALARS = {
    "unsigned int": "u32", "int": "i32", "signed int": "i32", "unsigned long int": "u64", "long unsigned int": "u64", "long long unsigned int": "u64", "short unsigned int": "u16", "signed char ": "i8",
    "long int": "i64", "unsigned long": "u64", "long": "i64", "signed char": "i8",
    "unsigned char": "u8", "char": "i8", "float": "f32", "double": "f64",
    "unsigned short int": "u16", "short int": "i16", "unsigned short": "u16", "short": "i16",
    "long long int": "i64", "unsigned long long int": "u64",
}


def resolve(t):
    """Rust type of a C type (pointers become raw pointers)."""
    t = re.sub(r"\b(const|volatile|struct|enum)\b", " ", t)
    t = " ".join(t.split())
    if "*" in t:
        return "P"
    seen = 0
    while t in typedefs and seen < 20:
        nt = typedefs[t]
        if "*" in nt or nt.startswith("struct"):
            return "P"
        t = " ".join(re.sub(r"\b(const|volatile)\b", " ", nt).split())
        seen += 1
    if t in SCALARS:
        return SCALARS[t]
    if t == "void":
        return "()"
    raise SystemExit(f"unknown C type: {t!r}")


def split_args(s):
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return [a.strip() for a in out]


def arg_type(a):
    a = re.sub(r"/\*.*?\*/", "", a).strip()
    if "(" in a or "[" in a:  # function pointer or array parameter
        return "P"
    if a == "void":
        return None
    # drop the parameter name if there is one
    toks = a.replace("*", " * ").split()
    if len(toks) > 1 and toks[-1] not in ("*",) and re.match(r"^\w+$", toks[-1]) and \
            (toks[-1] not in typedefs and toks[-1] not in ("int", "char", "long", "short",
                                                           "float", "double", "unsigned")):
        toks = toks[:-1]
    t = " ".join(toks)
    return resolve(t)


funcs = {}
for m in re.finditer(r"typedef ([\w\s\*]+?)\s*\(\s*\*\s*cl_api_(\w+)\s*\)\s*\((.*?)\)\s*;", flat):
    ret, name, args = m.group(1), m.group(2), m.group(3)
    rt = resolve(ret)
    ats = [t for t in (arg_type(a) for a in split_args(args)) if t is not None]
    funcs[name] = (rt, ats)

struct = re.search(r"typedef struct _cl_icd_dispatch \{(.*?)\} cl_icd_dispatch;", flat).group(1)
names = [f.strip().split()[-1] for f in struct.split(";") if f.strip()]

o = []
w = o.append
MAX_WIDTH = 100


def w_wrapped(items, indent):
    """Writes `items` comma-separated (with a trailing comma), as many to a line as fit."""
    line = indent
    for item in items:
        if line != indent and len(line) + len(item) + 2 > MAX_WIDTH:
            w(line.rstrip())
            line = indent
        line += item + ", "
    if line != indent:
        w(line.rstrip())

w("//! GENERATED by `gen/gen_dispatch.py` from `<CL/cl_icd.h>` (OpenCL 3.0 headers): the ICD")
w("//! dispatch table's entry order, function-pointer types and the generic API-tracing wrappers.")
w("//! Do not edit by hand; re-run the generator. `tests` in `dispatch.rs` re-check the order")
w("//! against the installed header.")
w("#![allow(non_snake_case, non_upper_case_globals, non_camel_case_types, clippy::missing_safety_doc)]")
w("#![allow(clippy::too_many_arguments, clippy::let_unit_value, clippy::unused_unit)]")
w("")
w("use std::ffi::c_void;")
w("")
w("/// A raw pointer argument or result (handles, out-parameters, callbacks).")
w("pub type P = *mut c_void;")
w("")
w(f"/// Number of entries of `cl_icd_dispatch`.")
w(f"pub const N_ENTRIES: usize = {len(names)};")
w("")
w("/// The dispatch table's entries, in order.")
w(f"pub const NAMES: [&str; N_ENTRIES] = [")
for n in names:
    w(f'    "{n}",')
w("];")
w("")
w("/// Index of each entry in the dispatch table.")
w("pub mod idx {")
for i, n in enumerate(names):
    w(f"    pub const {n}: usize = {i};")
w("}")
w("")
w("/// Function-pointer type of each entry that has one on this platform.")
w("pub mod pfn {")
w("    use super::P;")
for n in names:
    if n in funcs:
        rt, ats = funcs[n]
        args = ", ".join(ats)
        ret = "" if rt == "()" else f" -> {rt}"
        w(f"    pub type {n} = unsafe extern \"C\" fn({args}){ret};")
w("}")
w("")
w("/// Generic wrappers: an API span around the call to the next layer.")
w("pub mod generic {")
w("    use super::{idx, pfn, P};")
w("")
w("    /// Defines each `name(args) -> ret;` as a wrapper that opens an API span, calls the next")
w("    /// layer's entry of that name with the arguments unchanged, and closes the span.")
w("    macro_rules! api_span_wrappers {")
w("        ($($name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty;)*) => {$(")
w("            pub unsafe extern \"C\" fn $name($($arg: $ty),*) -> $ret {")
w("                let t0 = crate::trace::api_begin();")
w("                // SAFETY: the entry is non-null (installed only then) and has this type; the")
w("                // arguments are the application's, passed on unchanged.")
w("                let r = unsafe { crate::dispatch::next::<pfn::$name>(idx::$name)($($arg),*) };")
w("                crate::trace::api_end(idx::$name, t0);")
w("                r")
w("            }")
w("        )*};")
w("    }")
w("")
w("    api_span_wrappers! {")
gen = []
for n in names:
    if n not in funcs or n in CUSTOM or n.startswith(SKIP_PREFIX):
        continue
    rt, ats = funcs[n]
    params = [f"a{i}: {t}" for i, t in enumerate(ats)]
    line = f"        {n}({', '.join(params)}) -> {rt};"
    if len(line) <= MAX_WIDTH:
        w(line)
    else:
        w(f"        {n}(")
        w_wrapped(params, "            ")
        w(f"        ) -> {rt};")
    gen.append(n)
w("    }")
w("}")
w("")
w("/// `(index, entry)` of each named entry of `module`, as untyped table pointers.")
w("macro_rules! entries {")
w("    ($module:ident: $($name:ident),* $(,)?) => {")
w("        vec![$((idx::$name, $module::$name as pfn::$name as *const c_void)),*]")
w("    };")
w("}")
w("")
w("/// (index, wrapper) of every generic wrapper.")
w("pub fn generic_entries() -> Vec<(usize, *const c_void)> {")
w("    entries!(")
w("        generic:")
w_wrapped(gen, "        ")
w("    )")
w("}")
w("")
w("/// (index, hook) of every hand-written hook (`hooks.rs`).")
w("pub fn custom_entries() -> Vec<(usize, *const c_void)> {")
w("    use crate::hooks;")
w("    entries!(")
w("        hooks:")
w_wrapped([n for n in names if n in CUSTOM and n in funcs], "        ")
w("    )")
w("}")
missing = CUSTOM - set(funcs)
if missing:
    raise SystemExit(f"custom hooks with no typedef: {missing}")
sys.stdout.write("\n".join(o) + "\n")
