"""Checking MSL without a Metal compiler (there is none off macOS).

`structure(src)`: pure-Python checks: balanced (), [], {}; one `kernel void`; `[[buffer(n)]]` indices unique and
contiguous from 0; an address space on every pointer parameter; every identifier declared before its use.
`clang_check(src)`: type-checks the source as C++17 with clang against a shim `metal_stdlib` that models MSL closely
enough to catch real mistakes: address spaces are clang address spaces (device=1, constant=2, threadgroup=3), so
dropping or mixing one is an error; vectors are ext_vector_types with MSL's `float4(a, b, c, d)` constructors;
as_type, select, precise::, simdgroup_matrix are declared with their MSL signatures. It can't check what only
Apple's compiler knows (exact overload sets, bfloat arithmetic, limits): a pass is evidence, not proof."""
from __future__ import annotations
import os, re, shutil, subprocess, tempfile

_SHIM = r"""#pragma once
#define kernel
#define device __attribute__((address_space(1)))
#define constant __attribute__((address_space(2)))
#define threadgroup __attribute__((address_space(3)))
#define INFINITY __builtin_inff()
#define NAN __builtin_nanf("")
typedef unsigned char uchar; typedef unsigned short ushort; typedef unsigned int uint; typedef long long tc_long; typedef unsigned long long tc_ulong;
typedef _Float16 half;
typedef __fp16 bfloat;   /* a 16-bit float distinct from half; arithmetic promotes to float */
namespace metal {
template <class V> struct vsize { enum { n = 1 }; };
#define TC_VEC(T, N) typedef T T##N __attribute__((ext_vector_type(N))); typedef T packed_##T##N __attribute__((ext_vector_type(N), aligned(sizeof(T)))); \
  template <> struct vsize<T##N> { enum { n = N }; };
#define TC_VECS(T) TC_VEC(T, 2) TC_VEC(T, 3) TC_VEC(T, 4)
TC_VECS(char) TC_VECS(uchar) TC_VECS(short) TC_VECS(ushort) TC_VECS(int) TC_VECS(uint) TC_VECS(half) TC_VECS(float)
TC_VECS(tc_long) TC_VECS(tc_ulong) TC_VECS(bfloat)
template <class V, class S> V tc_make(S s) { if constexpr (vsize<S>::n > 1) { static_assert(vsize<S>::n == vsize<V>::n, "vector width"); return __builtin_convertvector(s, V); } else return V(s); }
template <class V, class A, class B, class... R> V tc_make(A a, B b, R... r) {
  static_assert(2 + sizeof...(R) == vsize<V>::n, "vector constructor arity"); V v; int i = 0; v[i++] = a; v[i++] = b; ((v[i++] = r), ...); return v; }
template <class T, class F> T as_type(F f) { static_assert(sizeof(T) == sizeof(F), "as_type size"); return __builtin_bit_cast(T, f); }
template <class T, class C> T select(T a, T b, C c) { return c ? b : a; }
enum class mem_flags { mem_none, mem_device, mem_threadgroup, mem_texture };
void threadgroup_barrier(mem_flags);
float exp2(float); float log2(float); float sin(float); float sqrt(float); float trunc(float); float pow(float, float); float fma(float, float, float);
half exp2(half); half log2(half); half sin(half); half sqrt(half); half trunc(half); half pow(half, half); half fma(half, half, half);
template <class V> auto isnan(V v) -> decltype(v != v) { return v != v; }
float fabs(float); float ldexp(float, int); bool isnan(float); bool isinf(float); bool isnan(half); bool isinf(half); bool signbit(float); bool signbit(half);
namespace precise { float exp2(float); float log2(float); float sin(float); float sqrt(float); float pow(float, float); }
template <class T, int R, int C> struct simdgroup_matrix { T e[2]; T* thread_elements() { return e; } };
template <class D, class A, class B> void simdgroup_multiply_accumulate(simdgroup_matrix<D, 8, 8>&, simdgroup_matrix<A, 8, 8>, simdgroup_matrix<B, 8, 8>, simdgroup_matrix<D, 8, 8>);
}
"""
# MSL constructors: `float4(a, b)` is a function-like macro over the type name, so `float4 x` still names the type
_CTORS = "".join(f"#define {t}{n}(...) (metal::tc_make<metal::{t}{n}>(__VA_ARGS__))\n" for t in
                 ("char", "uchar", "short", "ushort", "int", "uint", "half", "float", "bfloat") for n in (2, 3, 4)) + \
         "".join(f"#define packed_{t}{n}(...) (metal::tc_make<metal::packed_{t}{n}>(__VA_ARGS__))\n" for t in
                 ("char", "uchar", "short", "ushort", "int", "uint", "half", "float") for n in (2, 3, 4)) + \
         "".join(f"typedef metal::tc_{t}{n} {t}{n};\n#define {t}{n}(...) (metal::tc_make<metal::tc_{t}{n}>(__VA_ARGS__))\n"
                 for t in ("long", "ulong") for n in (2, 3, 4)) + \
         "".join(f"typedef metal::int{n} bool{n};\n#define bool{n}(...) (metal::tc_make<metal::int{n}>(__VA_ARGS__))\n" for n in (2, 3, 4))
# clang has no bool vectors; float/int comparisons give int masks, so boolN is intN here

def find_clang() -> str | None:
  """TINYCORE_MSL_CLANG, else a plain clang++/clang, else the newest versioned one (Debian's clang-19 has only clang++-19)."""
  names = ["clang++", "clang", *[f"clang++-{v}" for v in range(30, 13, -1)]]
  return os.environ.get("TINYCORE_MSL_CLANG") or next((p for n in names if (p := shutil.which(n))), None)

