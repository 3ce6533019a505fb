import pytest
from hypothesis import HealthCheck, settings

import dynfuse

settings.register_profile(
    "dynfuse", deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.load_profile("dynfuse")


@pytest.fixture(autouse=True)
def fresh_stats():
    dynfuse.reset_stats()
    yield
