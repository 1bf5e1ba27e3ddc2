#!/usr/bin/env bash
# NV fp8 tensor cores without a GPU (plugins/nv/tests/test_nv_fp8_gemm.py): mma.sync.m16n8k32 e4m3/e5m2 kernels run
# bit-exact in EMU+NV against an independent fp8 decoder; ptxas -v for sm_89/sm_90 shows no spills and >= 2 blocks/SM;
# the SASS has QMMA (sm_89) or F2FP+HMMA (sm_90), LDSM and LDGSTS (parts skip with their reason where NVRTC, ptxas or
# cuobjdump are missing).
set -u
t0=$(date +%s)
.venv/bin/python -m pytest -q -p no:cacheprovider plugins/nv/tests/test_nv_fp8_gemm.py
rc=$?
echo "lane nv_fp8: rc=$rc in $(( $(date +%s) - t0 ))s"
exit $rc
