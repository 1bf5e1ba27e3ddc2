#!/usr/bin/env bash
# AMD the whole way down without AMD hardware: the conformance kit on DEV=KFD+AMD under the mock KFD driver (MOCKGPU=1),
# every kernel's machine code executed by the RDNA ISA emulator (tinycore_amd.isa), for gfx1100 and gfx1201 with the
# LLVM and HIP renderers. A bounded subset by default (the emulator runs ~1e4 wave instructions/s); AMD_KFD_FULL=1 runs the
# whole kit. Prints pass/fail per combination, then instruction coverage (distinct opcodes executed / emitted by our
# compilers over the run) and the emulator's speed.
set -uo pipefail
cd "$(dirname "$0")/../.."
start=$(date +%s)
PY=.venv/bin/python
if ! $PY -c "import tinycore_amd.isa" 2>/dev/null; then
  if [ -d plugins/amd/tinycore_amd/isa ]; then echo "amd-kfd: tinycore_amd.isa does not import:"; $PY -c "import tinycore_amd.isa"; exit 1; fi
  echo "amd-kfd: skipped, this tree has no RDNA ISA emulator (plugins/amd/tinycore_amd/isa)"; exit 0
fi
# the subset: small kernels of every kind the kit has (elementwise, reduce, matmul, movement, indexing, casts, jit)
SUBSET=${AMD_KFD_SUBSET:-"(test_tiny and not test_random and not test_plus_big) or test_add or test_mul or test_sum or test_max or test_matmul or test_cast or test_where or test_exp or test_relu or test_arange or test_gather or test_cumsum or test_sqrt or test_div"}
K=(-k "$SUBSET"); [ "${AMD_KFD_FULL:-0}" = 1 ] && K=()
LIMIT=${AMD_KFD_TIMEOUT:-120}   # seconds per combination
stats=$(mktemp -d)
rc=0
for arch in gfx1100 gfx1201; do
  for ren in LLVM HIP; do
    dev="KFD+AMD:$ren:$arch"
    if [ $ren = HIP ] && ! $PY -c "from tinycore_amd.compiler import find_clang; exit(find_clang('$arch') is None)"; then
      echo "amd-kfd: $dev skipped: no clang with the amdgcn target for $arch (scripts/setup installs clang-19)"; continue
    fi
    t0=$(date +%s)
    line=$(MOCKGPU=1 MOCKGPU_STATS="$stats/$arch" timeout "$LIMIT" $PY -m pytest -q -n 2 --pyargs tinycore.testing --device="$dev" "${K[@]}" \
           -p no:cacheprovider 2>&1 | tail -1)
    r=${PIPESTATUS[0]}
    echo "amd-kfd: $dev: $line ($(( $(date +%s) - t0 ))s)"
    [ "$r" -eq 0 ] || rc=1
  done
done
$PY - "$stats" <<'PYEOF'
import glob, json, os, sys
for d in sorted(glob.glob(os.path.join(sys.argv[1], "*"))):
  arch, n, instr, secs, ex, em = os.path.basename(d), 0, 0, 0.0, set(), set()
  for f in glob.glob(os.path.join(d, "mockgpu-*.json")):
    s = json.load(open(f))
    n, instr, secs = n + s["dispatches"], instr + s["instructions"], secs + s["emulator_seconds"]
    for a in s["archs"].values(): ex |= set(a["executed"]); em |= set(a["emitted"])
  cov = f"{len(ex & em)}/{len(em)} emitted opcodes executed" if em else f"{len(ex)} opcodes executed (no llvm-objdump for the emitted set)"
  speed = f", {instr / secs:,.0f} wave instructions/s" if secs and instr else ""
  print(f"amd-kfd: {arch}: {n} dispatches, {instr:,} instructions, {cov}{speed}")
  if em - ex: print(f"amd-kfd: {arch}: emitted, never executed: {' '.join(sorted(em - ex))}")
PYEOF
rm -rf "$stats"
echo "amd-kfd: $(( $(date +%s) - start ))s"
exit $rc
