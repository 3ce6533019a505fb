"""K-means clustering (Lloyd's algorithm) of points drawn around hidden centres.

Draws N points in D dimensions from K Gaussian blobs, picks K of them to start (k-means++), and
alternates the two steps of Lloyd's algorithm until no point changes cluster: assign each point to
its nearest centroid (squared distances to all centroids at once, by broadcasting) and move each
centroid to the mean of its points (a one-hot matrix product). Prints the inertia (sum of squared
distances to the nearest centroid), which never increases, and how close the centroids came to the
hidden centres.
"""

import argparse

import numpy as np

SIZES = {"small": 20_000, "demo": 1_000_000}  # points
DIMENSIONS = 4
CLUSTERS = 8
MAX_ITERATIONS = 30


def squared_distances(points: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Squared distance from every point (rows) to every centroid (columns)."""
    differences = points[:, np.newaxis, :] - centroids[np.newaxis, :, :]
    return (differences * differences).sum(axis=2)


def seed_centroids(points: np.ndarray, clusters: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++: each new centroid is a point drawn with probability proportional to its squared
    distance to the nearest centroid so far, which spreads the start over the clusters."""
    centroids = points[rng.integers(len(points))][np.newaxis]
    nearest = squared_distances(points, centroids)[:, 0]
    for _ in range(clusters - 1):
        chosen = points[rng.choice(len(points), p=nearest / nearest.sum())][np.newaxis]
        centroids = np.concatenate([centroids, chosen])
        nearest = np.minimum(nearest, squared_distances(points, chosen)[:, 0])
    return centroids


def update_centroids(points: np.ndarray, labels: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """The mean of each cluster's points; a centroid that lost all its points stays where it was."""
    membership = (labels[:, np.newaxis] == np.arange(len(centroids))).astype(points.dtype)
    members = membership.sum(axis=0)[:, np.newaxis]
    means = (membership.T @ points) / np.maximum(members, 1.0)
    return np.where(members > 0, means, centroids)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", choices=SIZES, default="demo")
    count = SIZES[parser.parse_args().size]

    rng = np.random.default_rng(42)
    hidden_centres = rng.uniform(-14.0, 14.0, (CLUSTERS, DIMENSIONS))
    points = hidden_centres[rng.integers(0, CLUSTERS, count)] + rng.standard_normal((count, DIMENSIONS))
    centroids = seed_centroids(points, CLUSTERS, rng)

    labels = np.full(count, -1)
    for iteration in range(1, MAX_ITERATIONS + 1):
        distances = squared_distances(points, centroids)
        previous_labels, labels = labels, distances.argmin(axis=1)
        inertia = distances.min(axis=1).sum()
        reassigned = (labels != previous_labels).sum()
        print(f"iteration {iteration}: inertia {inertia:.6g}, points reassigned {reassigned}")
        if reassigned == 0:
            break
        centroids = update_centroids(points, labels, centroids)

    cluster_sizes = (labels[:, np.newaxis] == np.arange(CLUSTERS)).sum(axis=0)
    centre_errors = np.sqrt(squared_distances(hidden_centres, centroids).min(axis=1))
    print(f"points: {count}")
    print(f"smallest and largest cluster: {cluster_sizes.min()} {cluster_sizes.max()}")
    print(f"centroid spread (std of coordinates): {centroids.std():.6g}")
    print(f"worst distance from a hidden centre to its nearest centroid: {centre_errors.max():.6g}")


if __name__ == "__main__":
    main()
