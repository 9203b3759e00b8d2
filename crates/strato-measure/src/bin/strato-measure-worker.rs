//! The measurement worker as its own binary: a warm process with one OpenCL context and one
//! profiling queue, serving framed requests on stdin and answering on stdout (see
//! `strato_measure::protocol`). `strato measure --worker` runs the same loop.

fn main() -> std::process::ExitCode {
    strato_measure::worker::main()
}
