import pytest
from hypothesis import HealthCheck, settings

import dynfuse
from dynfuse import accelerate

settings.register_profile(
    "dynfuse", deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.load_profile("dynfuse")


@pytest.fixture(autouse=True, scope="session")
def private_kernel_cache(tmp_path_factory):
    """Tests compile into a cache of their own, never the user's ~/.cache/dynfuse."""
    dynfuse.config.cache_dir = tmp_path_factory.mktemp("dynfuse-cache")


@pytest.fixture(autouse=True)
def fresh_stats():
    dynfuse.reset_stats()
    yield


@pytest.fixture(autouse=True)
def plan_everything(monkeypatch):
    """Test arrays are small: without this, the tier policy would interpret them all, unplanned."""
    monkeypatch.setattr(dynfuse.config, "tiers", False)


@pytest.fixture(params=["C", "Python"])
def recorder(request):
    """Both recorders: the C extension's fast paths and the Python reference."""
    if request.param == "Python":
        with accelerate.pure_python():
            yield
    else:
        yield
