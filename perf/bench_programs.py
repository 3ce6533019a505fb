"""NumPy programs as scientists write them: stencils with slice writes, time loops, sweeps, windows.

dynfuse is fast on the programs it was shaped around; this measures it on programs written the way
everyday scientific scripts and published NumPy benchmark suites write them (each written for this
file): Jacobi and heat stencils by slices with ping-pong, a relaxation checked for convergence with
``np.allclose`` at every step, an FDTD update with in-place ``-=`` on
shifted slices and a boundary row written every step, a lid-driven cavity (Navier-Stokes) step with
an inner pressure iteration and boundary conditions, a periodic reaction-diffusion by ``np.roll``, a
sliding-window convolution as Python loops over output positions, a tridiagonal (Thomas) sweep along
one axis, a vertical advection sweep over levels, a Python loop over rows, a clipped and masked
in-place update, a leapfrog wave equation, the Game of Life, a complex escape-time iteration
written with ``where`` and with masks, an interference pattern of complex amplitudes, statistics
of a field above levels, gradient descent under softmax cross-entropy (gathers and a scatter), a
pair energy over the upper triangle's index pairs, haversine distances, and outliers clipped and
counted.

Every program is a function of the namespace it gets (NumPy or ``dynfuse.numpy``), so both run the
same code; its arrays are made by that namespace's creation functions, as ``dynfuse run`` makes a
script's. Each runs at a small size (grids about 100², or 30³) and a medium size (about 400², or
60³). Its dynfuse result is first checked against NumPy's (float64 to 1e-10 relative, integers
exactly): a mismatch or an error is reported FAIL and not timed. Then:
- steady state: each namespace in a process of its own (``timing.measure_in_processes``), warmed
  up (dynfuse's kernels compiled, tiers settled), timed in interleaved rounds, medians;
- first run (medium size): one call in a fresh process with an empty kernel cache, compiling
  included, against NumPy's first call in that process, each on inputs computed before it; the
  medians of ``FIRST_RUNS`` processes.
The Jacobi statement is also timed alone, per statement, at 150², 350² and 1000².

Writes the "programs" section of perf/RESULTS.md; with ``--print-only`` or ``--only``, writes nothing.

    python perf/bench_programs.py [--quick] [--repeats N] [--only TEXT] [--print-only]
"""

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy
from bench_overhead import check, cpu_model, materialize
from timing import Timing, measure_in_processes, one_call, serve_warmed, write_results_section

import dynfuse
import dynfuse.numpy as dnp

NAMESPACES = {"NumPy": numpy, "dynfuse": dnp}
SAMPLE_SECONDS = 0.02  # a timed sample repeats a fast call until it lasts about this long


# ---- the programs ------------------------------------------------------------------------------


def jacobi_2d(np, A0, steps):
    A = A0.copy()
    B = A0.copy()
    for _ in range(steps):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1] + B[:-2, 1:-1])
    return A


def relax_until_converged(np, u0, tolerance, most_steps):
    """Laplace's equation relaxed by Jacobi steps until one changes no value by more than the
    tolerance, convergence checked with ``np.allclose`` at every step as scripts check it."""
    u = u0.copy()
    for _ in range(most_steps):
        new = u.copy()
        new[1:-1, 1:-1] = 0.25 * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2])
        if np.allclose(new, u, rtol=0, atol=tolerance):
            return new
        u = new
    return u


def heat_3d(np, T0, steps):
    A = T0.copy()
    B = T0.copy()
    alpha = 0.125
    for _ in range(steps):
        c = A[1:-1, 1:-1, 1:-1]
        B[1:-1, 1:-1, 1:-1] = (
            c
            + alpha * (A[2:, 1:-1, 1:-1] - 2.0 * c + A[:-2, 1:-1, 1:-1])
            + alpha * (A[1:-1, 2:, 1:-1] - 2.0 * c + A[1:-1, :-2, 1:-1])
            + alpha * (A[1:-1, 1:-1, 2:] - 2.0 * c + A[1:-1, 1:-1, :-2])
        )
        A, B = B, A
    return A


def fdtd_2d(np, ex0, ey0, hz0, source):
    ex, ey, hz = ex0.copy(), ey0.copy(), hz0.copy()
    for t in range(source.shape[0]):
        ey[0, :] = source[t]
        ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] -= 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] -= 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])
    return ex, ey, hz


