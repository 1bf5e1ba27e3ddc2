// The timeline: a canvas with one lane per device and kind (kernels, copies) plus a memory lane; wheel zooms around the
// pointer, dragging pans, double-click resets. Only events inside the view are visited (binary search on start time),
// and events narrower than a pixel are merged, so 100k events draw in a few milliseconds.
"use strict";
const TL_LANE = 26, TL_TOP = 22, TL_LABEL = 120, TL_MEM = 60;

class Timeline {
  constructor(canvas, info, data) {
    this.canvas = canvas; this.info = info;
    this.devices = data.devices;
    // columns: name, device, kind, start_ns, dur_ns, flops, bytes, mem_used, mem_peak
    this.lanes = [];
    const byKey = new Map();
    for (const e of data.events) {
      const key = e[1] + "/" + e[2];
      if (!byKey.has(key)) { const lane = {label: e[1] + (e[2] === "copy" ? " copies" : " kernels"), events: []}; byKey.set(key, lane); this.lanes.push(lane); }
      byKey.get(key).events.push(e);
    }
    for (const lane of this.lanes) {
      lane.events.sort((a, b) => a[3] - b[3]);
      // the longest event so far at each index: the search for the first visible event must not miss a long one
      let reach = 0; lane.reach = lane.events.map(e => (reach = Math.max(reach, e[3] + e[4])));
    }
    this.events = data.events;
    this.t0 = Infinity; this.t1 = -Infinity; this.memMax = 1;
    for (const e of data.events) { this.t0 = Math.min(this.t0, e[3]); this.t1 = Math.max(this.t1, e[3] + e[4]); this.memMax = Math.max(this.memMax, e[8], e[7]); }
    if (!isFinite(this.t0)) { this.t0 = 0; this.t1 = 1; }
    this.reset();
    this.bind();
  }
  reset() { this.v0 = this.t0; this.v1 = this.t1 + (this.t1 - this.t0) * 0.01 + 1; this.draw(); }
  xOf(t) { return TL_LABEL + (t - this.v0) / (this.v1 - this.v0) * (this.width - TL_LABEL); }
  tOf(x) { return this.v0 + (x - TL_LABEL) / (this.width - TL_LABEL) * (this.v1 - this.v0); }
  firstVisible(lane) {   // the first index whose event may end after v0
    let lo = 0, hi = lane.events.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (lane.reach[mid] < this.v0) lo = mid + 1; else hi = mid; }
    return lo;
  }
  draw() {
    const c = this.canvas, dpr = window.devicePixelRatio || 1;
    this.width = c.clientWidth || 800;
    const height = TL_TOP + this.lanes.length * TL_LANE + TL_MEM + 10;
    c.style.height = height + "px";
    c.width = this.width * dpr; c.height = height * dpr;
    const g = c.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, this.width, height);
    g.font = "11px ui-monospace, monospace"; g.textBaseline = "middle";
    // time axis
    g.fillStyle = "#556"; g.strokeStyle = "#dde";
    // ticks 1, 2 or 5 x 10^n apart, at least ~100 px, labelled with the time since the first event
    const span = this.v1 - this.v0, minStep = span * 100 / Math.max(this.width - TL_LABEL, 1);
    const p10 = Math.pow(10, Math.floor(Math.log10(minStep))), tick = [1, 2, 5, 10].map(m => m * p10).find(t => t >= minStep);
    for (let rel = Math.ceil((this.v0 - this.t0) / tick) * tick; this.t0 + rel <= this.v1; rel += tick) {
      const x = this.xOf(this.t0 + rel); if (x < TL_LABEL) continue;
      g.beginPath(); g.moveTo(x, TL_TOP - 4); g.lineTo(x, height); g.stroke();
      g.fillText(fmtTime(rel), x + 2, 8);
    }
    let drawn = 0;
    this.lanes.forEach((lane, li) => {
      const y = TL_TOP + li * TL_LANE;
      g.fillStyle = "#1d2330"; g.fillText(lane.label, 4, y + TL_LANE / 2);
      let lastEnd = -1;
      for (let i = this.firstVisible(lane); i < lane.events.length; i++) {
        const e = lane.events[i];
        if (e[3] > this.v1) break;
        let x0 = Math.max(TL_LABEL, this.xOf(e[3])), x1 = this.xOf(e[3] + e[4]);
        if (x1 < TL_LABEL) continue;
        if (x1 - x0 < 1) x1 = x0 + 1;
        if (x1 <= lastEnd) continue;          // inside a pixel already painted in this lane
        x0 = Math.max(x0, lastEnd); lastEnd = x1;
        g.fillStyle = e[2] === "copy" ? "#f1a340" : colorOf(e[0]);
        g.fillRect(x0, y + 3, x1 - x0, TL_LANE - 6); drawn++;
        if (x1 - x0 > 40) { g.fillStyle = "#fff"; g.save(); g.beginPath(); g.rect(x0, y, x1 - x0, TL_LANE); g.clip(); g.fillText(e[0], x0 + 3, y + TL_LANE / 2); g.restore(); }
      }
    });
    // memory in use after each event (all devices)
    const my = TL_TOP + this.lanes.length * TL_LANE + 4;
    g.fillStyle = "#1d2330"; g.fillText("memory", 4, my + TL_MEM / 2);
    g.strokeStyle = "#c0392b"; g.beginPath();
    let started = false;
    for (const e of this.events) {
      const t = e[3] + e[4]; if (t < this.v0 || e[3] > this.v1) continue;
      const x = this.xOf(t), y = my + TL_MEM - e[7] / this.memMax * TL_MEM;
      if (started) g.lineTo(x, y); else { g.moveTo(x, y); started = true; }
    }
    g.stroke();
    c.dataset.drawn = String(drawn); c.dataset.lanes = String(this.lanes.length);
    return drawn;
  }
  hit(x, y) {
    const li = Math.floor((y - TL_TOP) / TL_LANE);
    if (li < 0 || li >= this.lanes.length || x < TL_LABEL) return null;
    const lane = this.lanes[li], t = this.tOf(x), slack = (this.v1 - this.v0) / this.width * 2;
    for (let i = this.firstVisible(lane); i < lane.events.length && lane.events[i][3] <= t + slack; i++) {
      const e = lane.events[i]; if (e[3] - slack <= t && t <= e[3] + e[4] + slack) return e;
    }
    return null;
  }
  bind() {
    const c = this.canvas;
    c.addEventListener("wheel", ev => {
      ev.preventDefault();
      const t = this.tOf(ev.offsetX), k = Math.exp(ev.deltaY * 0.002);
      this.v0 = t - (t - this.v0) * k; this.v1 = t + (this.v1 - t) * k;
      if (this.v1 - this.v0 < 10) { this.v1 = this.v0 + 10; }
      this.draw();
    }, {passive: false});
    let drag = null;
    c.addEventListener("mousedown", ev => { drag = {x: ev.clientX, v0: this.v0, v1: this.v1}; });
    window.addEventListener("mouseup", () => { drag = null; });
    c.addEventListener("mousemove", ev => {
      if (drag) {
        const dt = (ev.clientX - drag.x) / (this.width - TL_LABEL) * (drag.v1 - drag.v0);
        this.v0 = drag.v0 - dt; this.v1 = drag.v1 - dt; this.draw(); return;
      }
      const e = this.hit(ev.offsetX, ev.offsetY);
      if (!e) return;
      const s = Math.max(e[4], 1) / 1e9;
      this.info.textContent = `${e[0]} on ${e[1]}: ${fmtTime(e[4])} at ${fmtTime(e[3] - this.t0)}, ` +
        `${(e[5] / s / 1e9).toFixed(2)} GFLOP/s, ${(e[6] / s / 1e9).toFixed(2)} GB/s, ${fmtBytes(e[6])} moved, ` +
        `memory ${fmtBytes(e[7])} (peak ${fmtBytes(e[8])})`;
    });
    c.addEventListener("dblclick", () => this.reset());
  }
}
function fmtTime(ns) {
  const a = Math.abs(ns), f = (v, u) => +v.toPrecision(6) + " " + u;
  return a >= 1e9 ? f(ns / 1e9, "s") : a >= 1e6 ? f(ns / 1e6, "ms") : a >= 1e3 ? f(ns / 1e3, "µs") : Math.round(ns) + " ns";
}
function fmtBytes(b) { return b >= 1e9 ? (b / 1e9).toFixed(2) + " GB" : b >= 1e6 ? (b / 1e6).toFixed(2) + " MB" : b >= 1e3 ? (b / 1e3).toFixed(1) + " kB" : b + " B"; }
function colorOf(name) { let h = 0; for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) | 0; return `hsl(${((h % 360) + 360) % 360}, 55%, 48%)`; }
