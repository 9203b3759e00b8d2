//! The worker pool (DOPpler's Precise Parallel Measurer, Algorithm 1): warm worker processes
//! talking the framed protocol over pipes, a work queue that keeps at most `dp` requests in
//! flight, per-request deadlines (the adaptive timeout), and replacement of workers that crash
//! or hang. Every replacement is logged.

use std::io::BufReader;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::candidate::Candidate;
use crate::error::{MeasureError, Result};
use crate::log::{Decision, Log};
use crate::protocol::{read_frame, write_frame, Outcome, Reply, Request, Timing};

/// How workers are started.
#[derive(Debug, Clone)]
pub struct WorkerSpec {
    /// Program and arguments of a worker.
    pub command: Vec<String>,
    /// Extra environment (e.g. `POCL_KERNEL_CACHE=0`).
    pub env: Vec<(String, String)>,
    /// How long a worker may take to say `Ready` (s).
    pub start_timeout_s: f64,
}

impl WorkerSpec {
    /// A worker spec running `command` with PoCL's kernel cache off.
    pub fn new(command: Vec<String>) -> Self {
        Self {
            command,
            env: vec![("POCL_KERNEL_CACHE".into(), "0".into())],
            start_timeout_s: 60.0,
        }
    }

    /// Starts one worker process; its replies arrive on `tx` tagged with `(slot, gen)`.
    pub(crate) fn spawn(
        &self,
        slot: usize,
        gen: u64,
        tx: Sender<Event>,
        extra_env: &[(&str, &str)],
    ) -> Result<Worker> {
        let (program, args) = self
            .command
            .split_first()
            .ok_or_else(|| MeasureError::WorkerStart("empty worker command".into()))?;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| MeasureError::WorkerStart(format!("{program}: {e}")))?;
        let stdin = child.stdin.take();
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| MeasureError::WorkerStart("no stdout pipe".into()))?;
        let stderr_tail = Arc::new(Mutex::new(String::new()));
        if let Some(mut stderr) = child.stderr.take() {
            let tail = Arc::clone(&stderr_tail);
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = std::io::Read::read(&mut stderr, &mut buf) {
                    if n == 0 {
                        break;
                    }
                    if let Ok(mut t) = tail.lock() {
                        t.push_str(&String::from_utf8_lossy(&buf[..n]));
                        if t.len() > 4000 {
                            let cut = t.len() - 2000;
                            let cut = (cut..t.len()).find(|&i| t.is_char_boundary(i)).unwrap_or(0);
                            t.drain(..cut);
                        }
                    }
                }
            });
        }
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                match read_frame::<_, Reply>(&mut reader) {
                    Ok(Some(reply)) => {
                        if tx.send(Event::Frame { slot, gen, reply }).is_err() {
                            break;
                        }
                    }
                    Ok(None) => {
                        let _ = tx.send(Event::Closed {
                            slot,
                            gen,
                            error: None,
                        });
                        break;
                    }
                    Err(e) => {
                        let _ = tx.send(Event::Closed {
                            slot,
                            gen,
                            error: Some(e.to_string()),
                        });
                        break;
                    }
                }
            }
        });
        Ok(Worker {
            gen,
            pid: child.id(),
            child,
            stdin,
            stderr_tail,
            state: State::Starting {
                since: Instant::now(),
            },
        })
    }
}

/// Something a worker's reader thread saw.
#[derive(Debug)]
pub(crate) enum Event {
    Frame {
        slot: usize,
        gen: u64,
        reply: Reply,
    },
    Closed {
        slot: usize,
        gen: u64,
        error: Option<String>,
    },
}

#[derive(Debug, Clone, Copy)]
enum State {
    Starting {
        since: Instant,
    },
    Idle,
    Busy {
        job: usize,
        id: u64,
        since: Instant,
        deadline: Instant,
    },
}

/// One worker process.
#[derive(Debug)]
pub(crate) struct Worker {
    gen: u64,
    pub(crate) pid: u32,
    pub(crate) child: Child,
    pub(crate) stdin: Option<ChildStdin>,
    stderr_tail: Arc<Mutex<String>>,
    state: State,
}

