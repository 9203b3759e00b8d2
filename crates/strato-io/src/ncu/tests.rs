//! Unit tests of the Nsight Compute importer's parts: kernel short names and identifier
//! matching, numbers and units.

use super::matching::*;
use super::values::*;

#[test]
fn short_names() {
    assert_eq!(
        short_name("void unnamed>::gemm_tiled_kernel<32>(const float *, int)"),
        "gemm_tiled_kernel"
    );
    assert_eq!(
        short_name("void (anonymous namespace)::gemm<32>(float const*, int)"),
        "gemm"
    );
    assert_eq!(
        short_name("_Z17gemm_tiled_kernelILi32EEvPKfS1_Pfiii"),
        "gemm_tiled_kernel"
    );
    assert_eq!(short_name("_ZN12_GLOBAL__N_14gemmILi32EEEvPKf"), "gemm");
    assert_eq!(
        short_name("ampere_sgemm_128x64_tn"),
        "ampere_sgemm_128x64_tn"
    );
    assert_eq!(short_name("gemm"), "gemm");
}

#[test]
fn numbers_and_units() {
    assert_eq!(parse_number("53,261,312"), Some(Num::Int(53_261_312)));
    assert_eq!(parse_number("87.50"), Some(Num::Float(87.5)));
    assert_eq!(parse_number("1,234.5"), Some(Num::Float(1234.5)));
    assert_eq!(parse_number("(32, 32, 1)"), None);
    assert_eq!(parse_number("1,2"), None);
    assert_eq!(parse_number("n/a"), None);
    let m = normalise("1.234", "usecond", None);
    assert_eq!(m.number, Some(Num::Int(1234)));
    assert_eq!(m.unit, "ns");
    let m = normalise("2.5", "Mbyte", None);
    assert_eq!(m.number, Some(Num::Int(2_500_000)));
    assert!(contains_identifier("void gemm<1>(int)", "gemm"));
    assert!(!contains_identifier("void gemm_tiled(int)", "gemm"));
}
