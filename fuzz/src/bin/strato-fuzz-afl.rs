//! The AFL++ driver: `strato-fuzz-afl TARGET` runs one fuzz target in AFL++'s persistent mode
//! (input on stdin, many inputs per process). Build it with
//! `cargo afl build --release -p strato-fuzz --features afl` and run it through
//! `scripts/fuzz.sh TARGET [SECONDS]`, which sets the time and memory bounds.

use strato_fuzz::{Target, TARGETS};

fn main() {
    let name = std::env::args().nth(1).unwrap_or_default();
    let Some(target) = Target::from_name(&name) else {
        let names: Vec<_> = TARGETS.iter().map(|t| t.name()).collect();
        eprintln!(
            "usage: strato-fuzz-afl TARGET  (one of {})",
            names.join(", ")
        );
        std::process::exit(2);
    };
    if target == Target::Store && !strato_fuzz::HAS_STORE {
        eprintln!("strato-fuzz-afl: built without the `store` feature");
        std::process::exit(2);
    }
    if target == Target::Sql && !strato_fuzz::HAS_SQL {
        eprintln!("strato-fuzz-afl: built without the `sql` feature");
        std::process::exit(2);
    }
    afl::fuzz!(|data: &[u8]| {
        strato_fuzz::run(target, data);
    });
}
