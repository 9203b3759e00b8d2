//! Deterministic mutation of the shipped SQL texts (views, store views, analyses) run through
//! a session under small limits: whatever the text, a query answers or fails with one line of
//! the library's error, within its timeout; never a panic of the query's thread (reported as
//! "ended without an answer"), a crash or a hang. The fixed seed keeps CI deterministic; a
//! coverage-guided campaign is future work (docs/fuzzing.md).

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use strato_sql::{Limits, Session, SqlError};
use strato_trace::testing::{rank, TraceBuilder};
use strato_trace::Level;

/// Fragments a mutation inserts: structure, operators, the functions and constructs the
/// limits guard, extreme numbers.
const FRAGMENTS: [&str; 24] = [
    "(",
    ")",
    " OR ",
    " AND ",
    "+",
    "*",
    "/ 0",
    ",",
    "'",
    " UNION ALL SELECT 1 ",
    " JOIN kernels k2 ON true ",
    "repeat('x', 2147483647)",
    "lpad(name, 99999999)",
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) ",
    "9223372036854775807",
    "-9223372036854775808",
    "1e308",
    "NULL",
    "CAST(name AS BIGINT)",
    " GROUP BY 1 ",
    " ORDER BY 1 ",
    " LIMIT 0 ",
    "(SELECT count(*) FROM spans)",
    "\u{0}",
];

/// xorshift64: a deterministic generator without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One mutation of `text`: 1-3 edits at character boundaries (delete, duplicate or insert a
/// fragment, splice a piece of `donor`).
fn mutate(rng: &mut Rng, text: &str, donor: &str) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(chars.len() + 1);
        let len = rng.below(40).min(chars.len() - at.min(chars.len()));
        match rng.below(4) {
            0 => {
                chars.drain(at..at + len);
            }
            1 => {
                let piece: Vec<char> = chars[at..at + len].to_vec();
                chars.splice(
                    at..at,
                    piece.iter().cycle().take(len * (1 + rng.below(3))).copied(),
                );
            }
            2 => {
                let fragment = FRAGMENTS[rng.below(FRAGMENTS.len())];
                chars.splice(at..at, fragment.chars());
            }
            _ => {
                let donor: Vec<char> = donor.chars().collect();
                let from = rng.below(donor.len());
                let piece = &donor[from..(from + rng.below(80)).min(donor.len())];
                chars.splice(at..at, piece.iter().copied());
            }
        }
    }
    chars.into_iter().collect()
}

fn session() -> Session {
    let mut b = TraceBuilder::new();
    b.rank(rank(Some(0), "r0"));
    let cpu = b.thread(1, 1);
    let q = b.queue(0, 7);
    for i in 0..200 {
        b.span(cpu, Level::Backend, "aten::mm", 100 * i, 100 * i + 60);
        b.span(q, Level::DeviceKernel, "gemm", 100 * i + 10, 100 * i + 50);
    }
    let mut limits = Limits::with_budget(256 << 20);
    limits.timeout = Some(Duration::from_secs(10));
    Session::with_limits(strato_store::arrow_tables(&b.build()).unwrap(), 2, limits).unwrap()
}

#[test]
fn mutated_shipped_queries_answer_or_fail_with_one_line() {
    let seeds: Vec<&str> = strato_sql::VIEWS
        .iter()
        .chain(strato_sql::STORE_VIEWS.iter())
        .chain(strato_sql::ANALYSES.iter())
        .map(|(_, text)| *text)
        .collect();
    let s = session();
    let runs: usize = std::env::var("STRATO_SQL_MUTATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let mut rng = Rng(0x05ee_d5a1);
    let (mut answered, mut refused) = (0, 0);
    for run in 0..runs {
        let text = seeds[rng.below(seeds.len())];
        let donor = seeds[rng.below(seeds.len())];
        let query = mutate(&mut rng, text, donor);
        let started = Instant::now();
        match s.query(&query) {
            Ok(_) => answered += 1,
            Err(SqlError::Timeout { .. }) => refused += 1,
            Err(e) => {
                let message = e.to_string();
                assert!(
                    !message.contains('\n') && !message.contains("without an answer"),
                    "run {run}: {message}\n{query}"
                );
                refused += 1;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "run {run}: {:?}\n{query}",
            started.elapsed()
        );
    }
    // The seeds answer; a fair share of mutations still parse and run.
    for text in &seeds[..2] {
        assert!(s.query(text).is_ok());
    }
    assert!(
        answered > 0 && refused > 0,
        "{answered} answered, {refused} refused"
    );
}
