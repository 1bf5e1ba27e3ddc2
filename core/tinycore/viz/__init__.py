"""See inside a run: the rewrite visualizer (VIZ=1) and the profiler (PROFILE=1).

  switch.py    the VIZ/PROFILE knobs: turning recording on and off, and what happens at exit
  recorder.py  every graph_rewrite (input, each applied rule with its source location, output) and every compiled kernel
  profile.py   a timed event per kernel run and copy; the Chrome trace (Perfetto) export
  trace.py     a recording as a JSON file: written atomically, validated when read back
  replay.py    the UOp graph after any step of a recorded rewrite, as nodes and edges for the page
  server.py    the local HTTP server behind `VIZ=1` and `tinyctl viz FILE`
  static/      the single-page app (plain JS; dagre for graph layout, shipped with its license)

Importing this package is cheap: the recorder and the profiler load only when switched on."""
