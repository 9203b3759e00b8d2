//! Unit tests of the OS level: blocked causes, the collector-wait overlap, syscall names.

use super::wait::CollectorWait;
use super::*;

#[test]
fn causes_follow_the_system_call() {
    assert_eq!(blocked_cause(Some("futex")), ThreadState::BlockedLock);
    assert_eq!(
        blocked_cause(Some("clock_nanosleep")),
        ThreadState::BlockedSleep
    );
    assert_eq!(blocked_cause(Some("fsync")), ThreadState::BlockedIo);
    assert_eq!(blocked_cause(Some("wait4")), ThreadState::BlockedOther);
    assert_eq!(blocked_cause(None), ThreadState::BlockedOther);
    for s in ThreadState::ALL {
        assert_eq!(ThreadState::from_name(s.as_str()), Some(s));
    }
}

#[test]
fn collector_wait_is_the_overlap_of_queued_and_launcher_on_the_same_cpu() {
    let mut w = CollectorWait::default();
    w.launcher.insert(99);
    // Thread 5 preempted on CPU 0 at 100; the launcher runs there 150..250; 5 runs at 300.
    assert_eq!(w.queue(5, 0, 100), None);
    assert_eq!(w.launcher_in(0, 150), vec![]);
    assert_eq!(w.launcher_out(0, 250), vec![(5, 100)]);
    assert_eq!(w.dequeue(5, 300), None);
    // Thread 6 woken onto CPU 1 at 400, where the launcher runs since 350; it migrates to
    // CPU 0 (no launcher) at 450 and runs at 500: 50 ns behind the launcher.
    assert_eq!(w.launcher_in(1, 350), vec![]);
    assert_eq!(w.queue(6, 1, 400), None);
    assert_eq!(w.queue(6, 0, 450), Some((6, 50)));
    assert_eq!(w.dequeue(6, 500), None);
    // Thread 5 queued on CPU 1 from 600 (the launcher still there) until it runs at 700.
    assert_eq!(w.queue(5, 1, 600), None);
    assert_eq!(w.dequeue(5, 700), Some((5, 200)));
    assert_eq!(w.waited.values().sum::<i64>(), 250);
    assert!(w.queued.is_empty());
    assert!(w.is_launcher(99) && !w.is_launcher(5));
}

#[test]
fn syscall_names_come_from_the_table() {
    #[cfg(target_arch = "x86_64")]
    {
        assert_eq!(syscall_name(202), Some("futex"));
        assert_eq!(syscall_name(74), Some("fsync"));
    }
    assert_eq!(syscall_name(-1), None);
}
