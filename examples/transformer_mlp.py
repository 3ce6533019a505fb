"""The feed-forward half of a stack of transformer layers, in float32.

Each layer is a pre-norm MLP block with a residual connection, as in GPT-2:
x + (gelu(layernorm(x) @ W1 + b1) @ W2 + b2), with GELU in its tanh form. The sizes are those of
the original Transformer base model (6 layers, d_model 512, d_ff 2048) on a batch of 4 sequences of
512 tokens. Prints summary statistics of the activations and of the output.
"""

import argparse
import math

import numpy as np

SIZES = {"small": (2, 64, 64), "demo": (4, 512, 512)}  # sequences, tokens per sequence, d_model
LAYERS = 6
EXPANSION = 4  # d_ff / d_model
LAYERNORM_EPSILON = 1e-5
GELU_SCALE = math.sqrt(2.0 / math.pi)


def layernorm(x: np.ndarray, gain: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """Normalize each token's features to mean 0 and variance 1, then scale and shift them."""
    mean = x.mean(axis=-1, keepdims=True)
    variance = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + LAYERNORM_EPSILON) * gain + bias


def gelu(x: np.ndarray) -> np.ndarray:
    """GELU, tanh approximation (Hendrycks & Gimpel), as GPT-2 and BERT compute it."""
    return 0.5 * x * (1.0 + np.tanh(GELU_SCALE * (x + 0.044715 * x**3)))


def random_layer(rng: np.random.Generator, width: int) -> dict[str, np.ndarray]:
    """Weights scaled by 1/sqrt(fan-in), so activations keep their size through the stack."""
    hidden = EXPANSION * width
    return {
        "gain": 1.0 + 0.1 * rng.standard_normal(width, dtype=np.float32),
        "bias": 0.1 * rng.standard_normal(width, dtype=np.float32),
        "up": rng.standard_normal((width, hidden), dtype=np.float32) / math.sqrt(width),
        "up_bias": 0.1 * rng.standard_normal(hidden, dtype=np.float32),
        "down": rng.standard_normal((hidden, width), dtype=np.float32) / math.sqrt(hidden),
        "down_bias": 0.1 * rng.standard_normal(width, dtype=np.float32),
    }


def mlp_block(x: np.ndarray, layer: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The block's output and its hidden activations."""
    hidden = gelu(layernorm(x, layer["gain"], layer["bias"]) @ layer["up"] + layer["up_bias"])
    return x + (hidden @ layer["down"] + layer["down_bias"]), hidden


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", choices=SIZES, default="demo")
    sequences, tokens, width = SIZES[parser.parse_args().size]

    rng = np.random.default_rng(0)
    layers = [random_layer(rng, width) for _ in range(LAYERS)]
    x = rng.standard_normal((sequences, tokens, width), dtype=np.float32)

    print(f"tokens: {sequences * tokens}, d_model: {width}, layers: {LAYERS}")
    for number, layer in enumerate(layers, start=1):
        x, hidden = mlp_block(x, layer)
        active = (hidden > 0).mean()
        print(f"layer {number}: output std {x.std():.6g}, active hidden units {active:.6g}")
    print(f"output dtype: {x.dtype}")
    print(f"output mean: {x.mean():.6g}")
    print(f"output max |x|: {np.abs(x).max():.6g}")
    print(f"first token, first features: {' '.join(f'{value:.6g}' for value in x[0, 0, :4])}")


if __name__ == "__main__":
    main()
