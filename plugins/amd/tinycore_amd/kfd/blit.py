"""The copy kernel the KFD runtime moves bytes with (between host-visible GTT staging memory and VRAM, or within VRAM):
AMDGPU LLVM IR built by our own LLVM compiler, so copies run through the same loader, queue and packets as any kernel.

Lane i copies bytes [16i, 16i+16) with one 16-byte load and store (unaligned is fine: KFD runs compute with unaligned
access enabled), the last partial unit byte by byte."""
from __future__ import annotations

NAME, LANES, UNIT = "tinycore_blit", 256, 16

SOURCE = f"""target triple = "amdgcn-amd-amdhsa"
define amdgpu_kernel void @{NAME}(ptr addrspace(1) %dst, ptr addrspace(1) %src, i64 %n) #0 {{
entry:
  %g = call i32 @llvm.amdgcn.workgroup.id.x()
  %l = call i32 @llvm.amdgcn.workitem.id.x()
  %g64 = zext i32 %g to i64
  %l64 = zext i32 %l to i64
  %gs = mul i64 %g64, {LANES}
  %i = add i64 %gs, %l64
  %start = mul i64 %i, {UNIT}
  %end = add i64 %start, {UNIT}
  %full = icmp ule i64 %end, %n
  br i1 %full, label %vec, label %tail
vec:
  %s = getelementptr i8, ptr addrspace(1) %src, i64 %start
  %d = getelementptr i8, ptr addrspace(1) %dst, i64 %start
  %v = load <4 x i32>, ptr addrspace(1) %s, align 1
  store <4 x i32> %v, ptr addrspace(1) %d, align 1
  ret void
tail:
  %some = icmp ult i64 %start, %n
  br i1 %some, label %loop, label %exit
loop:
  %k = phi i64 [ %start, %tail ], [ %k1, %loop ]
  %sb = getelementptr i8, ptr addrspace(1) %src, i64 %k
  %db = getelementptr i8, ptr addrspace(1) %dst, i64 %k
  %b = load i8, ptr addrspace(1) %sb, align 1
  store i8 %b, ptr addrspace(1) %db, align 1
  %k1 = add i64 %k, 1
  %more = icmp ult i64 %k1, %n
  br i1 %more, label %loop, label %exit
exit:
  ret void
}}
declare i32 @llvm.amdgcn.workgroup.id.x()
declare i32 @llvm.amdgcn.workitem.id.x()
attributes #0 = {{ nounwind "amdgpu-flat-work-group-size"="1,{LANES}" "amdgpu-no-implicitarg-ptr" }}
!llvm.module.flags = !{{!0}}
!0 = !{{i32 1, !"amdhsa_code_object_version", i32 500}}
"""

def grid(nbytes: int) -> int:
  """Work-groups of LANES lanes that cover `nbytes`."""
  units = (nbytes + UNIT - 1) // UNIT
  return max(1, (units + LANES - 1) // LANES)
