"""tinycore-nv loads through its entry point and, where its hardware or libraries are missing, says why."""
from tinycore.testing.plugin_contract import contract_tests
DEVICES = ["NV", "CUDA"]
globals().update(contract_tests("nv", "tinycore-nv", DEVICES))
