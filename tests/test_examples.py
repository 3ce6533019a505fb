"""The example programs run as plain NumPy scripts, deterministically, and print results that hold up.

Each example prints lines `label: value(s)`; `example_results` parses them, so the same checks (and
a comparison of two runs) can read any run of an example, however it was launched.
"""

import functools
import importlib.util
import itertools
import math
import re
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
EXAMPLE_NAMES = ("black_scholes", "heat_diffusion", "kmeans", "transformer_mlp", "julia", "monte_carlo")
NOT_AN_EXAMPLE_PROGRAM = {"demo", "tour"}  # make demo's driver, and the tour of dynfuse itself
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w.])")


def run_example(
    name: str, launcher: tuple[str, ...] = (sys.executable,), size: str = "small"
) -> subprocess.CompletedProcess[str]:
    """Run `launcher examples/<name>.py --size <size>`, capturing its output."""
    command = [*launcher, str(EXAMPLES / f"{name}.py"), "--size", size]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


@functools.cache
def plain_output(name: str) -> str:
    """Under plain Python, with warnings as errors: an overflow or a division by zero would fail it."""
    completed = run_example(name, (sys.executable, "-W", "error"))
    assert completed.returncode == 0 and completed.stderr == "", f"{name}:\n{completed.stderr}"
    return completed.stdout


def example_results(output: str) -> dict[str, list[float]]:
    """Each line's label (up to the first ': ') and the numbers after it, in order."""
    results = {}
    for line in output.splitlines():
        label, separator, values = line.partition(": ")
        assert separator, f"not a 'label: values' line: {line!r}"
        assert label not in results, f"label printed twice: {label!r}"
        results[label] = [float(number) for number in NUMBER.findall(values)]
    return results


def results_of(name: str) -> dict[str, list[float]]:
    return example_results(plain_output(name))


def value(results: dict[str, list[float]], label: str) -> float:
    (number,) = results[label]
    return number


def labelled(results: dict[str, list[float]], prefix: str) -> list[tuple[int, list[float]]]:
    """The lines `<prefix> N: ...` (time steps, iterations, layers) as (N, numbers), in printed order."""
    return [
        (int(label.removeprefix(prefix)), numbers)
        for label, numbers in results.items()
        if label.startswith(prefix)
    ]


def never_increases(sequence: list[float], relative_tolerance: float) -> bool:
    return all(later <= earlier * (1 + relative_tolerance) for earlier, later in itertools.pairwise(sequence))


def load_example(name: str) -> types.ModuleType:
    """The example as a module (its main() does not run), to check its functions one by one."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def exact_normal_cdf(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def black_scholes_call(spot: float, strike: float, years: float, rate: float, volatility: float) -> float:
    """The closed form with the exact normal CDF (math.erf), independent of the examples' code."""
    volatility_sqrt_t = volatility * math.sqrt(years)
    d1 = (math.log(spot / strike) + (rate + volatility**2 / 2) * years) / volatility_sqrt_t
    d2 = d1 - volatility_sqrt_t
    return spot * exact_normal_cdf(d1) - strike * math.exp(-rate * years) * exact_normal_cdf(d2)


def test_every_example_program_is_tested():
    assert {path.stem for path in EXAMPLES.glob("*.py")} - NOT_AN_EXAMPLE_PROGRAM == set(EXAMPLE_NAMES)


# Under the runner: the numbers agree to float rounding (sums of many terms in another order); counts
# and labels exactly. A rounding-level figure (the parity error, about 2e-5) passes by the absolute term.
RUNNER = (sys.executable, "-m", "dynfuse", "run", "--report", "none")


@pytest.fixture(scope="module")
def private_kernel_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("kernel-cache"))


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_examples_print_the_same_results_under_the_runner(name, private_kernel_cache, monkeypatch):
    """Every kernel compiled (DYNFUSE_TIERS=0), as at a size where the tiers would compile them."""
    monkeypatch.setenv("DYNFUSE_TIERS", "0")
    monkeypatch.setenv("DYNFUSE_CACHE_DIR", private_kernel_cache)
    completed = run_example(name, RUNNER)
    assert completed.returncode == 0, completed.stderr
    expected, printed = results_of(name), example_results(completed.stdout)
    assert printed.keys() == expected.keys()
    for label, numbers in expected.items():
        assert len(printed[label]) == len(numbers), label
        for ours, theirs in zip(printed[label], numbers, strict=True):
            assert math.isclose(ours, theirs, rel_tol=1e-5, abs_tol=1e-4), (label, ours, theirs)


