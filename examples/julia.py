"""Escape times of the Julia set of z -> z^2 + c, for c = -0.8 + 0.156i, on an image grid.

Each pixel is a starting point z0 in [-1.6, 1.6] x [-0.9, 0.9]. The map is iterated on the real
and imaginary parts as separate float64 arrays; a point has escaped once |z| > 2, and from then on
it is left where it is (np.where), so it stays finite. A pixel's escape time is the number of
iterations it stayed bounded: what a renderer would colour by. Prints how many pixels escaped when.
"""

import argparse

import numpy as np

SIZES = {"small": (160, 90), "demo": (1920, 1080)}  # image width, height in pixels
ITERATIONS = 100
C_REAL, C_IMAG = -0.8, 0.156


def escape_times(x: np.ndarray, y: np.ndarray, iterations: int) -> np.ndarray:
    """Per pixel, the number of iterations before |z| exceeded 2 (`iterations` if it never did)."""
    times = np.zeros(x.shape, dtype=np.int32)
    for _ in range(iterations):
        x_squared, y_squared = x * x, y * y
        bounded = x_squared + y_squared <= 4.0
        x, y = (
            np.where(bounded, x_squared - y_squared + C_REAL, x),
            np.where(bounded, 2.0 * x * y + C_IMAG, y),
        )
        times += bounded
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", choices=SIZES, default="demo")
    width, height = SIZES[parser.parse_args().size]

    x, y = np.meshgrid(np.linspace(-1.6, 1.6, width), np.linspace(-0.9, 0.9, height))
    times = escape_times(x, y, ITERATIONS)

    print(f"pixels: {times.size}, iterations: {ITERATIONS}")
    print(f"escaped in under 10 iterations: {(times < 10).sum()}")
    print(f"escaped in 10 or more: {((times >= 10) & (times < ITERATIONS)).sum()}")
    print(f"never escaped: {(times == ITERATIONS).sum()}")
    print(f"mean escape time: {times.mean():.6g}")
    print(f"escape time at the centre: {times[height // 2, width // 2]}")


if __name__ == "__main__":
    main()
