//! Unit tests of the perf importer's parts: event lines and switch fields of `perf script`,
//! prev_state letters and bits, tracepoint formats, call-stack lines, module files and mappings.

use super::data::*;
use super::script::*;
use super::symbols::*;

use super::*;

#[test]
fn event_lines_parse_with_and_without_cpu_pid_and_period() {
    let l = parse_line("  lto cgu.07 25554 [001] 49049.128030:     sched:sched_switch: prev_comm=x prev_pid=1 prev_prio=120 prev_state=S ==> next_comm=y next_pid=2 next_prio=120").unwrap();
    assert_eq!(l.comm, "lto cgu.07");
    assert_eq!(
        l.header,
        Header {
            ts: 49_049_128_030_000,
            pid: None,
            tid: 25554
        }
    );
    assert_eq!(l.event, "sched:sched_switch");
    assert_eq!(l.digits, 6);
    let l = parse_line("python3 10/11 49049.124111123:          1            page-faults:  ffffffff81775b9a elf_load+0x28a ([kernel.kallsyms])").unwrap();
    assert_eq!(
        l.header,
        Header {
            ts: 49_049_124_111_123,
            pid: Some(10),
            tid: 11
        }
    );
    assert_eq!(l.event, "page-faults");
    assert_eq!(l.digits, 9);
    assert!(parse_line("hello world").is_none());
    assert!(parse_line("\tffffffff815fa26d unmap_page_range+0x51d ([kernel.kallsyms])").is_none());
}

#[test]
fn switch_fields_and_states_parse() {
    let l = parse_line("bash 7 [000] 1.000001: sched:sched_switch: prev_comm=a b prev_pid=7 prev_prio=120 prev_state=R+ ==> next_comm=c next_pid=9 next_prio=120").unwrap();
    assert_eq!(
        text_event(&l, vec![]),
        Some(Ev::Switch {
            prev: 7,
            left: Left::Runnable,
            next: 9
        })
    );
    assert_eq!(left_from_letters("S"), Left::Asleep);
    assert_eq!(left_from_letters("D|K"), Left::Asleep);
    assert_eq!(left_from_letters("X"), Left::Dead);
    assert_eq!(left_from_bits(0), Left::Runnable);
    assert_eq!(left_from_bits(0x100), Left::Runnable);
    assert_eq!(left_from_bits(1), Left::Asleep);
    assert_eq!(left_from_bits(0x20), Left::Dead);
}

#[test]
fn symbols_come_off_stack_lines() {
    assert_eq!(
        sample_symbol("\tffffffff815fa26d unmap_page_range+0x51d ([kernel.kallsyms])").as_deref(),
        Some("unmap_page_range")
    );
    assert_eq!(
        sample_symbol("  7f00 [unknown] (/usr/bin/python3)").as_deref(),
        Some("[unknown]")
    );
    assert_eq!(sample_symbol("   42776").as_deref(), None);
}

#[test]
fn only_regular_files_are_read_for_symbols() {
    // A perf.data names any path: reading a device, a FIFO or a pseudo-file would not end.
    for path in [
        "/dev/zero",
        "/dev/stdin",
        "/proc/self/pagemap",
        "/proc/kcore",
        "/",
        "/x/y",
    ] {
        assert!(!is_module_file(path), "{path}");
    }
    let exe = std::env::current_exe().unwrap();
    assert!(is_module_file(exe.to_str().unwrap()));
}

#[test]
fn a_mapping_whose_offset_overflows_holds_nothing() {
    let mut s = Symbolizer::default();
    s.map(7, 0x1000, 0x1000, u64::MAX - 4, b"[vdso]");
    assert_eq!(s.frame(7, 0x1800), None);
    s.map(7, 0x1000, 0x1000, 0, b"[vdso]");
    assert!(s.frame(7, 0x1800).is_some());
}

#[test]
fn tracepoint_formats_parse() {
    let text = b"name: sched_switch\nID: 372\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\nprint fmt: \"x\"\n";
    let mut blob = b"junk\n".to_vec();
    blob.extend_from_slice(text);
    let f = tracepoint_format(&blob, 372).unwrap();
    assert_eq!(f.fields["prev_pid"], (24, 4, true));
    assert_eq!(f.fields["prev_comm"], (8, 16, false));
    let mut raw = vec![0u8; 28];
    raw[24..28].copy_from_slice(&(-5i32).to_le_bytes());
    assert_eq!(f.int(&raw, "prev_pid", true), Some(-5));
    // A damaged format text: the field ends past usize::MAX.
    let mut f = f;
    f.fields.insert("far".into(), (usize::MAX - 1, 4, false));
    assert_eq!(f.int(&raw, "far", true), None);
    assert!(tracepoint_format(&blob, 373).is_none());
}