impl Worker {
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
    pub(crate) fn tail(&self) -> String {
        self.stderr_tail
            .lock()
            .map(|t| {
                t.trim()
                    .lines()
                    .rev()
                    .take(5)
                    .collect::<Vec<_>>()
                    .join(" | ")
            })
            .unwrap_or_default()
    }
}

/// One request to run: a candidate and, optionally, the worker that should run it (it has the
/// program cached).
#[derive(Debug, Clone, Copy)]
pub struct Job<'a> {
    pub candidate: &'a Candidate,
    pub prefer: Option<usize>,
}

/// A job's result.
#[derive(Debug, Clone)]
pub struct JobResult {
    pub outcome: Outcome,
    /// The worker slot that ran it.
    pub slot: usize,
    /// Engine-side wall time from dispatch to answer (ns).
    pub wall_ns: f64,
    /// Dispatch time, seconds since the pool started.
    pub start_s: f64,
}

/// Measurement parameters of a request.
#[derive(Debug, Clone, Copy)]
pub struct RunParams {
    pub repeats: u32,
    pub warmup: u32,
    pub timing: Timing,
    /// See [`Request::Measure`].
    pub disturbed_retries: u32,
    pub stall_limit: f64,
    /// Time budget of one timed run (ns), see [`Request::Measure`].
    pub min_run_ns: f64,
}

/// A pool of warm workers.
#[derive(Debug)]
pub struct Pool {
    spec: WorkerSpec,
    workers: Vec<Worker>,
    tx: Sender<Event>,
    rx: Receiver<Event>,
    next_gen: u64,
    next_id: u64,
    epoch: Instant,
    /// Workers started (including replacements).
    pub started: usize,
    /// Workers replaced after a crash or timeout.
    pub replaced: usize,
    /// Device name reported by the first worker.
    pub device: Option<String>,
    /// Start-up windows of the workers (for the engine's overlap check).
    pub startups: Vec<ActiveWindow>,
}

/// A window during which a worker was active (start-up or a request), `CLOCK_MONOTONIC` ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActiveWindow {
    pub slot: usize,
    pub from_ns: u64,
    pub to_ns: u64,
}

impl Pool {
    /// A pool with no workers yet; they start on demand.
    pub fn new(spec: WorkerSpec, epoch: Instant) -> Self {
        let (tx, rx) = channel();
        Self {
            spec,
            workers: Vec::new(),
            tx,
            rx,
            next_gen: 0,
            next_id: 0,
            epoch,
            started: 0,
            replaced: 0,
            device: None,
            startups: Vec::new(),
        }
    }

    fn spawn_into(&mut self, slot: usize) -> Result<()> {
        self.next_gen += 1;
        let worker = self.spec.spawn(slot, self.next_gen, self.tx.clone(), &[])?;
        self.started += 1;
        if slot < self.workers.len() {
            self.workers[slot].kill();
            self.workers[slot] = worker;
        } else {
            self.workers.push(worker);
        }
        Ok(())
    }

    /// Makes sure `n` workers exist (they warm up concurrently).
    pub fn grow(&mut self, n: usize) -> Result<()> {
        while self.workers.len() < n {
            self.spawn_into(self.workers.len())?;
        }
        Ok(())
    }

    /// Waits until every started worker is ready.
    pub fn wait_ready(&mut self, log: &mut Log) -> Result<()> {
        let mut none: Vec<Option<JobResult>> = Vec::new();
        while self
            .workers
            .iter()
            .any(|w| matches!(w.state, State::Starting { .. }))
        {
            self.step(&[], &mut none, log, Duration::from_millis(200))?;
        }
        Ok(())
    }

