"""The viz page in a real browser (headless Chromium through Selenium): a recorded MLP training step is served, a
kernel is clicked, a rewrite is stepped through, and what the page drew is checked in the DOM (SVG nodes and edges,
highlighted source, diff lines, timeline rectangles); a 100k-event profile must load and draw within seconds.
Screenshots go to .ci-artifacts/viz/. Slow-marked: .ci/lanes/viz.sh runs them (scripts/setup.d/viz.sh installs
chromium, chromium-driver and selenium); without a browser they skip, naming what is missing."""
import os, shutil, threading, time
import pytest
from _viz_fixtures import record_mlp_step, synthetic_trace

pytestmark = pytest.mark.slow
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (scripts/setup.d/viz.sh installs it)")
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

ARTIFACTS = os.path.join(os.path.dirname(__file__), "..", "..", ".ci-artifacts", "viz")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
DRIVER = shutil.which("chromedriver")
if not (CHROMIUM and DRIVER): pytest.skip("no chromium + chromedriver (apt-get install chromium chromium-driver)", allow_module_level=True)

@pytest.fixture(scope="module")
def browser():
  from selenium.webdriver.chrome.options import Options
  from selenium.webdriver.chrome.service import Service
  opts = Options()
  opts.binary_location = CHROMIUM
  for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,900"): opts.add_argument(a)
  drv = webdriver.Chrome(service=Service(DRIVER), options=opts)   # the system driver: selenium downloads nothing
  drv.set_page_load_timeout(30)
  yield drv
  drv.quit()

@pytest.fixture
def serve():
  from tinycore.viz.server import make_server
  servers = []
  def start(trace):
    httpd = make_server(trace)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    servers.append(httpd)
    return f"http://127.0.0.1:{httpd.server_address[1]}/"
  yield start
  for s in servers: s.shutdown(); s.server_close()

def wait_for(drv, script, timeout=20):
  """Poll a JS expression until it is truthy; return its value."""
  return WebDriverWait(drv, timeout, poll_frequency=0.05).until(lambda d: d.execute_script("return " + script))

def screenshot(drv, name):
  os.makedirs(ARTIFACTS, exist_ok=True)
  drv.save_screenshot(os.path.join(ARTIFACTS, name))

@pytest.mark.needs_device
def test_mlp_step_kernel_rewrite_and_timeline(browser, serve):
  trace = record_mlp_step()
  url = serve(trace)
  browser.get(url)
  wait_for(browser, "document.body.dataset.ready")
  kernels = browser.find_elements(By.CSS_SELECTOR, "#kernels .kernel")
  assert len(kernels) == len(trace["kernels"]) > 3
  # the kernel with the most rewrite steps: click it, check its graph, source and program
  steps = {}
  for r in trace["rewrites"]:
    if r["kernel"] is not None: steps[r["kernel"]] = steps.get(r["kernel"], 0) + len(r["steps"])
  ki = max(steps, key=steps.get)
  k = trace["kernels"][ki]
  browser.find_element(By.CSS_SELECTOR, f'#kernels .kernel[data-kernel="{ki}"]').click()
  n_nodes = int(wait_for(browser, "document.getElementById('graph').dataset.nodes"))
  ast_size = len({k["ast"]} | _reachable(trace, k["ast"]))
  assert n_nodes == min(ast_size, 1500)
  assert len(browser.find_elements(By.CSS_SELECTOR, "#viewport g.node")) == n_nodes
  assert len(browser.find_elements(By.CSS_SELECTOR, "#viewport path.edge")) >= n_nodes - 1   # connected: at least a tree
  assert browser.find_element(By.ID, "title").text.startswith(f"kernel {k['name']}")
  screenshot(browser, "kernel-graph.png")
  browser.find_element(By.CSS_SELECTOR, '#tabs button[data-tab="source"]').click()
  src = browser.find_element(By.ID, "source")
  assert src.get_attribute("textContent") == k["src"]                       # highlighting adds spans, never changes the text
  assert browser.find_elements(By.CSS_SELECTOR, "#source .tok-kw") and browser.find_elements(By.CSS_SELECTOR, "#source .tok-num")
  browser.find_element(By.CSS_SELECTOR, '#tabs button[data-tab="program"]').click()
  assert len(browser.find_element(By.ID, "program").get_attribute("textContent").splitlines()) == len(k["program"])
  # step through the kernel's first rewrite that changed something
  ri = next(i for i, r in enumerate(trace["rewrites"]) if r["kernel"] == ki and r["steps"])
  browser.find_element(By.CSS_SELECTOR, '#tabs button[data-tab="graph"]').click()
  browser.find_element(By.CSS_SELECTOR, f'#kernels .rewrite[data-rewrite="{ri}"]').click()
  nsteps = len(trace["rewrites"][ri]["steps"])
  wait_for(browser, f"document.getElementById('step-label').textContent.startsWith('step 0 of {nsteps}')")
  changed_seen = focus_seen = 0
  for s in range(1, min(nsteps, 4) + 1):
    browser.find_element(By.ID, "next").click()
    wait_for(browser, f"document.getElementById('step-label').textContent.startsWith('step {s} of {nsteps}')")
    rule = trace["rewrites"][ri]["steps"][s - 1][0]
    assert rule in browser.find_element(By.ID, "step-label").text
    changed_seen += len(browser.find_elements(By.CSS_SELECTOR, "#viewport g.node.changed"))
    focus = browser.find_elements(By.CSS_SELECTOR, "#viewport g.node.focus")
    assert len(focus) <= 1
    if focus: focus_seen += 1; assert focus[0].get_attribute("data-id") == str(trace_view_focus(url, ri, s))
  assert changed_seen > 0, "no step highlighted a node it made"
  assert focus_seen > 0, "no step marked the node its rule produced"
  screenshot(browser, "rewrite-step.png")
  browser.find_element(By.CSS_SELECTOR, '#tabs button[data-tab="diff"]').click()
  lines = browser.find_elements(By.CSS_SELECTOR, "#diff .line")
  assert lines and any("add" in l.get_attribute("class") or "del" in l.get_attribute("class") for l in lines)
  # the arrow keys step too
  browser.find_element(By.TAG_NAME, "body").send_keys("\ue012")   # Keys.LEFT
  wait_for(browser, f"document.getElementById('step-label').textContent.startsWith('step {min(nsteps, 4) - 1} of')")
  # the timeline: one rectangle or more per kernel run, one lane per device and kind
  browser.find_element(By.CSS_SELECTOR, '#tabs button[data-tab="timeline"]').click()
  drawn = int(wait_for(browser, "document.getElementById('timeline').dataset.drawn"))
  lanes = {(e[1], e[2]) for e in trace["profile"]}
  assert int(browser.find_element(By.ID, "timeline").get_attribute("data-lanes")) == len(lanes)
  assert 0 < drawn <= len(trace["profile"])
  screenshot(browser, "timeline.png")