def cavity_flow(np, n, steps, pressure_iterations):
    """A lid-driven cavity: the lid (top row) moves, the other walls hold the fluid still."""
    dx = dy = 2.0 / (n - 1)
    rho, nu, dt = 1.0, 0.1, 0.001
    u = np.zeros((n, n))
    v = np.zeros((n, n))
    p = np.zeros((n, n))
    b = np.zeros((n, n))
    for _ in range(steps):
        dudx = (u[1:-1, 2:] - u[1:-1, :-2]) / (2 * dx)
        dudy = (u[2:, 1:-1] - u[:-2, 1:-1]) / (2 * dy)
        dvdx = (v[1:-1, 2:] - v[1:-1, :-2]) / (2 * dx)
        dvdy = (v[2:, 1:-1] - v[:-2, 1:-1]) / (2 * dy)
        b[1:-1, 1:-1] = rho * ((dudx + dvdy) / dt - dudx**2 - 2 * dudy * dvdx - dvdy**2)
        for _ in range(pressure_iterations):
            pn = p.copy()
            p[1:-1, 1:-1] = (
                (pn[1:-1, 2:] + pn[1:-1, :-2]) * dy**2 + (pn[2:, 1:-1] + pn[:-2, 1:-1]) * dx**2
            ) / (2 * (dx**2 + dy**2)) - dx**2 * dy**2 / (2 * (dx**2 + dy**2)) * b[1:-1, 1:-1]
            p[:, -1] = p[:, -2]
            p[0, :] = p[1, :]
            p[:, 0] = p[:, 1]
            p[-1, :] = 0.0
        un = u.copy()
        vn = v.copy()
        uc, vc = un[1:-1, 1:-1], vn[1:-1, 1:-1]
        u[1:-1, 1:-1] = (
            uc
            - uc * dt / dx * (uc - un[1:-1, :-2])
            - vc * dt / dy * (uc - un[:-2, 1:-1])
            - dt / (2 * rho * dx) * (p[1:-1, 2:] - p[1:-1, :-2])
            + nu * dt / dx**2 * (un[1:-1, 2:] - 2 * uc + un[1:-1, :-2])
            + nu * dt / dy**2 * (un[2:, 1:-1] - 2 * uc + un[:-2, 1:-1])
        )
        v[1:-1, 1:-1] = (
            vc
            - uc * dt / dx * (vc - vn[1:-1, :-2])
            - vc * dt / dy * (vc - vn[:-2, 1:-1])
            - dt / (2 * rho * dy) * (p[2:, 1:-1] - p[:-2, 1:-1])
            + nu * dt / dx**2 * (vn[1:-1, 2:] - 2 * vc + vn[1:-1, :-2])
            + nu * dt / dy**2 * (vn[2:, 1:-1] - 2 * vc + vn[:-2, 1:-1])
        )
        u[0, :] = 0.0
        u[:, 0] = 0.0
        u[:, -1] = 0.0
        u[-1, :] = 1.0
        v[0, :] = 0.0
        v[-1, :] = 0.0
        v[:, 0] = 0.0
        v[:, -1] = 0.0
    return u, v, p


def _laplacian(np, Z):
    return (
        np.roll(Z, 1, axis=0)
        + np.roll(Z, -1, axis=0)
        + np.roll(Z, 1, axis=1)
        + np.roll(Z, -1, axis=1)
        - 4 * Z
    )


def gray_scott(np, U0, V0, steps):
    U, V = U0.copy(), V0.copy()
    Du, Dv, feed, kill = 0.16, 0.08, 0.035, 0.065
    for _ in range(steps):
        UVV = U * V * V
        U += Du * _laplacian(np, U) - UVV + feed * (1 - U)
        V += Dv * _laplacian(np, V) + UVV - (feed + kill) * V
    return U, V


def window_convolution(np, image, weights):
    k = weights.shape[0]
    rows, cols = image.shape[0] - k + 1, image.shape[1] - k + 1
    out = np.empty((rows, cols))
    for i in range(rows):
        for j in range(cols):
            out[i, j] = (image[i : i + k, j : j + k] * weights).sum()
    return out