    /// Runs `jobs` with at most `dp` in flight, each bounded by `timeout_s`.
    pub fn run(
        &mut self,
        jobs: &[Job<'_>],
        dp: usize,
        timeout_s: f64,
        params: RunParams,
        log: &mut Log,
    ) -> Result<Vec<JobResult>> {
        let dp = dp.max(1);
        self.grow(dp)?;
        // Nothing is dispatched while a worker starts: its start-up holds the device lock
        // (shared) and would eat into the first requests' timeouts.
        self.wait_ready(log)?;
        let mut results: Vec<Option<JobResult>> = vec![None; jobs.len()];
        let mut queue: Vec<usize> = (0..jobs.len()).collect();
        queue.reverse(); // pop from the end = in order
        let timeout = Duration::from_secs_f64(timeout_s.max(0.001));
        loop {
            // Dispatch while fewer than dp are in flight.
            loop {
                let busy = self
                    .workers
                    .iter()
                    .filter(|w| matches!(w.state, State::Busy { .. }))
                    .count();
                if busy >= dp || queue.is_empty() {
                    break;
                }
                let Some(&job_index) = queue.last() else {
                    break;
                };
                let idle = |w: &Worker| matches!(w.state, State::Idle);
                let slot = match jobs[job_index].prefer {
                    Some(p) if p < self.workers.len() && idle(&self.workers[p]) => Some(p),
                    _ => self.workers.iter().position(idle),
                };
                let Some(slot) = slot else { break };
                queue.pop();
                self.dispatch(
                    slot,
                    job_index,
                    jobs[job_index].candidate,
                    params,
                    timeout,
                    log,
                )?;
            }
            if queue.is_empty() && results.iter().all(Option::is_some) {
                break;
            }
            self.step(jobs, &mut results, log, Duration::from_secs(3600))?;
        }
        Ok(results.into_iter().flatten().collect())
    }

    fn dispatch(
        &mut self,
        slot: usize,
        job: usize,
        candidate: &Candidate,
        params: RunParams,
        timeout: Duration,
        log: &mut Log,
    ) -> Result<()> {
        self.next_id += 1;
        let id = self.next_id;
        let request = Request::Measure {
            id,
            candidate: Box::new(candidate.clone()),
            repeats: params.repeats,
            warmup: params.warmup,
            timing: params.timing,
            disturbed_retries: params.disturbed_retries,
            stall_limit: params.stall_limit,
            min_run_ns: params.min_run_ns,
        };
        let now = Instant::now();
        let w = &mut self.workers[slot];
        w.state = State::Busy {
            job,
            id,
            since: now,
            deadline: now + timeout,
        };
        let sent = match w.stdin.as_mut() {
            Some(stdin) => write_frame(stdin, &request),
            None => Err(MeasureError::Protocol("worker stdin closed".into())),
        };
        if let Err(e) = sent {
            // The worker is gone; its reader thread will report the closed pipe and the job
            // is accounted as a crash there.
            log.push(Decision::WorkerWriteFailed {
                slot,
                pid: w.pid,
                error: e.to_string(),
            });
        }
        Ok(())
    }

    /// Handles one event or deadline; fills `results` for jobs that finish.
    fn step(
        &mut self,
        jobs: &[Job<'_>],
        results: &mut [Option<JobResult>],
        log: &mut Log,
        max_wait: Duration,
    ) -> Result<()> {
        let now = Instant::now();
        let start_timeout = Duration::from_secs_f64(self.spec.start_timeout_s);
        let mut next_deadline = now + max_wait;
        for w in &self.workers {
            match w.state {
                State::Busy { deadline, .. } => next_deadline = next_deadline.min(deadline),
                State::Starting { since } => {
                    next_deadline = next_deadline.min(since + start_timeout)
                }
                State::Idle => {}
            }
        }
        let wait = next_deadline.saturating_duration_since(now);
        match self.rx.recv_timeout(wait) {
            Ok(Event::Frame { slot, gen, reply }) => {
                if slot >= self.workers.len() || self.workers[slot].gen != gen {
                    return Ok(()); // from a replaced worker
                }
                match reply {
                    Reply::Ready {
                        device,
                        init_ns,
                        pid,
                        active_from_ns,
                        active_to_ns,
                    } => {
                        if active_to_ns > 0 {
                            self.startups.push(ActiveWindow {
                                slot,
                                from_ns: active_from_ns,
                                to_ns: active_to_ns,
                            });
                        }
                        if self.device.is_none() {
                            self.device = Some(device);
                        }
                        log.push(Decision::WorkerReady {
                            slot,
                            pid,
                            init_s: init_ns / 1e9,
                        });
                        self.workers[slot].state = State::Idle;
                    }
                    Reply::Fatal { error } => {
                        return Err(MeasureError::WorkerStart(error));
                    }
                    Reply::Result { id: rid, outcome } => {
                        if let State::Busy { job, id, since, .. } = self.workers[slot].state {
                            if id == rid {
                                self.workers[slot].state = State::Idle;
                                if job < results.len() {
                                    results[job] = Some(JobResult {
                                        outcome,
                                        slot,
                                        wall_ns: since.elapsed().as_nanos() as f64,
                                        start_s: (since - self.epoch).as_secs_f64(),
                                    });
                                }
                            }
                        }
                    }
                }
            }
            Ok(Event::Closed { slot, gen, error }) => {
                if slot >= self.workers.len() || self.workers[slot].gen != gen {
                    return Ok(());
                }
                let state = self.workers[slot].state;
                let w = &mut self.workers[slot];
                let _ = w.child.kill();
                let status = w
                    .child
                    .wait()
                    .map(|s| describe_status(&s))
                    .unwrap_or_default();
                let mut detail = format!("worker pid {} exited: {status}", w.pid);
                if let Some(e) = error {
                    detail.push_str(&format!(" ({e})"));
                }
                let tail = w.tail();
                if !tail.is_empty() {
                    detail.push_str(&format!("; stderr: {tail}"));
                }
                match state {
                    State::Starting { .. } => {
                        return Err(MeasureError::WorkerStart(detail));
                    }
                    State::Busy { job, since, .. } => {
                        log.push(Decision::WorkerReplaced {
                            slot,
                            pid: w.pid,
                            reason: "crashed".into(),
                            candidate: jobs.get(job).map(|j| j.candidate.name.clone()),
                            detail: detail.clone(),
                        });
                        if job < results.len() {
                            results[job] = Some(JobResult {
                                outcome: Outcome::Crashed { detail },
                                slot,
                                wall_ns: since.elapsed().as_nanos() as f64,
                                start_s: (since - self.epoch).as_secs_f64(),
                            });
                        }
                    }
                    State::Idle => {
                        log.push(Decision::WorkerReplaced {
                            slot,
                            pid: w.pid,
                            reason: "exited while idle".into(),
                            candidate: None,
                            detail,
                        });
                    }
                }
                self.replaced += 1;
                self.spawn_into(slot)?;
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                return Err(MeasureError::Protocol("worker channel closed".into()));
            }
        }
        // Deadlines.
        let now = Instant::now();
        for slot in 0..self.workers.len() {
            match self.workers[slot].state {
                State::Busy {
                    job,
                    since,
                    deadline,
                    ..
                } if now >= deadline => {
                    let after_s = (now - since).as_secs_f64();
                    let pid = self.workers[slot].pid;
                    self.workers[slot].kill();
                    log.push(Decision::WorkerReplaced {
                        slot,
                        pid,
                        reason: "timeout".into(),
                        candidate: jobs.get(job).map(|j| j.candidate.name.clone()),
                        detail: format!("no answer after {after_s:.2} s"),
                    });
                    if job < results.len() {
                        results[job] = Some(JobResult {
                            outcome: Outcome::Timeout { after_s },
                            slot,
                            wall_ns: (now - since).as_nanos() as f64,
                            start_s: (since - self.epoch).as_secs_f64(),
                        });
                    }
                    self.replaced += 1;
                    self.spawn_into(slot)?;
                }
                State::Starting { since } if now >= since + start_timeout => {
                    return Err(MeasureError::WorkerStart(format!(
                        "worker did not become ready within {} s",
                        self.spec.start_timeout_s
                    )));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Stops every worker.
    pub fn shutdown(&mut self) {
        for w in &mut self.workers {
            if let Some(stdin) = w.stdin.as_mut() {
                let _ = write_frame(stdin, &Request::Shutdown);
            }
            w.stdin = None;
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        for w in &mut self.workers {
            loop {
                match w.child.try_wait() {
                    Ok(Some(_)) => break,
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(5))
                    }
                    _ => {
                        w.kill();
                        break;
                    }
                }
            }
        }
        self.workers.clear();
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// "exit code 1" / "signal 6 (SIGABRT)".
pub(crate) fn describe_status(s: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    if let Some(sig) = s.signal() {
        let name = match sig {
            4 => " (SIGILL)",
            6 => " (SIGABRT)",
            7 => " (SIGBUS)",
            8 => " (SIGFPE)",
            9 => " (SIGKILL)",
            11 => " (SIGSEGV)",
            _ => "",
        };
        format!("signal {sig}{name}")
    } else {
        format!("exit code {}", s.code().unwrap_or(-1))
    }
}