def trace_view_focus(url, r, step):
  import json, urllib.request
  with urllib.request.urlopen(f"{url}api/rewrite/{r}?step={step}", timeout=30) as f: return json.load(f)["focus"]

def _reachable(trace, root):
  seen, stack = set(), [root]
  while stack:
    for s in trace["uops"][stack.pop()][3]:
      if s not in seen: seen.add(s); stack.append(s)
  return seen

def test_100k_event_timeline_loads_and_renders_within_seconds(browser, serve):
  trace = synthetic_trace(100_000)
  url = serve(trace)
  t0 = time.perf_counter()
  browser.get(url)
  wait_for(browser, "document.body.dataset.ready")
  browser.find_element(By.CSS_SELECTOR, '#tabs button[data-tab="timeline"]').click()
  wait_for(browser, "document.getElementById('timeline').dataset.drawn")
  wall = time.perf_counter() - t0
  timings = browser.execute_script("return window.viz.timings")
  print(f"\n100k events: page ready + timeline fetched and drawn in {wall:.2f} s wall; fetch {timings['profileFetchMs']:.0f} ms, "
        f"index + first draw {timings['profileDrawMs']:.0f} ms")
  assert timings["profileEvents"] == 100_000
  # the bounds: 3 s to fetch and draw (5 s from page load), or on a loaded machine (CI shares 2 cores) 10x what this
  # browser takes for one plain JSON round trip of the same events, which still fails an accidentally quadratic page
  base = browser.execute_script("const t = performance.now(); JSON.parse(JSON.stringify(window.viz.timeline.events)); return performance.now() - t")
  print(f"(baseline: JSON round trip of the events {base:.0f} ms)")
  assert timings["profileFetchMs"] + timings["profileDrawMs"] < max(3000, 10 * base) and wall < max(5, 0.02 * base)
  # zoom in around the middle: fewer events drawn, and a redraw stays fast
  before = browser.execute_script("const t = window.viz.timeline; return [t.v1 - t.v0, Number(t.canvas.dataset.drawn)]")
  ms = browser.execute_script("""const c = document.getElementById('timeline'), t0 = performance.now();
    const r = c.getBoundingClientRect();
    for (let i = 0; i < 10; i++)
      c.dispatchEvent(new WheelEvent('wheel', {deltaY: -300, clientX: r.left + 600, clientY: r.top + 40, bubbles: true, cancelable: true}));
    return (performance.now() - t0) / 10""")
  after = browser.execute_script("const t = window.viz.timeline; return [t.v1 - t.v0, Number(t.canvas.dataset.drawn)]")
  assert after[0] < before[0] / 100 and after[1] > 0
  print(f"zoomed redraw: {ms:.1f} ms each")
  assert ms < 500
  # pan: drag left by 300 px moves the view later in time
  v0 = browser.execute_script("return window.viz.timeline.v0")
  browser.execute_script("""const c = document.getElementById('timeline'), r = c.getBoundingClientRect();
    c.dispatchEvent(new MouseEvent('mousedown', {clientX: r.left + 700, clientY: r.top + 40, bubbles: true}));
    c.dispatchEvent(new MouseEvent('mousemove', {clientX: r.left + 400, clientY: r.top + 40, bubbles: true}));
    window.dispatchEvent(new MouseEvent('mouseup', {bubbles: true}));""")
  assert browser.execute_script("return window.viz.timeline.v0") > v0
  screenshot(browser, "timeline-100k.png")

def test_bad_paths_in_the_browser_are_404(browser, serve):
  url = serve(synthetic_trace(10))
  for bad in ("static/../viz/server.py", "static/%2e%2e%2fserver.py", "nope", "api/kernel/0", "api/rewrite/5"):
    browser.get(url + bad)
    assert "not found" in browser.page_source or "no kernel" in browser.page_source or "no rewrite" in browser.page_source