def thomas_sweep(np, a, b, c, d):
    """Tridiagonal systems along axis 0, one per column, solved together."""
    n = d.shape[0]
    cp = np.empty_like(d)
    dp = np.empty_like(d)
    cp[0] = c[0] / b[0]
    dp[0] = d[0] / b[0]
    for i in range(1, n):
        denominator = b[i] - a[i] * cp[i - 1]
        cp[i] = c[i] / denominator
        dp[i] = (d[i] - a[i] * dp[i - 1]) / denominator
    x = np.empty_like(d)
    x[-1] = dp[-1]
    for i in range(n - 2, -1, -1):
        x[i] = dp[i] - cp[i] * x[i + 1]
    return x


def vertical_advection(np, q0, w, steps):
    """Upwind advection of a tracer through the levels of a column model (axis 0)."""
    q = q0.copy()
    levels = q.shape[0]
    flux = np.zeros_like(q)
    dt = 0.2
    for _ in range(steps):
        for k in range(1, levels):
            flux[k] = np.where(w[k] > 0, w[k] * q[k - 1], w[k] * q[k])
        for k in range(levels - 1):
            q[k] -= dt * (flux[k + 1] - flux[k])
    return q


def row_loop(np, a, scale, bias):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = np.tanh(a[i] * scale + bias[i])
    return out


def clipped_update(np, x0, gradient, steps):
    x = x0.copy()
    for _ in range(steps):
        x -= 0.1 * gradient * (x - 0.5)
        np.clip(x, -1.0, 1.0, out=x)
        x[x < -0.9] = 0.0
    return x


def wave_2d(np, u0, steps):
    previous = u0.copy()
    u = u0.copy()
    c2 = 0.25
    for _ in range(steps):
        following = np.zeros_like(u)
        following[1:-1, 1:-1] = (
            2 * u[1:-1, 1:-1]
            - previous[1:-1, 1:-1]
            + c2 * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - 4 * u[1:-1, 1:-1])
        )
        previous, u = u, following
    return u


def game_of_life(np, Z0, steps):
    Z = Z0.copy()
    for _ in range(steps):
        N = (
            Z[0:-2, 0:-2] + Z[0:-2, 1:-1] + Z[0:-2, 2:]
            + Z[1:-1, 0:-2] + Z[1:-1, 2:]
            + Z[2:, 0:-2] + Z[2:, 1:-1] + Z[2:, 2:]
        )  # fmt: skip
        birth = (N == 3) & (Z[1:-1, 1:-1] == 0)
        survive = ((N == 2) | (N == 3)) & (Z[1:-1, 1:-1] == 1)
        Z[...] = 0
        Z[1:-1, 1:-1][birth | survive] = 1
    return Z


def escape_time(np, c, steps):
    """A Julia-set iteration as written without masks: points that escaped keep their value."""
    z = c.copy()
    count = np.zeros(c.shape, dtype=np.int64)
    for _ in range(steps):
        inside = np.abs(z) <= 2.0
        z = np.where(inside, z * z + (-0.8 + 0.156j), z)
        count += inside
    return count, z


def escape_time_masked(np, c, steps):
    """The same iteration as NumPy tutorials write it, updating only the points still inside."""
    z = np.zeros_like(c)
    count = np.zeros(c.shape, dtype=np.int64)
    for k in range(steps):
        inside = np.abs(z) <= 2.0
        count[inside] = k
        z[inside] = z[inside] ** 2 + c[inside]
    return count


def exceedance_statistics(np, field, levels):
    """Mean, spread and peak of a field where it exceeds each of a list of levels, as a report of
    extremes tabulates them: a selection of another size at every level."""
    rows = []
    for level in levels:
        above = field[field > level]
        rows.append([float(above.mean()), float(above.std()), float(above.max())])
    return np.array(rows)


def cross_entropy_descent(np, logits0, labels, steps):
    """Gradient descent on a batch of logits under softmax cross-entropy, as a classifier's training
    loop writes it: each sample's probability of its own class gathered for the loss (printed each
    step), one subtracted there by a scatter for the gradient."""
    logits = logits0.copy()
    rows = np.arange(logits.shape[0])
    losses = []
    for _ in range(steps):
        shifted = logits - logits.max(axis=1, keepdims=True)
        probabilities = np.exp(shifted)
        probabilities /= probabilities.sum(axis=1, keepdims=True)
        losses.append(float(-np.log(probabilities[rows, labels]).mean()))
        gradient = probabilities
        gradient[rows, labels] -= 1.0
        logits -= 0.5 * gradient / len(labels)
    return logits, np.array(losses)


