#!/usr/bin/env bash
# The GPU checks of reap-rnn-kernels and reap-replay, as one call on the device machine.
#
# Prepare here first: ../shared/gpu/prepare.sh (wheels into .gpu/, with its install.sh). Then, on
# the GPU machine (the `device` tool's `run`, carry [".gpu"]):
#     bash tools/gpu_checks.sh            # or PARTS="rnn-tests rnn-bench" bash tools/gpu_checks.sh
# Parts (PARTS, in this order): rnn-tests, rnn-bench, replay-tests, replay-bench; each is bounded
# by `timeout` (T_<PART> seconds) and logs to $OUT/<part>.log (/tmp/gpu-logs without $OUT).
# The workspace's sources come first on PYTHONPATH, so a change since prepare.sh is what runs.
set -u
source .gpu/install.sh
export PYTHONPATH="$(ls -d "$PWD"/packages/*/src "$PWD"/plugins/*/src | tr '\n' ':')$PYTHONPATH"
out=${OUT:-/tmp/gpu-logs}; mkdir -p "$out"
nvidia-smi -L | tee "$out/gpu.txt"
pytest_gpu="python3 -m pytest -o addopts= --import-mode=importlib -p no:cacheprovider -q -rs"
run() {  # name, seconds, command...
  local name=$1 limit=$2; shift 2
  echo "=== $name ($(date +%T), at most ${limit}s)"
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  echo "rc=$?"; tail -n "${TAIL:-25}" "$out/$name.log"
}
for part in ${PARTS:-rnn-tests rnn-bench replay-tests replay-bench}; do
  case $part in
    rnn-tests) run rnn-tests "${T_RNN_TESTS:-180}" $pytest_gpu packages/rnn-kernels/tests/test_triton*.py \
                 packages/rnn-kernels/tests/test_exactness.py packages/rnn-kernels/tests/test_options.py \
                 packages/rnn-kernels/tests/test_python_based.py ;;
    rnn-bench) run rnn-bench "${T_RNN_BENCH:-240}" python3 tools/bench_rnn.py --device cuda --rounds 10 \
                 --torchrl-backends pad,triton --torchrl-timeout 30 ;;
    replay-tests) run replay-tests "${T_REPLAY_TESTS:-120}" $pytest_gpu packages/replay/tests/test_tree_kernels.py \
                    packages/replay/tests/test_cuda.py ;;
    replay-bench) run replay-bench "${T_REPLAY_BENCH:-120}" python3 tools/bench_replay.py --device cuda ;;
    *) echo "unknown part $part (rnn-tests, rnn-bench, replay-tests, replay-bench)"; exit 2 ;;
  esac
done
