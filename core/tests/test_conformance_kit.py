"""Run the conformance kit (tinycore.testing) as part of core's own suite on the default device."""
import pytest
pytestmark = pytest.mark.needs_device
from tinycore.testing.test_tiny import *      # noqa: F401,F403
from tinycore.testing.test_ops import *       # noqa: F401,F403
from tinycore.testing.test_indexing import *  # noqa: F401,F403
from tinycore.testing.test_nn_ops import *    # noqa: F401,F403
from tinycore.testing.test_random import *    # noqa: F401,F403
from tinycore.testing.test_grad import *      # noqa: F401,F403
from tinycore.testing.test_fuzz import *     # noqa: F401,F403