def pair_energy(np, positions):
    """Lennard-Jones energy of a cluster, each pair once: the upper triangle's index pairs gather the
    two ends of every bond."""
    first, second = np.triu_indices(len(positions), k=1)
    distance = np.linalg.norm(positions[first] - positions[second], axis=1)
    ratio6 = (0.05 / distance) ** 6
    return 4.0 * (ratio6 * ratio6 - ratio6).sum()


def haversine(np, latitude1, longitude1, latitude2, longitude2):
    """Great-circle distances in km between pairs of points given in degrees."""
    latitude1, longitude1, latitude2, longitude2 = (
        np.radians(angle) for angle in (latitude1, longitude1, latitude2, longitude2)
    )
    half_chord = (
        np.sin((latitude2 - latitude1) / 2) ** 2
        + np.cos(latitude1) * np.cos(latitude2) * np.sin((longitude2 - longitude1) / 2) ** 2
    )
    return 6371.0 * 2 * np.arcsin(np.sqrt(half_chord))


def clip_outliers(np, data):
    """Each column's values past three standard deviations clipped back to that bound, and how
    many were, as a data-cleaning script reports them."""
    mean, spread = data.mean(axis=0), data.std(axis=0)
    cleaned = np.clip(data, mean - 3 * spread, mean + 3 * spread)
    return cleaned, np.count_nonzero(cleaned != data, axis=0)


def interference(np, x, y, sources, wavenumber):
    """Intensity and phase on a screen of waves from point sources, summed as complex amplitudes, as
    an optics exercise computes a diffraction pattern."""
    field = np.zeros(x.shape, dtype=np.complex128)
    for sx, sy in sources:
        r = np.sqrt((x - sx) ** 2 + (y - sy) ** 2)
        field += np.exp(1j * wavenumber * r) / r
    intensity = field.real**2 + field.imag**2
    phase = np.angle(field)
    return intensity, phase


def screen(np, side, count):
    """A screen's grid of points, and ``count`` point sources on a line behind it."""
    x, y = np.meshgrid(np.linspace(-1.0, 1.0, side), np.linspace(-1.0, 1.0, side))
    sources = [(0.2 * k - 0.1 * (count - 1), -1.5) for k in range(count)]
    return x, y, sources, 40.0


def complex_plane(np, side):
    real = np.linspace(-1.6, 1.6, side)
    imaginary = np.linspace(-1.0, 1.0, side)
    return real[None, :] + 1j * imaginary[:, None]


# ---- their inputs, made by the namespace's own functions ------------------------------------------


def smooth_grid(np, *shape):
    """A smooth field with a bump: values a stencil changes at every point."""
    axes = [np.linspace(0.0, 1.0, extent) for extent in shape]
    field = np.ones(shape)
    for axis, values in enumerate(axes):
        field = field * np.sin(3.0 * values).reshape([-1 if i == axis else 1 for i in range(len(shape))])
    return field


def random_values(np, seed, *shape):
    return np.asarray(numpy.random.default_rng(seed).random(shape))


def heavy_tailed(np, seed, *shape):
    return np.asarray(numpy.random.default_rng(seed).standard_t(3, shape))


def coordinates(np, seed, count):
    """Latitudes and longitudes in degrees, two points for each of ``count`` pairs."""
    draw = numpy.random.default_rng(seed)
    return tuple(np.asarray(draw.uniform(-limit, limit, count)) for limit in (90, 180, 90, 180))


def class_labels(np, seed, samples, classes):
    return np.asarray(numpy.random.default_rng(seed).integers(0, classes, samples))


@dataclass(frozen=True)
class Program:
    """A program at one size: ``setup(np)`` gives its arguments, ``run(np, *arguments)`` its result."""

    name: str
    size: str
    medium: bool  # the medium size, else the small one
    run: Callable
    setup: Callable

    @property
    def label(self) -> str:
        return f"{self.name}, {self.size}"


