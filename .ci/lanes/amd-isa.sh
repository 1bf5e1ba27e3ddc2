#!/usr/bin/env bash
# The RDNA ISA emulator lane: every kernel of the AMD test matrix (both renderers, gfx1100 and gfx1201, every dtype) run
# instruction by instruction and compared with numpy, the decoder checked against llvm-objdump-19 over the kit's
# kernels, then instruction coverage and emulator speed printed. Bounded: ~60 s on 2 cores. Parts skip themselves,
# with the reason, where clang-19, ld.lld, llvm-objdump-19 or llvmlite is missing.
set -o pipefail
t0=$(date +%s)
.venv/bin/python -m pytest -q -n 2 -m "slow or not slow" -p no:cacheprovider plugins/amd/tests/test_isa.py plugins/amd/tests/test_isa_decode.py
rc=$?
timeout 120 .venv/bin/python -m tinycore_amd.isa.measure || rc=1
# AMD_ISA_KIT=1 (long: ~7 min per target on 2 cores): the whole conformance kit as machine code on the emulator
if [ "${AMD_ISA_KIT:-0}" = 1 ]; then
  for dev in EMU+AMD:LLVM:gfx1100 EMU+AMD:HIP:gfx1100 EMU+AMD:LLVM:gfx1201 EMU+AMD:HIP:gfx1201; do
    echo "conformance kit as machine code on $dev:"
    .venv/bin/python -m pytest -q -n 2 --pyargs tinycore.testing --device=$dev -p tinycore_amd.isa.pytest_kit -p no:cacheprovider | tail -1
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
  done
fi
echo "amd-isa lane: $(( $(date +%s) - t0 ))s"
exit $rc
