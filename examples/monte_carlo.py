"""Monte-Carlo price of an arithmetic-average Asian call option, with its standard error.

Simulates stock price paths under risk-neutral geometric Brownian motion, one step per trading day
for a year, in batches of paths (as a pricer does, to bound memory). The Asian call pays the excess
of the average daily price over the strike, and has no closed form; the European call on the same
paths pays on the final price, and has one (Black-Scholes), so it checks the simulation: the
estimate should lie within a few standard errors of the exact price.
"""

import argparse
import math

import numpy as np

SIZES = {"small": (1, 2_000), "demo": (20, 10_000)}  # batches, paths per batch
SPOT, STRIKE, RATE, VOLATILITY, YEARS = 100.0, 100.0, 0.05, 0.2, 1.0
TRADING_DAYS = 252


def simulate_prices(rng: np.random.Generator, paths: int) -> np.ndarray:
    """Daily prices of `paths` independent paths (rows), by exponentiating summed log-returns."""
    step = YEARS / TRADING_DAYS
    drift = (RATE - 0.5 * VOLATILITY**2) * step
    log_returns = drift + VOLATILITY * math.sqrt(step) * rng.standard_normal((paths, TRADING_DAYS))
    return SPOT * np.exp(np.cumsum(log_returns, axis=1))


def discounted_estimate(payoffs: np.ndarray) -> tuple[float, float]:
    """The present value of the mean payoff and its standard error."""
    discount = math.exp(-RATE * YEARS)
    return discount * payoffs.mean(), discount * payoffs.std(ddof=1) / math.sqrt(payoffs.size)


def normal_cdf(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def black_scholes_call() -> float:
    """The exact European call price, for the check."""
    volatility_sqrt_t = VOLATILITY * math.sqrt(YEARS)
    d1 = (math.log(SPOT / STRIKE) + (RATE + 0.5 * VOLATILITY**2) * YEARS) / volatility_sqrt_t
    d2 = d1 - volatility_sqrt_t
    return SPOT * normal_cdf(d1) - STRIKE * math.exp(-RATE * YEARS) * normal_cdf(d2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", choices=SIZES, default="demo")
    batches, paths_per_batch = SIZES[parser.parse_args().size]

    rng = np.random.default_rng(12345)
    asian_payoffs, european_payoffs = [], []
    for _ in range(batches):
        prices = simulate_prices(rng, paths_per_batch)
        asian_payoffs.append(np.maximum(prices.mean(axis=1) - STRIKE, 0.0))
        european_payoffs.append(np.maximum(prices[:, -1] - STRIKE, 0.0))

    asian_price, asian_error = discounted_estimate(np.concatenate(asian_payoffs))
    european_price, european_error = discounted_estimate(np.concatenate(european_payoffs))
    print(f"paths: {batches * paths_per_batch}, steps: {TRADING_DAYS}")
    print(f"asian call: {asian_price:.6g} +- {asian_error:.6g}")
    print(f"european call: {european_price:.6g} +- {european_error:.6g}")
    print(f"european call, black-scholes: {black_scholes_call():.6g}")


if __name__ == "__main__":
    main()
