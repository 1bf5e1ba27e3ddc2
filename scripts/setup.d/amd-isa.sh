# AMD ISA emulator tests (plugins/amd/tests/test_isa_decode.py): llvm-objdump-19 is the decoding oracle, and
# tinycore_amd/isa/gen_opcodes.py regenerates the opcode tables with llvm-mc-19. Both come with Debian's llvm-19.
sys_step "command -v llvm-objdump-19 >/dev/null && command -v llvm-mc-19 >/dev/null" "optional: llvm-19 (llvm-objdump-19, llvm-mc-19; ~100 MB)" \
  "the AMD ISA decoder's check against LLVM" llvm-19
