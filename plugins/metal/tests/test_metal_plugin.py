"""tinycore-metal loads through its entry point and, where its hardware or libraries are missing, says why."""
from tinycore.testing.plugin_contract import contract_tests
DEVICES = ["METAL"]
globals().update(contract_tests("metal", "tinycore-metal", DEVICES))
