#!/usr/bin/env bash
# The VIZ=1 page in headless Chromium (core/tests/test_viz_browser.py): a recorded MLP training step is loaded, a kernel
# clicked, a rewrite stepped through and what is drawn checked; a 100k-event timeline must load and draw in seconds.
# Screenshots land in .ci-artifacts/viz/. Skips (exit 0, with the reason) where chromium or selenium is missing.
set -uo pipefail
cd "$(dirname "$0")/../.."
t0=$(date +%s)
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  echo "viz lane: skipped, no chromium + chromedriver (scripts/setup.d/viz.sh installs them with apt)"; exit 0
fi
if ! .venv/bin/python -c "import selenium" 2>/dev/null; then echo "viz lane: skipped, selenium is not installed in .venv"; exit 0; fi
timeout 240 .venv/bin/python -m pytest -q -m slow -s core/tests/test_viz_browser.py -p no:cacheprovider 2>&1 | grep -v "^$" | tail -12
rc=${PIPESTATUS[0]}
[ $rc -eq 124 ] && echo "viz lane: timed out after 240s"
echo "viz lane: $(( $(date +%s) - t0 ))s, screenshots in .ci-artifacts/viz/"
exit $rc
