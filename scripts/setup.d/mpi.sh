# Distributed tests (tests/test_distributed*.py, .ci/lanes/mpi.sh): OpenMPI from Debian launches 2-4 ranks on this one
# machine over loopback; mpi4py (built against that OpenMPI) is the host collective engine. Without them the
# multi-process tests skip with the reason.
sys_step "command -v mpirun >/dev/null 2>&1" "optional: OpenMPI (openmpi-bin, libopenmpi-dev, ~60 MB)" \
  "the multi-process distributed tests" openmpi-bin libopenmpi-dev
step "optional: mpi4py (it loads the system libmpi at run time), the host collective engine of tinycore.distributed"
if command -v mpicc >/dev/null 2>&1; then
  pip install "mpi4py>=4,<5" || echo "setup: mpi4py did not install: the distributed tests skip with the reason"
else
  echo "setup: no mpicc: mpi4py skipped, the distributed tests skip with the reason"
fi
# the NCCL engine of tinycore-nv loads libnccl from NVIDIA's wheel (no GPU needed to load it and check its symbols)
step "optional: NCCL (nvidia-nccl-cu13 wheel) for the NV plugin's collective engine load test"
pip install "nvidia-nccl-cu13>=2.27,<3" || echo "setup: nvidia-nccl-cu13 unavailable: the NCCL load test skips with the reason"
