"""The `tinyctl` command: device list, plugins, smi, doctor, viz."""
from __future__ import annotations
import json, sys, time, warnings
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from tinyctl import failures
from tinyctl.failures import EXIT_HELP, user_errors

class _Command(typer.core.TyperCommand):
  """typer's command, with each argument listed under its metavar alone: typer appends the Python annotation
  (`DEV <list[str]>`), which says nothing to someone typing a device name; `...` marks one that takes several."""
  def format_options(self, ctx, formatter) -> None:
    args, opts = [], []
    for p in self.get_params(ctx):
      if (rv := p.get_help_record(ctx)) is None: continue
      if p.param_type_name != "argument": opts.append(rv); continue
      args.append(((p.metavar or (p.name or "").upper()) + ("..." if p.nargs != 1 else ""), rv[1]))
    for title, rows in (("Arguments", args), ("Options", opts)):
      if rows:
        with formatter.section(title): formatter.write_dl(rows)

# rich_markup_mode=None: click's plain help, without typer's `<bool>`/`<float>` type labels; our metavars say what a value is
app = typer.Typer(help="List, check and monitor tinycore devices and backend plugins.\n\n" + EXIT_HELP, no_args_is_help=True,
                  add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)
device_app = typer.Typer(help="Devices provided by the installed plugins.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(device_app, name="device")

@app.callback()
def _root(debug: bool = typer.Option(False, "--debug", help="on an error, show the full traceback (so does DEBUG=1)")) -> None:
  failures.debug_flag = debug

def _console() -> Console: return Console(width=200 if not sys.stdout.isatty() else None)

def _quiet_load():
  """Load plugins (and call their hooks once) with the warnings collected: `tinyctl plugins` is where broken ones are explained."""
  from tinycore import plugins
  with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    recs = plugins.plugin_status()
  return recs, [x for x in w if issubclass(x.category, plugins.PluginWarning)]

@device_app.command("list", cls=_Command, short_help="Check every device: PASS/FAIL, its DEV=, why it fails.")
@user_errors
def device_list(devs: list[str] = typer.Argument(None, metavar="DEV", help="DEV strings to check (e.g. CPU, CPU:LLVM, PCI+AMD); all when omitted"),
                as_json: bool = typer.Option(False, "--json", help="machine-readable output")) -> None:
  """Every installed device x interface x renderer: how many, PASS/FAIL of a tiny real computation, its DEV=, and why it fails."""
  from tinyctl.checks import targets, check, resolve, matches
  from tinycore import progress
  recs, _ = _quiet_load()
  unwell = [r for r in recs if r.shown_status in ("broken", "skipped", "hook-failed")]
  wanted = [resolve(d) for d in devs or []]   # an unknown or malformed DEV: a usage error (exit 2) through user_errors
  rows = [t for t in targets() if not wanted or any(matches(t, w) for w in wanted)]
  with progress.Bar("checking", total=len(rows)) as bar:   # seconds on a first run (each check compiles a kernel)
    for t in rows:
      bar.update(bar.done, detail=t.dev)
      check(t)
      bar.advance()
  if as_json: typer.echo(json.dumps([t.as_dict() for t in rows], indent=1))
  else:
    tab = Table(title="tinycore devices")
    for c in ("DEVICE", "IFACE", "RENDERER", "COUNT", "RESULT", "DEV=", "WHY"): tab.add_column(c, overflow="fold")
    for t in rows:
      res = "[green]PASS[/]" if t.ok else "[red]FAIL[/]"
      iface = t.iface + ("" if t.kind == "real" else f" ({t.kind})")
      tab.add_row(t.device + (" *" if t.default else ""), iface, t.renderer or "-", str(t.count), res, t.dev, escape(t.why))
    con = _console()
    con.print(tab)
    broken = f"; {len(unwell)} plugin(s) broken, skipped or with failing hooks, see `tinyctl plugins`" if unwell else ""
    con.print("* = what DEV=<DEVICE> selects" + broken)
    # a first look shows rows of FAIL for hardware this machine lacks: say what a script will actually run on
    con.print(_default_line())
    con.print("FAIL rows lack hardware or a driver here (WHY says which); EMU+ rows run that device's own pipeline in the emulator.")
  # exit status: a requested target that fails is an error; with none requested, so is having no working device
  failed = [t for t in rows if not t.ok] if wanted else ([] if any(t.ok for t in rows) else rows)
  if failed: raise typer.Exit(failures.FAILED)

def _default_line() -> str:
  from tinycore.device import Device
  from tinycore.helpers import DEV
  how = f"DEV={DEV.value}" if DEV.value else "DEV unset: the highest-priority device that opens"
  try: return f"Default device: {Device.DEFAULT} ({how})."
  except Exception as e: return f"No default device ({how}): {failures.one_line(e).rstrip('.')}."

def _plugin_cause(r) -> str:
  from tinycore.isolation import cause_chain
  """Why a plugin is not (fully) working: its load failure with the chained causes, then each failed hook with its own."""
  lines = [r.reason] + [f"caused by {c}" for c in r.cause_chain() if c not in r.reason] if r.reason else []
  for hook, err in r.hook_errors.items():
    chain = cause_chain(err)
    lines += [f"{hook} failed: {chain[0]}"] + [f"caused by {c}" for c in chain[1:]]
  if r.declaration_error: lines.append(f"device declaration ignored: {r.declaration_error}")
  return "\n".join(lines)

@app.command("plugins", cls=_Command, short_help="Installed backend plugins, their status and its cause.")
@user_errors
def plugins_cmd(as_json: bool = typer.Option(False, "--json", help="machine-readable output")) -> None:
  """Installed backend plugins: distribution, version, API range, devices, import time, and status (loaded, hook-failed,
  skipped, broken, disabled) with its cause. Every enabled plugin is imported and its hooks are called."""
  from tinycore.plugins import PLUGIN_API, registry
  recs, _ = _quiet_load()
  if as_json:
    typer.echo(json.dumps({"plugin_api": PLUGIN_API, "plugins": [r.as_dict() for r in recs]}, indent=1))
    return
  tab = Table(title=f"tinycore plugins (core PLUGIN_API {PLUGIN_API})")
  for c in ("NAME", "DISTRIBUTION", "VERSION", "API", "DEVICES", "IMPORT", "STATUS", "CAUSE"): tab.add_column(c, overflow="fold")
  color = {"loaded": "green", "skipped": "yellow", "broken": "red", "hook-failed": "red", "disabled": "dim"}
  provided: dict[str, dict[str, int]] = {}   # what loaded plugins really provide, for those that declare nothing
  for info, rec in registry.devices().values(): provided.setdefault(rec.name, {})[info.name.upper()] = info.priority
  for r in recs:
    devs = " ".join(f"{d}:{p}" for d, p in sorted(r.declared.items(), key=lambda x: -x[1]))
    if not devs: devs = " ".join(f"{d}:{p}" for d, p in provided.get(r.name, {}).items()) + " (undeclared)" if r.name in provided else "-"
    took = f"{r.import_s * 1e3:.0f} ms" if r.import_s is not None else "-"
    st = r.shown_status
    api = f"{r.api[0]}..{r.api[1]}" if r.api else "?"
    tab.add_row(r.name, r.dist, r.version, api, devs, took, f"[{color.get(st, 'white')}]{st}[/]", escape(_plugin_cause(r)))
  _console().print(tab)

def _smi_rows() -> list[dict]:
  from tinycore import plugins
  from tinycore.plugins import registry
  _quiet_load()
  rows = []
  for dev in sorted({i.name.upper() for i, _ in registry.devices().values()}):
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")
      for rec, res in plugins.call("tinycore_smi", device=dev): rows += [{"plugin": rec.name, **r} for r in res]
  return rows

def _gib(n) -> str: return f"{n / 2**30:.1f}" if isinstance(n, (int, float)) else "-"
def _bar(used, total, width=20) -> str:
  if not isinstance(used, (int, float)) or not total: return ""
  k = round(width * used / total)
  return "[" + "#" * k + "." * (width - k) + "]"

def _smi_table(rows: list[dict]) -> Table:
  tab = Table(title="tinycore smi")
  cols = ("DEVICE", "INDEX", "NAME", "MEMORY GiB (used/total)", "MEMORY USE", "UTIL %", "TEMP C", "POWER W", "CLOCK MHz", "NOTE")
  for c in cols: tab.add_column(c, overflow="fold")
  f = lambda v, fmt="{:.0f}": fmt.format(v) if isinstance(v, (int, float)) else "-"
  for r in rows:
    tab.add_row(r.get("device", "?"), str(r.get("index", 0)), str(r.get("name", "")), f"{_gib(r.get('mem_used'))}/{_gib(r.get('mem_total'))}",
                escape(_bar(r.get("mem_used"), r.get("mem_total"))), f(r.get("util"), "{:.1f}"), f(r.get("temp_c")), f(r.get("power_w"), "{:.1f}"),
                f(r.get("clock_mhz")), escape(str(r.get("status", ""))))
  return tab

@app.command("smi", cls=_Command, short_help="Live telemetry: memory, utilization, temperature, power.")
@user_errors
def smi(watch: float = typer.Option(0, "--watch", "-w", metavar="SECONDS", help="refresh every SECONDS until interrupted (0: once)"),
        count: int = typer.Option(0, "--count", "-n", metavar="N", help="with --watch: stop after N refreshes (0: until Ctrl-C)"),
        as_json: bool = typer.Option(False, "--json", help="one JSON snapshot (a list of rows)")) -> None:
  """Live telemetry from each plugin's tinycore_smi hook: memory, utilization, temperature, power, clocks."""
  if as_json:
    typer.echo(json.dumps(_smi_rows(), indent=1))
    return
  con = _console()
  if not watch:
    con.print(_smi_table(_smi_rows()))
    return
  from rich.live import Live
  n = 0
  try:
    with Live(_smi_table(_smi_rows()), console=con, auto_refresh=False) as live:
      while not count or (n := n + 1) < count:
        time.sleep(watch)
        live.update(_smi_table(_smi_rows()), refresh=True)
  except KeyboardInterrupt: pass

@app.command("doctor", cls=_Command, short_help="What each device lacks here, and the command that adds it.")
@user_errors
def doctor(devs: list[str] = typer.Argument(None, metavar="DEVICE", help="devices to focus on (e.g. CPU NV); all when omitted"),
           as_json: bool = typer.Option(False, "--json", help="machine-readable output (a list of findings)")) -> None:
  """What this machine has and lacks for each device (plugin distributions, their extras, system tools, whether the
  device opens) and the command that adds what is missing. Exits 1 if a device named on the command line lacks its
  plugin or doesn't open (optional extras and tools don't count), or, with none named, if no device works at all."""
  from tinyctl.doctor import diagnose
  focus = {d.upper() for d in devs or []}
  found = [f for f in diagnose() if not focus or f.device in focus]
  if as_json: typer.echo(json.dumps([f.as_dict() for f in found], indent=1))
  else:
    tab = Table(title="tinycore doctor")
    for c in ("DEVICE", "NEEDS", "STATUS", "GIVES", "FIX"): tab.add_column(c, overflow="fold")
    color = {"ok": "green", "missing": "red", "unavailable": "yellow"}
    for f in found: tab.add_row(f.device, escape(f.needs), f"[{color[f.status]}]{f.status}[/]", escape(f.gives), escape(f.fix))
    con = _console()
    con.print(tab)
    n = sum(f.status == "missing" for f in found)
    con.print((f"{n} missing: the FIX column has the command that adds each." if n else "Nothing missing.") + " A device that is unavailable "
              "lacks its hardware or driver here; FIX names the DEV= that runs its pipeline without it.")
  works = any(f.ok and f.kind == "device" for f in found)
  essential_missing = any(not f.ok and f.kind in ("plugin", "device") for f in found)
  if (focus and essential_missing) or (not focus and not works): raise typer.Exit(failures.FAILED)

@app.command("viz", cls=_Command, short_help="Serve a VIZ=1 recording in the browser: rewrites, kernels, a timeline.")
@user_errors
def viz(path: str = typer.Argument(..., metavar="FILE", help="a recording written by VIZ=1 (its path is printed at exit)"),
        port: int = typer.Option(0, "--port", "-p", min=0, max=65535, metavar="PORT", help="port on 127.0.0.1 (0: VIZ_PORT, else a free one)"),
        verbose: bool = typer.Option(False, "--verbose", "-v", help="log every request")) -> None:
  """Serve a VIZ=1 recording on 127.0.0.1: kernels, each graph rewrite step by step, the generated source and a timeline,
  in the browser. Runs until Ctrl-C."""
  import os
  from tinycore.viz.trace import load_trace
  from tinycore.viz.server import serve
  trace = load_trace(path)   # a file that isn't a valid recording: one line naming the bad field, exit 1
  serve(trace, port=port or int(os.environ.get("VIZ_PORT") or 0), source=path, verbose=verbose)

def main() -> None:
  """The console script: errors that escape a command (an import that fails on a bad environment) end as one line too."""
  try: app(prog_name="tinyctl")
  except KeyboardInterrupt: sys.exit(failures.INTERRUPTED)
  except Exception as e:
    if failures.debugging(): raise
    sys.exit(failures.report(e))

if __name__ == "__main__": main()
