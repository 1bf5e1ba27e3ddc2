# the kit works with `--pyargs tinycore.testing` alone: reuse the plugin's hooks (they tolerate being registered twice)
from tinycore.testing.plugin import pytest_addoption, pytest_configure, pytest_collection_modifyitems  # noqa: F401
