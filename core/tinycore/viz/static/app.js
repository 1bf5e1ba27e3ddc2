// The page: the kernel and rewrite lists, the graph of the selected UOp graph (laid out by dagre), the step-by-step
// diff of a rewrite, the kernel's source and program, and the timeline. All text from the recording goes through
// textContent, never innerHTML: a recording is data, not markup.
"use strict";
const viz = window.viz = {timings: {}, summary: null, kernel: null, rewrite: null, step: 0, timeline: null};
const $ = id => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";

async function getJSON(url) {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`${url}: ${res.status} ${(await res.text()).slice(0, 200)}`);
  return res.json();
}
function el(tag, cls, text) { const e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; }
function showError(err) { $("title").textContent = String(err); console.error(err); }

// ---- tabs
function showTab(name) {
  for (const b of document.querySelectorAll("#tabs button")) b.classList.toggle("active", b.dataset.tab === name);
  for (const p of document.querySelectorAll(".pane")) p.classList.toggle("active", p.id === "pane-" + name);
  if (name === "timeline") loadTimeline().catch(showError);
  if (name === "graph" && viz.pendingGraph) { const [g, changed, focus] = viz.pendingGraph; viz.pendingGraph = null; drawGraph(g, changed, focus); }
}
function activeTab() { return document.querySelector("#tabs button.active").dataset.tab; }

// ---- sidebar
function renderSidebar() {
  const s = viz.summary, q = $("filter").value.toLowerCase(), hide = $("hide-empty").checked;
  const kernels = $("kernels"), other = $("other-rewrites");
  kernels.textContent = ""; other.textContent = "";
  const rewriteItem = r => {
    const d = el("div", "item rewrite");
    d.dataset.rewrite = r.index;
    d.append(`${r.matcher} `, el("small", "", `${r.steps} steps · ${r.stage === "codegen" ? "" : r.stage + " · "}${r.caller}`));
    d.style.paddingLeft = (6 + 10 * r.depth) + "px";
    d.title = `${r.matcher} called from ${r.caller}`;
    if (viz.rewrite === r.index) d.classList.add("selected");
    d.onclick = ev => { ev.stopPropagation(); selectRewrite(r.index, 0).catch(showError); };
    return d;
  };
  const shown = r => (!hide || r.steps > 0) && (!q || r.matcher.toLowerCase().includes(q) || r.caller.toLowerCase().includes(q));
  for (const k of s.kernels) {
    const rws = s.rewrites.filter(r => r.kernel === k.index);
    if (q && !k.name.toLowerCase().includes(q) && !rws.some(shown)) continue;
    const d = el("div", "item kernel");
    d.dataset.kernel = k.index;
    d.append(`${k.name} `, el("small", "", `${k.device} · ${k.size} B · ${k.rewrites} rewrites`));
    if (viz.kernel === k.index) d.classList.add("selected");
    d.onclick = () => selectKernel(k.index).catch(showError);
    kernels.appendChild(d);
    if (viz.kernel === k.index) for (const r of rws) if (shown(r)) kernels.appendChild(rewriteItem(r));
  }
  // outside kernels: grouped by pipeline stage (schedule, autograd, device rules: tensor, ...), in order of first use
  const stages = new Map();
  for (const r of s.rewrites) if (r.kernel === null && shown(r)) { if (!stages.has(r.stage)) stages.set(r.stage, []); stages.get(r.stage).push(r); }
  for (const [stage, rws] of stages) {
    other.appendChild(el("div", "stage", `${stage} (${rws.length})`));
    for (const r of rws) other.appendChild(rewriteItem(r));
  }
}

// ---- graph
const OP_CLASS = [[/^(ADD|MUL|SUB|IDIV|MOD|MAX|CMPLT|CMPNE|CMPEQ|WHERE|NEG|EXP2|LOG2|SIN|SQRT|RECIP|AND|OR|XOR|SHL|SHR|TRUNC|POW|FDIV|MULACC|THREEFRY)$/, "op-alu"],
  [/^(LOAD|STORE|INDEX|DEFINE_GLOBAL|DEFINE_LOCAL|DEFINE_REG|BUFFER|COPY|BUFFERIZE)$/, "op-mem"], [/^(CONST|VCONST|DEFINE_VAR)$/, "op-const"],
  [/^(RANGE|END|REDUCE|REDUCE_AXIS|SPECIAL)$/, "op-range"], [/^SINK$/, "op-sink"]];
function opClass(op) { for (const [re, c] of OP_CLASS) if (re.test(op)) return c; return ""; }
function clip(s, n) { return s.length > n ? s.slice(0, n - 1) + "…" : s; }

