#!/usr/bin/env bash
# tinycore.distributed over 2-4 OpenMPI ranks on this machine (loopback): collectives against numpy, tensors split over
# 4 ranks against numpy, 2-rank digits training (gradient buckets overlapped with backward, under TinyJit) equal to one
# process with the combined batch, a hung rank and a dead rank end the job within the timeout. Skips, saying why, when
# mpirun or mpi4py is missing. About 35 s on 2 idle cores, 80 s at load 15 (the one-process tests,
# tests/test_distributed.py, and the torchrun/gloo ones, tests/test_distributed_torchrun.py, run in the main suite;
# -m slow adds 3 ranks, sharded on 2 and 3 ranks and the training run without the JIT).
set -u
t0=$(date +%s)
if ! command -v mpirun >/dev/null 2>&1; then echo "lane mpi: skipped: mpirun is not installed (scripts/setup.d/mpi.sh installs openmpi-bin)"; exit 0; fi
if ! .venv/bin/python -c "import mpi4py" 2>/dev/null; then echo "lane mpi: skipped: mpi4py is not installed in .venv (scripts/setup.d/mpi.sh)"; exit 0; fi
timeout 300 .venv/bin/python -m pytest -q -p no:cacheprovider -m "not slow" tests/test_distributed_mpi.py
rc=$?
echo "lane mpi: rc=$rc in $(( $(date +%s) - t0 ))s"
exit $rc