def programs() -> list[Program]:
    """Each program at its small size, then its medium size."""
    # A smooth field stepped 50 times at 100², 20 times at 400² (Jacobi, the wave equation)
    smooth_2d = {
        "100²": lambda np: (smooth_grid(np, 100, 100), 50),
        "400²": lambda np: (smooth_grid(np, 400, 400), 20),
    }
    # Points of the complex plane iterated 30 times
    complex_planes = {
        "100²": lambda np: (complex_plane(np, 100), 30),
        "400²": lambda np: (complex_plane(np, 400), 30),
    }
    table: list[tuple[str, Callable, dict[str, Callable]]] = [
        ("Jacobi 2-D, ping-pong", jacobi_2d, smooth_2d),
        (
            "Laplace relaxed until np.allclose",
            relax_until_converged,
            {
                "100²": lambda np: (smooth_grid(np, 100, 100), 1e-6, 50),
                "400²": lambda np: (smooth_grid(np, 400, 400), 1e-6, 20),
            },
        ),
        (
            "heat 3-D, 7 points",
            heat_3d,
            {
                "30³": lambda np: (smooth_grid(np, 30, 30, 30), 50),
                "60³": lambda np: (smooth_grid(np, 60, 60, 60), 20),
            },
        ),
        (
            "FDTD 2-D, in-place on shifted slices",
            fdtd_2d,
            {
                "100²": lambda np: (
                    *(random_values(np, s, 100, 100) for s in (1, 2, 3)),
                    np.linspace(0, 1, 50),
                ),
                "400²": lambda np: (
                    *(random_values(np, s, 400, 400) for s in (1, 2, 3)),
                    np.linspace(0, 1, 20),
                ),
            },
        ),
        (
            "lid-driven cavity",
            cavity_flow,
            {"41²": lambda np: (41, 20, 20), "161²": lambda np: (161, 10, 20)},
        ),
        (
            "Gray-Scott by np.roll",
            gray_scott,
            {
                "100²": lambda np: (
                    1 - 0.5 * random_values(np, 4, 100, 100),
                    0.25 * random_values(np, 5, 100, 100),
                    50,
                ),
                "400²": lambda np: (
                    1 - 0.5 * random_values(np, 4, 400, 400),
                    0.25 * random_values(np, 5, 400, 400),
                    10,
                ),
            },
        ),
        (
            "sliding-window convolution, loops",
            window_convolution,
            {
                "30²": lambda np: (random_values(np, 6, 30, 30), random_values(np, 7, 5, 5)),
                "60²": lambda np: (random_values(np, 6, 60, 60), random_values(np, 7, 5, 5)),
            },
        ),
        (
            "Thomas sweep along an axis",
            thomas_sweep,
            {
                f"{n}²": lambda np, n=n: (
                    random_values(np, 8, n, n),
                    4 + random_values(np, 9, n, n),
                    random_values(np, 10, n, n),
                    random_values(np, 11, n, n),
                )
                for n in (100, 400)
            },
        ),
        (
            "vertical advection over levels",
            vertical_advection,
            {
                "30³": lambda np: (
                    random_values(np, 12, 30, 30, 30),
                    random_values(np, 13, 30, 30, 30) - 0.5,
                    5,
                ),
                "60³": lambda np: (
                    random_values(np, 12, 60, 60, 60),
                    random_values(np, 13, 60, 60, 60) - 0.5,
                    2,
                ),
            },
        ),
        (
            "a Python loop over rows",
            row_loop,
            {
                "100²": lambda np: (random_values(np, 14, 100, 100), 0.5, random_values(np, 15, 100, 1)),
                "400²": lambda np: (random_values(np, 14, 400, 400), 0.5, random_values(np, 15, 400, 1)),
            },
        ),
        (
            "clipped and masked in-place update",
            clipped_update,
            {
                "100²": lambda np: (
                    random_values(np, 16, 100, 100) * 2 - 1,
                    random_values(np, 17, 100, 100),
                    50,
                ),
                "400²": lambda np: (
                    random_values(np, 16, 400, 400) * 2 - 1,
                    random_values(np, 17, 400, 400),
                    20,
                ),
            },
        ),
        ("wave 2-D, leapfrog", wave_2d, smooth_2d),
        (
            "complex escape time, where",
            escape_time,
            complex_planes,
        ),
        (
            "complex escape time, masked",
            escape_time_masked,
            complex_planes,
        ),
        (
            "interference of point sources, complex",
            interference,
            {
                "100²": lambda np: screen(np, 100, 8),
                "400²": lambda np: screen(np, 400, 8),
            },
        ),
        (
            "exceedance statistics",
            exceedance_statistics,
            {
                "100²": lambda np: (random_values(np, 19, 100, 100), [0.05 * k for k in range(1, 20)]),
                "400²": lambda np: (random_values(np, 19, 400, 400), [0.05 * k for k in range(1, 20)]),
            },
        ),
        (
            "cross-entropy descent, gathers and a scatter",
            cross_entropy_descent,
            {
                "100x100": lambda np: (
                    random_values(np, 20, 100, 100) * 4,
                    class_labels(np, 21, 100, 100),
                    20,
                ),
                "1600x100": lambda np: (
                    random_values(np, 20, 1600, 100) * 4,
                    class_labels(np, 21, 1600, 100),
                    10,
                ),
            },
        ),
        (
            "pair energy over the upper triangle",
            pair_energy,
            {
                "150 atoms": lambda np: (random_values(np, 22, 150, 3),),
                "600 atoms": lambda np: (random_values(np, 22, 600, 3),),
            },
        ),
        (
            "haversine distances",
            haversine,
            {
                "2^16 pairs": lambda np: coordinates(np, 23, 1 << 16),
                "2^22 pairs": lambda np: coordinates(np, 23, 1 << 22),
            },
        ),
        (
            "outliers clipped and counted",
            clip_outliers,
            {
                "2000x8": lambda np: (heavy_tailed(np, 24, 2000, 8),),
                "100000x8": lambda np: (heavy_tailed(np, 24, 100000, 8),),
            },
        ),
        (
            "Game of Life",
            game_of_life,
            {
                "100²": lambda np: ((random_values(np, 18, 100, 100) < 0.3).astype(np.int64), 50),
                "400²": lambda np: ((random_values(np, 18, 400, 400) < 0.3).astype(np.int64), 20),
            },
        ),
    ]
    return [
        Program(name, size, index == 1, run, setup)
        for name, run, sizes in table
        for index, (size, setup) in enumerate(sizes.items())
    ]


