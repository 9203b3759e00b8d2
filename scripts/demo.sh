#!/usr/bin/env bash
# The main job, end to end, on a fresh machine:
#   1. installs what the demo needs (scripts/setup.sh demo: numpy, gymnasium) and the
#      `stratoscope` Python package (which puts `strato` on PATH);
#   2. analyses a real 2-rank GPU training trace shipped in fixtures/ (where the GPU time went,
#      the cross-stack breakdown, an HTML report);
#   3. records a live RL training loop (gymnasium CartPole + a numpy Q-network) unmodified and
#      prints its cross-stack breakdown, then writes its report.
# Outputs go to out/.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh demo
echo "== installing the stratoscope package (builds the Rust core: 18-30 minutes the first time on 2 cores)"
python3 -m pip install --quiet --disable-pip-version-check .
mkdir -p out

trace=fixtures/kineto/hta_trace_filter
echo; echo "== where did the GPU time go: $trace (2 ranks of a 128-GPU job)"
strato gpu-time "$trace" --window hta
echo; echo "== cross-stack breakdown per process"
strato breakdown "$trace"
strato report "$trace" -o out/hta_trace_filter.html

echo; echo "== live: recording examples/rl_cartpole.py"
strato record -o out/cartpole -- python3 examples/rl_cartpole.py
strato report out/cartpole -o out/cartpole.html
echo; echo "reports: out/hta_trace_filter.html out/cartpole.html"
