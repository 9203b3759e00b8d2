//! Unit tests of the Nsight Systems importer's pure parts: the blocking cause of an OS runtime
//! call and the call covering a switch-out, runtime names, global thread ids, memcpy names.

use super::device::*;
use super::os::*;
use super::schema::*;

use super::*;

#[test]
fn osrt_calls_name_their_cause() {
    assert_eq!(osrt_cause("pthread_cond_wait"), Some("blocked:lock"));
    assert_eq!(osrt_cause("sem_timedwait"), Some("blocked:lock"));
    assert_eq!(osrt_cause("nanosleep"), Some("blocked:sleep"));
    assert_eq!(osrt_cause("read"), Some("blocked:io"));
    assert_eq!(osrt_cause("poll"), Some("blocked:io"));
    assert_eq!(osrt_cause("fopen64"), Some("blocked:io"));
    assert_eq!(osrt_cause("mmap64"), None);
    assert_eq!(osrt_cause("pipe2"), None);
}

#[test]
fn the_innermost_covering_call_is_found() {
    let call = |start, end, cause| OsrtCall {
        start,
        end,
        name: StrId(0),
        cause,
    };
    let calls = OsrtCalls {
        calls: vec![
            call(50, 60, "blocked:sleep"),
            call(0, 100, "blocked:io"),
            call(10, 20, "blocked:lock"),
        ],
        max_end: vec![],
    }
    .indexed();
    assert_eq!(calls.covering(15).map(|c| c.cause), Some("blocked:lock"));
    assert_eq!(calls.covering(20).map(|c| c.cause), Some("blocked:io"));
    assert_eq!(calls.covering(55).map(|c| c.cause), Some("blocked:sleep"));
    assert_eq!(calls.covering(99).map(|c| c.cause), Some("blocked:io"));
    assert!(calls.covering(100).is_none());
    assert!(calls.covering(-1).is_none());
    assert!(OsrtCalls::default().indexed().covering(5).is_none());
}

#[test]
fn runtime_names_lose_their_abi_version() {
    assert_eq!(strip_version("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
    assert_eq!(strip_version("cudaFree_v3020"), "cudaFree");
    assert_eq!(
        strip_version("cuModuleGetLoadingMode"),
        "cuModuleGetLoadingMode"
    );
    assert_eq!(strip_version("my_var"), "my_var");
    assert_eq!(strip_version("x_v"), "x_v");
}

#[test]
fn global_ids_split_into_pid_and_tid() {
    assert_eq!(split_global_tid(310028055214088), (1701896, 1701896));
    assert_eq!(split_global_tid(310028053512192), (1701896, 0));
    assert_eq!(process_key(310028055214088), process_key(310028053512192));
}

#[test]
fn memcpy_names_with_and_without_the_enum() {
    let empty = Enum::default();
    assert_eq!(memcpy_name(Some(1), &empty), "Memcpy HtoD");
    assert_eq!(memcpy_name(Some(8), &empty), "Memcpy DtoD");
    assert_eq!(memcpy_name(None, &empty), "Memcpy");
    let mut kinds = Enum::default();
    kinds
        .values
        .insert(2, ("CUDA_MEMCPY_KIND_DTOH".into(), "Device-to-Host".into()));
    kinds.values.insert(
        11,
        (
            "CUDA_MEMCPY_KIND_UVM_HTOD".into(),
            "Unified Host-to-Device".into(),
        ),
    );
    assert_eq!(memcpy_name(Some(2), &kinds), "Memcpy DtoH");
    assert_eq!(
        memcpy_name(Some(11), &kinds),
        "Memcpy Unified Host-to-Device"
    );
}
