"""tinycore-webgpu loads through its entry point and, where its hardware or libraries are missing, says why."""
from tinycore.testing.plugin_contract import contract_tests
DEVICES = ["WEBGPU"]
globals().update(contract_tests("webgpu", "tinycore-webgpu", DEVICES))