# ---- measuring -----------------------------------------------------------------------------------


@dataclass
class Row:
    program: Program
    timings: dict[str, Timing]
    counters: dict[str, float]
    first_run: dict[str, float] | None = None
    failure: str = ""

    @property
    def speed(self) -> float:
        """NumPy's time over dynfuse's: above 1, dynfuse is faster."""
        return self.timings["NumPy"].median / self.timings["dynfuse"].median


def call(program: Program, namespace) -> Callable[[], object]:
    """One call of the program on arguments made once, and computed before it, as NumPy's are (a
    first run then times the program, not its inputs' making), its result materialized."""
    arguments = program.setup(namespace)
    dynfuse.evaluate(*(argument for argument in arguments if isinstance(argument, dynfuse.LazyArray)))
    return lambda: materialize(program.run(namespace, *arguments))


def counters() -> dict[str, float]:
    stats = dynfuse.stats()
    return {key: stats[key] for key in ("materializations", "kernels_launched", "interpreted_ops", "replays")}


def measure(program: Program, repeats: int) -> Row:
    """Check, warm up and time one program in both namespaces."""
    try:
        check(call(program, numpy)(), call(program, dnp)())
    except Exception as error:  # a wrong result or an error is a dynfuse bug: reported, not timed
        return Row(
            program, {}, {}, failure=f"{type(error).__name__}: {str(error).strip().splitlines()[0][:160]}"
        )
    timings, reports = measure_in_processes(_serving(program.label), repeats, SAMPLE_SECONDS)
    return Row(program, timings, reports["dynfuse"])


def _serving(label: str) -> dict[str, list[str]]:
    """The commands of the processes that time ``label`` (``_serve_here``), one per namespace."""
    return {name: [sys.executable, __file__, "--serve", name, label] for name in NAMESPACES}


def _serve_here(name: str, label: str) -> None:
    """Time ``label`` (a program's, or ``statement KIND N``) in namespace ``name``, warmed up, for
    ``measure_in_processes``; dynfuse's counters per timed call are its report."""
    namespace = NAMESPACES[name]
    if label.startswith("statement "):
        _, kind, n = label.split()
        run = STATEMENTS[kind][1](namespace, int(n))
    else:
        run = call(next(program for program in programs() if program.label == label), namespace)
    serve_warmed(run, counters)


