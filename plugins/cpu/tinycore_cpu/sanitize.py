"""The sanitizer lane: `TINYCORE_SANITIZE=address,undefined` compiles C kernels with ASan/UBSan instrumentation.

An instrumented shared object can only be loaded into a process that already has the sanitizer runtime, and ASan
must come first (LD_PRELOAD), so `runtime_env()` gives the environment to start Python under and `check_loaded()`
refuses to compile for a process that lacks it, instead of failing later inside dlopen.

`python -m tinycore_cpu.sanitize [LOG_DIR]` prints that environment as KEY=VALUE lines (scripts/sanitize uses it)."""
from __future__ import annotations
import ctypes, functools, os, platform, subprocess

SUPPORTED = ("address", "undefined")
# halt on the first report (UBSan would only warn otherwise), keep frame pointers for readable ASan stacks
COMMON_FLAGS = ["-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g1"]

def requested() -> tuple[str, ...]:
  """The sanitizers TINYCORE_SANITIZE asks for, validated; () when unset."""
  raw = os.getenv("TINYCORE_SANITIZE", "").strip()
  if raw in ("", "0"): return ()
  names = tuple(sorted({s.strip().lower() for s in raw.split(",") if s.strip()}))
  if (bad := [s for s in names if s not in SUPPORTED]):
    raise ValueError(f"TINYCORE_SANITIZE={raw!r}: unknown sanitizer {', '.join(bad)} (supported: {', '.join(SUPPORTED)})")
  return names

def is_clang(cc: str) -> bool: return "clang" in os.path.basename(cc)

def compile_flags(cc: str, names: tuple[str, ...]) -> list[str]:
  if not names: return []
  # clang links its ASan runtime statically into executables only; a shared object must use the shared runtime
  return [f"-fsanitize={','.join(names)}", *COMMON_FLAGS, *(["-shared-libasan"] if is_clang(cc) and "address" in names else [])]

@functools.cache
def _print_file(cc: str, name: str) -> str | None:
  p = subprocess.run([cc, f"-print-file-name={name}"], capture_output=True, text=True)
  path = p.stdout.strip()
  return path if p.returncode == 0 and os.path.isabs(path) and os.path.exists(path) else None

def runtime_libs(cc: str, names: tuple[str, ...]) -> list[str]:
  """Shared runtime libraries to preload for kernels `cc` compiles with `names`, ASan first."""
  if not names: return []
  if is_clang(cc):
    # clang's ASan runtime carries the UBSan handlers; UBSan alone has its own standalone runtime. Older layouts name
    # it per arch (lib/linux/libclang_rt.asan-x86_64.so), per-target ones don't (lib/<triple>/libclang_rt.asan.so).
    rt = "asan" if "address" in names else "ubsan_standalone"
    p = subprocess.run([cc, "-print-runtime-dir"], capture_output=True, text=True)
    found = _print_file(cc, f"libclang_rt.{rt}-{platform.machine()}.so") or \
            next((f for f in [os.path.join(p.stdout.strip(), f"libclang_rt.{rt}.so")] if p.returncode == 0 and os.path.exists(f)), None)
    if found is None: raise FileNotFoundError(f"{os.path.basename(cc)} has no shared libclang_rt.{rt} runtime: install its compiler-rt package")
    return [found]
  wanted = [w for s, w in (("address", "libasan.so"), ("undefined", "libubsan.so")) if s in names]
  libs = [_print_file(cc, w) for w in wanted]
  if None in libs:
    raise FileNotFoundError(f"{os.path.basename(cc)} has no {wanted[libs.index(None)]}: install its sanitizer runtime (libasan8/libubsan1)")
  return libs

def runtime_env(cc: str, names: tuple[str, ...], log_dir: str | None = None) -> dict[str, str]:
  """Environment for a Python process that loads kernels compiled with `names`. `log_dir`: reports go to files
  there (one per process) as well as being fatal, so a runner can tell a sanitizer abort from an ordinary crash."""
  # LRU=0: a freed buffer goes back to malloc (ASan quarantines it) instead of a reuse pool, so use-after-free shows
  env = {"TINYCORE_SANITIZE": ",".join(names), "LD_PRELOAD": " ".join(runtime_libs(cc, names)), "LRU": "0"}
  # detect_leaks=0: CPython and numpy keep allocations alive until exit by design; those aren't kernel bugs
  asan = ["detect_leaks=0", "halt_on_error=1", "abort_on_error=1", "allocator_may_return_null=1", "detect_odr_violation=0"]
  ubsan = ["halt_on_error=1", "abort_on_error=1", "print_stacktrace=1"]
  if log_dir is not None:
    asan.append(f"log_path={os.path.join(log_dir, 'asan')}")
    ubsan.append(f"log_path={os.path.join(log_dir, 'ubsan')}")
  env["ASAN_OPTIONS"], env["UBSAN_OPTIONS"] = ":".join(asan), ":".join(ubsan)
  return env

def asan_loaded() -> bool:
  """Whether this process runs with an ASan runtime (then malloc is ASan's and host buffers must come from it)."""
  return hasattr(ctypes.CDLL(None), "__asan_init")

def check_loaded(cc: str, names: tuple[str, ...]) -> None:
  if "address" in names and not asan_loaded():
    libs = " ".join(runtime_libs(cc, names))
    raise RuntimeError(f"TINYCORE_SANITIZE={','.join(names)}: this Python process has no ASan runtime, so it can't load "
                       f"instrumented kernels. Start it as\n  LD_PRELOAD=\"{libs}\" ASAN_OPTIONS=detect_leaks=0 python ...\n"
                       f"or use scripts/sanitize")

if __name__ == "__main__":
  import sys
  from tinycore_cpu.compiler_c import find_cc
  cc = find_cc()
  if cc is None: sys.exit("no C compiler on PATH (tried $CC, clang, gcc, cc)")
  try:
    names = requested() or SUPPORTED
    env = {"CC": cc, **runtime_env(cc, names, sys.argv[1] if len(sys.argv) > 1 else None)}   # CC: the runtime must match the compiler
  except (ValueError, FileNotFoundError) as e: sys.exit(str(e))
  for k, v in env.items(): print(f"{k}={v}")