def test_the_demo_compares_a_runner_run_with_plain_python(private_kernel_cache, monkeypatch):
    monkeypatch.setenv("DYNFUSE_CACHE_DIR", private_kernel_cache)
    command = [sys.executable, str(EXAMPLES / "demo.py"), "--size", "small", "black_scholes.py"]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "dynfuse run printed the same results" in completed.stdout
    assert "speedup" in completed.stdout and "kernels" in completed.stdout


def test_the_demo_flags_results_that_differ():
    demo = load_example("demo")
    assert demo.numbers_differ("price: 1.5\ncount: 3\n", "price: 1.50001\ncount: 3\n") == []
    assert demo.numbers_differ("price: 1.5\n", "price: 1.6\n") == ["python: price: 1.5\ndynfuse: price: 1.6"]
    assert demo.numbers_differ("price: 1.5\n", "cost: 1.5\n") != []
    assert demo.numbers_differ("a: 1\n", "a: 1\nb: 2\n") == ["1 lines under python, 2 under dynfuse"]


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_examples_are_deterministic(name):
    assert run_example(name).stdout == plain_output(name)


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_examples_refuse_an_unknown_size(name):
    completed = run_example(name, size="huge")
    assert completed.returncode == 2
    assert "--size" in completed.stderr and "huge" in completed.stderr


def test_black_scholes_prices_obey_put_call_parity_and_the_closed_form():
    results = results_of("black_scholes")
    options = value(results, "options")
    assert 0 < value(results, "calls in the money") < options
    mean_call, mean_put = value(results, "mean call price"), value(results, "mean put price")
    assert mean_call > 0 and mean_put > 0
    assert value(results, "book value (calls + puts)") == pytest.approx(
        options * (mean_call + mean_put), rel=1e-4
    )
    # float32 prices of up to ~100: a few ulps of rounding, nothing like a wrong formula
    assert value(results, "max put-call parity error") < 1e-3

    exact_call = black_scholes_call(spot=100.0, strike=100.0, years=1.0, rate=0.05, volatility=0.2)
    exact_put = exact_call - 100.0 + 100.0 * math.exp(-0.05)
    textbook = "(S=K=100, T=1, r=0.05, vol=0.2)"
    # A&S 7.1.26 is within 1.5e-7 of erf; the output has six significant digits
    assert value(results, f"textbook call {textbook}") == pytest.approx(exact_call, abs=1e-4)
    assert value(results, f"textbook put {textbook}") == pytest.approx(exact_put, abs=1e-4)


def test_black_scholes_normal_cdf_is_within_the_approximation_error():
    normal_cdf = load_example("black_scholes").normal_cdf
    x = np.linspace(-8.0, 8.0, 2001)
    exact = np.array([exact_normal_cdf(point) for point in x])
    # A&S 7.1.26 is within 1.5e-7 of erf, so within 7.5e-8 of the CDF
    assert np.abs(normal_cdf(x) - exact).max() < 1e-7
    assert normal_cdf(x.astype(np.float32)).dtype == np.float32


def test_heat_diffusion_cools_the_plate_through_its_edges():
    results = results_of("heat_diffusion")
    (side, side_again) = results["grid"]
    assert side == side_again
    states = labelled(results, "step ")
    steps = [step for step, _ in states]
    assert len(steps) >= 3 and steps[0] == 0 and all(a < b for a, b in itertools.pairwise(steps))
    total_heat = [numbers[0] for _, numbers in states]
    max_temperature = [numbers[1] for _, numbers in states]
    assert all(later < earlier for earlier, later in itertools.pairwise(total_heat))
    assert never_increases(max_temperature, 1e-12)
    assert 0 < max_temperature[0] <= 100
    # a convex combination of neighbours never leaves [0, max]
    assert 0 <= value(results, "coldest interior point") <= max_temperature[-1]
    assert 0 < value(results, "points above 50 degrees") < (side - 2) ** 2