function drawGraph(g, changed, focusId) {
  if (activeTab() !== "graph") { viz.pendingGraph = [g, changed, focusId]; return; }   // dagre needs a visible pane to measure
  const t0 = performance.now();
  const dg = new dagre.graphlib.Graph();
  dg.setGraph({rankdir: "TB", nodesep: 14, ranksep: 26, marginx: 10, marginy: 10});
  dg.setDefaultEdgeLabel(() => ({}));
  for (const n of g.nodes) {
    const lines = [n.op, n.dtype + (n.arg ? " " + clip(n.arg, 36) : "")];
    const w = Math.max(...lines.map(l => l.length)) * 6.8 + 14;
    dg.setNode(String(n.id), {width: w, height: 34, lines, node: n});
  }
  for (const n of g.nodes) for (const s of n.src) dg.setEdge(String(s), String(n.id));   // sources above their users
  dagre.layout(dg);
  const vp = $("viewport");
  vp.textContent = "";
  const changedSet = new Set(changed || []);
  for (const e of dg.edges()) {
    const pts = dg.edge(e).points;
    const p = document.createElementNS(SVG, "path");
    p.setAttribute("class", "edge");
    p.setAttribute("d", "M" + pts.map(q => `${q.x.toFixed(1)},${q.y.toFixed(1)}`).join("L"));
    vp.appendChild(p);
  }
  for (const id of dg.nodes()) {
    const n = dg.node(id), gEl = document.createElementNS(SVG, "g");
    gEl.setAttribute("class", `node ${opClass(n.node.op)}${changedSet.has(n.node.id) ? " changed" : ""}${n.node.id === focusId ? " focus" : ""}`);
    gEl.dataset.id = id;
    gEl.setAttribute("transform", `translate(${(n.x - n.width / 2).toFixed(1)},${(n.y - n.height / 2).toFixed(1)})`);
    const r = document.createElementNS(SVG, "rect");
    r.setAttribute("width", n.width); r.setAttribute("height", n.height);
    const title = document.createElementNS(SVG, "title");
    title.textContent = `x${n.node.id} ${n.node.op} ${n.node.dtype} ${n.node.arg}`;
    gEl.append(r, title);
    n.lines.forEach((line, i) => {
      const t = document.createElementNS(SVG, "text");
      t.setAttribute("x", 7); t.setAttribute("y", 14 + i * 13); t.textContent = line;
      gEl.appendChild(t);
    });
    vp.appendChild(gEl);
  }
  const gr = dg.graph();
  viz.view = {w: gr.width || 1, h: gr.height || 1};
  // a big graph fitted to the window is unreadable: start at a readable scale, centred on what the step changed
  // (else the sink); double-click fits the whole graph
  const focus = dg.node(String(focusId ?? g.root));
  fitGraph(focus);
  $("graph-note").textContent = g.truncated ? `showing the ${g.nodes.length} nodes nearest the sink` : "";
  viz.timings.lastGraphMs = performance.now() - t0;
  $("graph").dataset.nodes = String(g.nodes.length);
}
const MIN_READABLE_SCALE = 0.6;
function fitGraph(focus) {
  const svg = $("graph"), W = svg.clientWidth || 800, H = svg.clientHeight || 600, v = viz.view;
  const s = Math.min(W / v.w, H / v.h, 1.5);
  if (focus && s < MIN_READABLE_SCALE) viz.zoom = {s: 1, x: W / 2 - focus.x, y: H / 2 - focus.y};
  else viz.zoom = {s, x: (W - v.w * s) / 2, y: Math.max(0, (H - v.h * s) / 2)};
  applyZoom();
}
function applyZoom() { const z = viz.zoom; $("viewport").setAttribute("transform", `translate(${z.x},${z.y}) scale(${z.s})`); }
function bindGraphZoom() {
  const svg = $("graph");
  svg.addEventListener("wheel", ev => {
    ev.preventDefault();
    const z = viz.zoom; if (!z) return;
    const k = Math.exp(-ev.deltaY * 0.002), x = ev.offsetX, y = ev.offsetY;
    z.x = x - (x - z.x) * k; z.y = y - (y - z.y) * k; z.s *= k; applyZoom();
  }, {passive: false});
  let drag = null;
  svg.addEventListener("mousedown", ev => { if (viz.zoom) drag = {x: ev.clientX, y: ev.clientY, zx: viz.zoom.x, zy: viz.zoom.y}; });
  window.addEventListener("mouseup", () => { drag = null; });
  svg.addEventListener("mousemove", ev => { if (drag) { viz.zoom.x = drag.zx + ev.clientX - drag.x; viz.zoom.y = drag.zy + ev.clientY - drag.y; applyZoom(); } });
  svg.addEventListener("dblclick", () => viz.view && fitGraph(null));
}

