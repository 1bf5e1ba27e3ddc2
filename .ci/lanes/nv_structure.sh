#!/usr/bin/env bash
# NV without a GPU: the shared-memory tensor-core GEMM runs bit-exact in EMU+NV, the emulator catches broken kernels,
# ptxas -v shows no spills and >= 2 blocks/SM on an H200, the SASS has HMMA/LDSM/LDGSTS (each part skips with its
# reason where NVRTC/ptxas/cuobjdump are missing). Conv as implicit GEMM, dynamic shared memory and the fp32 FMA GEMM (opt_simt.py: LDGSTS.128/LDS.128/STG.128) likewise.
# The tensor-core flash attention forward (codegen/attention_tc.py): EMU+NV against float64, ptxas/SASS at D=64.
set -u
t0=$(date +%s)
.venv/bin/python -m pytest -q -p no:cacheprovider plugins/nv/tests/test_nv_gemm.py plugins/nv/tests/test_nv_conv_gemm.py plugins/nv/tests/test_nv_dynamic_smem.py plugins/nv/tests/test_nv_simt_gemm.py plugins/nv/tests/test_nv_attention.py bench/test_gpu_bench_smoke.py
rc=$?
echo "lane nv_structure: rc=$rc in $(( $(date +%s) - t0 ))s"
exit $rc