def clang_check(src: str, clang: str | None = None) -> str:
  """'' when clang accepts `src` against the shim, else its diagnostics. Raises FileNotFoundError without clang."""
  if (clang := clang or find_clang()) is None: raise FileNotFoundError("no clang++ to type-check MSL with")
  with tempfile.TemporaryDirectory(prefix="tc-msl-") as d:
    with open(os.path.join(d, "metal_stdlib"), "w") as f: f.write(_SHIM + _CTORS)
    with open(os.path.join(d, "metal_simdgroup_matrix"), "w") as f: f.write("#pragma once\n")
    # MSL's 64-bit `long`/`ulong` scalars: C++'s `long` is a modifier, so they get typedef names here
    body = re.sub(r"\b(u?long)\b", r"tc_\1", src)
    # a threadgroup array declared in a kernel is static storage in C++; `threadgroup` in a pointer cast is only the space
    body = re.sub(r"^(\s*)threadgroup\b", r"\1static threadgroup", body, flags=re.M)
    with open(os.path.join(d, "k.metal"), "w") as f: f.write(body)
    # arm64 has _Float16 (x86 clang 14 hasn't); no system header is read
    p = subprocess.run([clang, "--target=arm64-apple-macos", "-x", "c++", "-std=c++17", "-fsyntax-only", "-nostdinc++", "-Wno-unknown-attributes",
                        "-ferror-limit=5", f"-I{d}", os.path.join(d, "k.metal")], capture_output=True, text=True, timeout=60)
    return "" if p.returncode == 0 else p.stderr

# ---- structure, in Python
_KEYWORDS = {"if", "else", "for", "return", "int", "uint", "float", "half", "bfloat", "bool", "char", "uchar", "short", "ushort",
  "long", "ulong", "void", "kernel", "device", "constant", "threadgroup", "static", "inline", "using", "namespace", "metal",
  "precise", "true", "false", "const", "auto", "uint3", "mem_flags", "mem_threadgroup", "NAN", "INFINITY", "simdgroup_matrix"}
_BUILTINS = {"exp2", "log2", "sin", "sqrt", "trunc", "pow", "fma", "fabs", "ldexp", "isnan", "isinf", "select", "as_type",
  "threadgroup_barrier", "simdgroup_multiply_accumulate", "thread_elements", "buffer", "threadgroup_position_in_grid",
  "thread_position_in_threadgroup", "x", "y", "z"}
_VEC = re.compile(r"^(packed_)?(bool|char|uchar|short|ushort|int|uint|long|ulong|half|float|bfloat)[234]$")
_DECL = re.compile(r"\b(?:(?:device|threadgroup|constant|const)\s+)*([A-Za-z_]\w*)\s*[*&]?\s+([A-Za-z_]\w*)\s*(?:=|\[|\)|,|;)")

def structure(src: str) -> list[str]:
  """Problems found in `src` (empty: none)."""
  errs: list[str] = []
  code = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
  code = re.sub(r"//[^\n]*|^#[^\n]*", "", code, flags=re.M)
  stack = []
  for ch in code:
    if ch in "([{": stack.append(ch)
    elif ch in ")]}":
      if not stack or "([{"[")]}".index(ch)] != stack.pop(): errs.append(f"unbalanced {ch!r}"); break
  if stack and not errs: errs.append(f"unclosed {stack[-1]!r}")
  kernels = re.findall(r"kernel\s+void\s+(\w+)\s*\(", code)
  if len(kernels) != 1: errs.append(f"want exactly one kernel, found {kernels}")
  m = re.search(r"kernel\s+void\s+\w+\s*\((.*?)\)\s*\{", code, re.S)
  if not m: return errs + ["no kernel signature"]
  params = [p.strip() for p in m.group(1).split(",")]
  idx = [int(x) for x in re.findall(r"\[\[buffer\((\d+)\)\]\]", m.group(1))]
  if sorted(idx) != list(range(len(idx))): errs.append(f"buffer indices {idx} are not 0..{len(idx) - 1}")
  for p in params:
    if ("*" in p or "&" in p) and not re.match(r"(const\s+)?(device|constant|threadgroup)\b", p):
      errs.append(f"parameter without an address space: {p!r}")
    if ("*" in p or "&" in p) and "[[buffer(" not in p: errs.append(f"pointer parameter without [[buffer(n)]]: {p!r}")
  for s in re.findall(r"\(\s*((?:\w+\s+)*\w+)\s*\*\s*\)", code):   # pointer casts keep an address space too
    if not re.match(r"(device|threadgroup|constant)\b", s): errs.append(f"pointer cast without an address space: ({s}*)")
  # declared-before-use over the kernel body (helpers above it are trusted: they're fixed text)
  declared = {n for _, n in _DECL.findall(m.group(1) + ",")}
  helpers = set(re.findall(r"\b(\w+)\s*\(", code[:m.start()]))
  body = code[m.end():]
  for ln, text in enumerate(body.split("\n"), 1):
    for t, n in _DECL.findall(text):
      if t not in ("return",): declared.add(n)
    for mm in re.finditer(r"(?<![\w.:])([A-Za-z_]\w*)", text):
      w = mm.group(1)
      if w in declared or w in _KEYWORDS or w in _BUILTINS or w in helpers or _VEC.match(w) or w.startswith("__tc_"): continue
      errs.append(f"line {ln}: {w!r} used before it is declared"); break
  return errs