# A first run is one call, as long as a short program's: the medians of this many fresh processes
FIRST_RUNS = 3


def first_run(program: Program) -> dict[str, float]:
    """One call of each namespace in a fresh process with an empty kernel cache, compiling included:
    the medians of ``FIRST_RUNS`` processes."""
    runs = []
    for _ in range(FIRST_RUNS):
        with tempfile.TemporaryDirectory() as cache:
            environment = {**os.environ, "DYNFUSE_CACHE_DIR": cache}
            command = [sys.executable, __file__, "--first-run", program.label]
            done = subprocess.run(command, env=environment, capture_output=True, text=True, check=True)
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return {name: statistics.median(run[name] for run in runs) for name in runs[0]}


def _first_run_here(label: str) -> None:
    program = next(program for program in programs() if program.label == label)
    seconds = {name: one_call(call(program, namespace)) for name, namespace in NAMESPACES.items()}
    print(json.dumps(seconds))


# A statement alone is timed in sweeps of this many, the last array it wrote read at the end
SWEEP_STATEMENTS = 20


def jacobi_sweep(np, n: int) -> Callable[[], Any]:
    """Jacobi statements ping-ponging between two n x n grids: a stencil's value written into a
    region of the other grid."""
    A = smooth_grid(np, n, n)
    B = A.copy()

    def run() -> Any:
        for _ in range(SWEEP_STATEMENTS // 2):
            B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] + A[:-2, 1:-1])
            A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1] + B[:-2, 1:-1])
        materialize(A)
        return A

    return run