def test_kmeans_converges_to_the_hidden_centres():
    results = results_of("kmeans")
    points = value(results, "points")
    iterations = labelled(results, "iteration ")
    assert [number for number, _ in iterations] == list(range(1, len(iterations) + 1))
    inertia = [numbers[0] for _, numbers in iterations]
    reassigned = [numbers[1] for _, numbers in iterations]
    assert reassigned[0] == points and reassigned[-1] == 0
    assert never_increases(inertia, 1e-9)
    # unit-variance blobs in 4 dimensions: about 4 per point once the clusters are found
    assert inertia[-1] / points == pytest.approx(4.0, rel=0.1)
    smallest, largest = results["smallest and largest cluster"]
    assert 0 < smallest <= largest < points
    assert value(results, "centroid spread (std of coordinates)") > 1
    assert value(results, "worst distance from a hidden centre to its nearest centroid") < 0.5


def test_transformer_mlp_keeps_float32_and_finite_activations():
    results = results_of("transformer_mlp")
    assert plain_output("transformer_mlp").count("output dtype: float32\n") == 1
    tokens, width, layer_count = results["tokens"]
    assert tokens > 0 and width > 0
    layers = labelled(results, "layer ")
    assert [number for number, _ in layers] == list(range(1, int(layer_count) + 1))
    for _, (output_std, active_fraction) in layers:
        assert 0.5 < output_std < 10
        # GELU is positive exactly where its input is; the pre-activations are roughly symmetric
        assert 0.3 < active_fraction < 0.7
    largest = value(results, "output max |x|")
    assert largest > layers[-1][1][0]
    assert abs(value(results, "output mean")) < largest
    first_features = results["first token, first features"]
    assert len(first_features) == 4 and all(abs(feature) <= largest for feature in first_features)


def test_transformer_layernorm_gelu_and_residual():
    example = load_example("transformer_mlp")
    rng = np.random.default_rng(1)
    x = 1.0 + 3.0 * rng.standard_normal((3, 5, 64), dtype=np.float32)
    normalized = example.layernorm(x, np.ones(64, np.float32), np.zeros(64, np.float32))
    assert normalized.dtype == np.float32
    np.testing.assert_allclose(normalized.mean(axis=-1), 0.0, atol=1e-5)
    np.testing.assert_allclose(normalized.var(axis=-1), 1.0, rtol=1e-4)

    grid = np.linspace(-6.0, 6.0, 1201)
    exact_gelu = grid * np.array([exact_normal_cdf(point) for point in grid])
    # the tanh form is within 5e-4 of x * Phi(x) everywhere
    assert np.abs(example.gelu(grid) - exact_gelu).max() < 5e-4
    assert example.gelu(x).dtype == np.float32

    layer = example.random_layer(rng, 64)
    layer["down"] = np.zeros_like(layer["down"])
    layer["down_bias"] = np.zeros_like(layer["down_bias"])
    output, hidden = example.mlp_block(x, layer)
    np.testing.assert_array_equal(output, x)
    assert hidden.shape == (3, 5, 64 * example.EXPANSION) and hidden.dtype == np.float32


def test_julia_escape_times_add_up():
    results = results_of("julia")
    pixels, iterations = results["pixels"]
    fast = value(results, "escaped in under 10 iterations")
    slow = value(results, "escaped in 10 or more")
    never = value(results, "never escaped")
    assert fast + slow + never == pixels and min(fast, slow, never) > 0
    # the mean lies between what the three bands allow
    total_time = value(results, "mean escape time") * pixels
    assert 10 * slow + iterations * never <= total_time * (1 + 1e-5)
    assert total_time * (1 - 1e-5) <= 9 * fast + (iterations - 1) * slow + iterations * never
    assert 0 <= value(results, "escape time at the centre") <= iterations


def test_monte_carlo_european_price_agrees_with_black_scholes():
    results = results_of("monte_carlo")
    paths, steps = results["paths"]
    assert paths > 0 and steps == 252
    exact = black_scholes_call(spot=100.0, strike=100.0, years=1.0, rate=0.05, volatility=0.2)
    assert value(results, "european call, black-scholes") == pytest.approx(exact, rel=1e-5)
    european, european_error = results["european call"]
    asian, asian_error = results["asian call"]
    assert 0 < european_error < european and 0 < asian_error < asian
    assert abs(european - exact) < 4 * european_error
    # averaging lowers the volatility the option sees, so the Asian call is cheaper
    assert asian < european
