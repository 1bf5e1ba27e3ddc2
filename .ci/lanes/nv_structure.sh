#!/usr/bin/env bash
# NV without a GPU: the shared-memory tensor-core GEMM runs bit-exact in EMU+NV, the emulator catches broken kernels,
# ptxas -v shows no spills and >= 2 blocks/SM on an H200, the SASS has HMMA/LDSM/LDGSTS (each part skips with its
# reason where NVRTC/ptxas/cuobjdump are missing). Conv as implicit GEMM and dynamic shared memory likewise. About 60 s on 2 cores.
set -u
t0=$(date +%s)
.venv/bin/python -m pytest -q -p no:cacheprovider plugins/nv/tests/test_nv_gemm.py plugins/nv/tests/test_nv_conv_gemm.py plugins/nv/tests/test_nv_dynamic_smem.py bench/test_gpu_bench_smoke.py
rc=$?
echo "lane nv_structure: rc=$rc in $(( $(date +%s) - t0 ))s"
exit $rc
