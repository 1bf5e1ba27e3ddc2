"""The programs the CPU plugin's memory-check tests run, each in a fresh Python process: test_debug_buffers (guard pages
and canaries: a hit ends the process) and test_sanitize (ASan must be loaded before anything else). A program calls
either a hand-written C kernel or a kernel of the real pipeline whose store index was moved (a planted overrun)."""
import os, subprocess, sys, textwrap

def run_program(code: str, env: dict | None = None, faulthandler: bool = False) -> subprocess.CompletedProcess:
  """`code` (dedented) in a new interpreter with `env` (default: this one's, minus any sanitizer preload)."""
  if env is None: env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "TINYCORE_SANITIZE")}
  args = [sys.executable, *(["-X", "faulthandler"] if faulthandler else []), "-c", textwrap.dedent(code)]
  return subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)

def hand_kernel(name: str, body: str, ctype: str = "float", n: int = 10, setup: str = "") -> str:
  """A program running C kernel `name(out, in)` with loop body `body` over i in [0, n) on two fresh n-element buffers of
  `ctype` (`setup` runs between allocation and the call); it prints NO REPORT if nothing stopped it."""
  ct = {"unsigned short": "ushort"}.get(ctype, ctype)
  return f"""
import ctypes
from tinycore import Device
from tinycore_cpu.runtime import CPUProgram
d = Device["CPU"]
src = '''void {name}({ctype}* restrict out, const {ctype}* restrict in, const long long core_start, const long long core_end) {{
  for (int i = core_start; i < core_end; i++) {{ {body} }} }}'''
prg = CPUProgram("{name}", d.compiler.compile(src))
nbytes = {n} * ctypes.sizeof(ctypes.c_{ct})
out, inp = d.allocator.alloc(nbytes), d.allocator.alloc(nbytes)
{setup}
prg(out, inp, global_size=({n}, 1, 1))
print("NO REPORT")
"""

def planted_kernel(device: str, offset: int, n: int = 1000) -> str:
  """A program running the real pipeline's kernel for `device` over n floats with its store index moved `offset`
  elements on; it prints the kernel's name first, and NO REPORT if nothing stopped it."""
  return f"""
from tinycore import Device
from tinycore.testing.planted import pipeline_program, plant_index
d = Device["{device}"]
p = pipeline_program("{device}", {n})
prg = d.runtime(p.name, d.compiler.compile(d.renderer.render(p.name, plant_index(p.uops, 0, {offset}))))
out, inp = d.allocator.alloc(4 * {n}), d.allocator.alloc(4 * {n})
print("kernel", p.name, flush=True)
prg(out, inp, global_size=p.global_size, local_size=p.local_size)
print("NO REPORT")
"""

def kernel_name(p: subprocess.CompletedProcess) -> str:
  """The name a planted_kernel program printed before running it."""
  return p.stdout.split("kernel ", 1)[-1].split()[0] if "kernel " in p.stdout else "?"
