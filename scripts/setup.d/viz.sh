# The viz page's browser tests (core/tests/test_viz_browser.py, run by .ci/lanes/viz.sh): headless Chromium and its
# WebDriver from Debian, driven by Selenium (which is told where the system driver is, so it downloads nothing).
sys_step "command -v chromium >/dev/null && command -v chromedriver >/dev/null" "optional: Chromium and chromedriver (~300 MB)" \
  "the VIZ page's browser tests" chromium chromium-driver
step "selenium: drives the headless browser in the VIZ page tests"
pip install "selenium>=4.10"