def fdtd_update_sweep(np, n: int) -> Callable[[], Any]:
    """FDTD updates in place on shifted slices of two n x n fields, each field's after the other's
    (a 1-D Yee step along the first axis, stable at this Courant number)."""
    ey = smooth_grid(np, n, n)
    hz = 0.5 * ey

    def run() -> Any:
        for _ in range(SWEEP_STATEMENTS // 2):
            ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
            hz[:-1, :] -= 0.5 * (ey[1:, :] - ey[:-1, :])
        materialize(hz)
        return ey, hz

    return run


# Statements timed alone: how each reads in the results, its sweep, and the grid sizes
STATEMENTS = {
    "jacobi": (
        "The Jacobi statement alone, per statement (slice write included)",
        jacobi_sweep,
        (150, 350, 1000),
    ),
    "fdtd": (
        "An FDTD update in place alone, per statement (`ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])`)",
        fdtd_update_sweep,
        (150, 400, 1000),
    ),
}


def statement_timings(kind: str, n: int, repeats: int) -> dict[str, Timing]:
    """A statement of ``STATEMENTS``, per statement, on n x n grids, its first sweep checked."""
    sweep = STATEMENTS[kind][1]
    check(sweep(numpy, n)(), sweep(dnp, n)())
    timings, _ = measure_in_processes(_serving(f"statement {kind} {n}"), repeats, SAMPLE_SECONDS)
    return {name: timing.scaled(1 / SWEEP_STATEMENTS) for name, timing in timings.items()}


# ---- reporting -----------------------------------------------------------------------------------


def milliseconds(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds < 1e-2 else f"{seconds * 1e3:.0f} ms"


def row_line(row: Row) -> str:
    program = row.program
    if row.failure:
        return f"| {program.name} | {program.size} | | | FAIL: {row.failure} | | |"
    first = ""
    if row.first_run is not None:
        first = f"{row.first_run['NumPy'] / row.first_run['dynfuse']:.2f}x"
    per_call = row.counters
    return (
        f"| {program.name} | {program.size} | {milliseconds(row.timings['NumPy'].median)} "
        f"| {milliseconds(row.timings['dynfuse'].median)} | **{row.speed:.2f}x** | {first} "
        f"| {per_call['materializations']:.3g} / {per_call['kernels_launched']:.3g} / "
        f"{per_call['replays']:.3g} / {per_call['interpreted_ops']:.3g} |"
    )


def table(rows: list[Row]) -> str:
    lines = [
        "| program | size | NumPy | dynfuse | speed (NumPy time / dynfuse time) | first run, empty cache "
        "| per call: materializations / kernels / replays / ops interpreted |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    return "\n".join(lines + [row_line(row) for row in rows])


def geometric_mean(values: list[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def summary(rows: list[Row]) -> str:
    lines = []
    for medium, size in ((False, "small"), (True, "medium")):
        measured = [row.speed for row in rows if row.program.medium == medium and not row.failure]
        slower = sum(speed < 1.0 for speed in measured)
        lines.append(
            f"- {size} size: geometric mean **{geometric_mean(measured):.2f}x** NumPy's speed, "
            f"{slower} of {len(measured)} slower than NumPy"
        )
    firsts = [row.first_run["NumPy"] / row.first_run["dynfuse"] for row in rows if row.first_run]
    if firsts:
        lines.append(f"- first runs at the medium size: geometric mean {geometric_mean(firsts):.2f}x")
    return "\n".join(lines)


def statement_line(kind: str, found: dict[int, dict[str, Timing]]) -> str:
    cells = []
    for n, timings in found.items():
        plain, lazy = timings["NumPy"].median, timings["dynfuse"].median
        speed = f"**{plain / lazy:.2f}x**"
        cells.append(f"{n}²: NumPy {plain * 1e6:.0f} us, dynfuse {lazy * 1e6:.0f} us ({speed})")
    return f"{STATEMENTS[kind][0]}: " + "; ".join(cells) + "."


def section(
    rows: list[Row], statements: dict[str, dict[int, dict[str, Timing]]], command: str, seconds: float
) -> str:
    return "\n".join(
        [
            f"## NumPy programs as scientists write them, measured {datetime.date.today().isoformat()}",
            "",
            f"`{command}` ({seconds:.0f} s): {cpu_model()}, {os.cpu_count()} cores; "
            f"Python {platform.python_version()}, NumPy {numpy.__version__}, dynfuse {dynfuse.__version__}.",
            "Both namespaces run the same code, and every dynfuse result was checked against NumPy's first",
            "(FAIL: it differed, or raised). Steady state: each namespace in a process of its own, as a",
            "script runs (what else ran in a process changes where NumPy's temporaries come from), warmed",
            "up until its tiers settle; medians of interleaved rounds. First run: one call in a",
            "fresh process with an empty kernel cache (compiling included) against NumPy's first call",
            f"there (each on inputs computed before it), the medians of {FIRST_RUNS} processes. Speed is",
            "NumPy's time over dynfuse's: above 1,",
            "dynfuse is faster. Counters are `dynfuse.stats()` deltas per timed call. The machine is",
            "shared: read ratios, not times.",
            "",
            table(rows),
            "",
            summary(rows),
            "",
            *(statement_line(kind, found) + "\n" for kind, found in statements.items()),
        ]
    ).rstrip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, no first runs")
    parser.add_argument("--repeats", type=int, help="timed rounds per program (default 7, --quick 3)")
    parser.add_argument("--only", help="run the programs whose name contains this text; write nothing")
    parser.add_argument("--print-only", action="store_true", help="print the table, write nothing")
    parser.add_argument("--first-run", help=argparse.SUPPRESS)  # the child process of a first run
    parser.add_argument("--serve", nargs=2, help=argparse.SUPPRESS)  # a timed process: namespace, label
    arguments = parser.parse_args()
    if arguments.first_run:
        _first_run_here(arguments.first_run)
        return
    if arguments.serve:
        _serve_here(*arguments.serve)
        return
    repeats = arguments.repeats or (3 if arguments.quick else 7)
    started = time.perf_counter()
    rows = []
    for program in programs():
        if arguments.only and arguments.only not in program.label:
            continue
        row = measure(program, repeats)
        if program.medium and not arguments.quick and not row.failure:
            row.first_run = first_run(program)
        rows.append(row)
        print(row_line(row), flush=True)
    statements = {}
    for kind, (_, _, sizes) in ({} if arguments.only else STATEMENTS).items():
        statements[kind] = {n: statement_timings(kind, n, repeats) for n in sizes}
        print(statement_line(kind, statements[kind]))
    print(summary(rows))
    if arguments.only or arguments.print_only:
        return
    command = "python perf/bench_programs.py" + (" --quick" if arguments.quick else "")
    write_results_section("programs", section(rows, statements, command, time.perf_counter() - started))


if __name__ == "__main__":
    main()
