"""Heat diffusion on a square plate: the 2-D heat equation by explicit finite differences.

The plate starts at random temperatures; its edges are held at 0, so heat flows out of it. Each
step replaces every interior point by itself plus alpha times the discrete Laplacian (the five-point
stencil); alpha <= 1/4 keeps the scheme stable. Prints the total heat and the hottest point as the
plate cools.
"""

import argparse

import numpy as np

SIZES = {"small": (128, 10), "demo": (2048, 25)}  # grid points per side, time steps between reports
ALPHA = 0.24
REPORTS = 4


def initial_plate(points: int, rng: np.random.Generator) -> np.ndarray:
    """Random temperatures between 0 and 100 (a rough start that diffusion smooths) and cold edges."""
    plate = rng.uniform(0.0, 100.0, (points, points))
    plate[0, :] = plate[-1, :] = plate[:, 0] = plate[:, -1] = 0.0
    return plate


def diffuse(plate: np.ndarray, steps: int) -> np.ndarray:
    """Advance the plate by `steps` explicit steps, in place; the edges keep their values."""
    for _ in range(steps):
        centre = plate[1:-1, 1:-1]
        laplacian = plate[2:, 1:-1] + plate[:-2, 1:-1] + plate[1:-1, 2:] + plate[1:-1, :-2] - 4.0 * centre
        plate[1:-1, 1:-1] = centre + ALPHA * laplacian
    return plate


def print_state(step: int, plate: np.ndarray) -> None:
    print(f"step {step}: total heat {plate.sum():.6g}, max temperature {plate.max():.6g}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", choices=SIZES, default="demo")
    points, steps_per_report = SIZES[parser.parse_args().size]

    plate = initial_plate(points, np.random.default_rng(7))
    print(f"grid: {points} x {points}")
    print_state(0, plate)
    for report in range(1, REPORTS + 1):
        diffuse(plate, steps_per_report)
        print_state(report * steps_per_report, plate)
    print(f"coldest interior point: {plate[1:-1, 1:-1].min():.6g}")
    print(f"points above 50 degrees: {(plate > 50.0).sum()}")


if __name__ == "__main__":
    main()