// ---- kernels and rewrites
async function selectKernel(i) {
  const k = await getJSON(`/api/kernel/${i}`);
  viz.kernel = i; viz.rewrite = null;
  $("stepbar").hidden = true;
  $("title").textContent = `kernel ${k.name} on ${k.device} (${k.renderer})`;
  $("kernel-info").textContent = [`binary: ${k.size} bytes${k.error ? " (" + k.error + ")" : ""}`,
    `optimizations: ${k.opts === null ? "chosen by the GPU heuristic (not itemized)" : k.opts.length ? k.opts.join(", ") : "none"}`,
    `rewrites while compiling: ${k.rewrites.length}`].join("\n");
  highlight($("source"), k.src, /^\s*(;|define|declare|target)/m.test(k.src));
  $("program").textContent = k.program.join("\n");
  $("diff").textContent = "Pick one of this kernel's rewrites on the left to step through it.";
  renderSidebar();
  drawGraph(await getJSON(`/api/graph/${k.ast}`), []);
}

async function selectRewrite(i, step) {
  const t0 = performance.now();
  const v = await getJSON(`/api/rewrite/${i}?step=${step}`);
  viz.rewrite = i; viz.step = v.step;
  if (v.kernel !== null && v.kernel !== viz.kernel) { viz.kernel = v.kernel; }
  $("stepbar").hidden = false;
  const s = $("step"); s.max = v.nsteps; s.value = v.step;
  $("step-label").textContent = `step ${v.step} of ${v.nsteps}` + (v.rule ? ` · rule at ${v.rule}` : " · the input");
  $("title").textContent = `rewrite ${i}: ${v.matcher} from ${v.caller}` + (v.kernel !== null ? ` (kernel ${viz.summary.kernels[v.kernel].name})` : "");
  renderDiff(v);
  renderSidebar();
  drawGraph(v.graph, v.changed, v.focus);
  viz.timings.lastStepMs = performance.now() - t0;
}
function renderDiff(v) {
  const d = $("diff");
  d.textContent = "";
  if (!v.rule) { d.appendChild(el("div", "rule", `The input of this rewrite (${v.nsteps} steps follow). Step forward to see each rule's change.`)); return; }
  d.appendChild(el("div", "rule", `step ${v.step}: the rule at ${v.rule} rewrote x${v.before[0].split(" ")[0].slice(1)} into x${v.after[0].split(" ")[0].slice(1)}`));
  for (const [kind, line] of diffLines(v.before, v.after)) d.appendChild(el("div", "line " + kind, line));
}
function step(delta) {
  if (viz.rewrite === null) return;
  const n = Number($("step").max), k = Math.min(n, Math.max(0, viz.step + delta));
  if (k !== viz.step) selectRewrite(viz.rewrite, k).catch(showError);
}

// ---- timeline
async function loadTimeline() {
  if (viz.timeline) { viz.timeline.draw(); return; }
  const t0 = performance.now();
  const data = await getJSON("/api/profile");
  const t1 = performance.now();
  viz.timeline = new Timeline($("timeline"), $("tl-info"), data);
  const t2 = performance.now();
  viz.timings.profileFetchMs = t1 - t0; viz.timings.profileDrawMs = t2 - t1; viz.timings.profileEvents = data.events.length;
  if (!data.events.length) $("tl-info").textContent = "no kernel ran while recording";
}

async function main() {
  const t0 = performance.now();
  viz.summary = await getJSON("/api/summary");
  const s = viz.summary;
  $("stats").textContent = `${s.kernels.length} kernels · ${s.rewrites.length} rewrites · ${s.profile_events} profile events`;
  renderSidebar();
  for (const b of document.querySelectorAll("#tabs button")) b.onclick = () => showTab(b.dataset.tab);
  $("filter").oninput = renderSidebar; $("hide-empty").onchange = renderSidebar;
  $("prev").onclick = () => step(-1); $("next").onclick = () => step(1);
  $("step").onchange = () => viz.rewrite !== null && selectRewrite(viz.rewrite, Number($("step").value)).catch(showError);
  document.addEventListener("keydown", ev => {
    if (ev.target.tagName === "INPUT" && ev.target.type !== "range") return;
    if (ev.key === "ArrowRight") step(1); else if (ev.key === "ArrowLeft") step(-1);
  });
  window.addEventListener("resize", () => { if (viz.timeline && activeTab() === "timeline") viz.timeline.draw(); });
  bindGraphZoom();
  viz.timings.summaryMs = performance.now() - t0;
  document.body.dataset.ready = "1";
}
main().catch(showError);
