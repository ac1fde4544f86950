"""Initialisers drawn on the host from torchlean.random's seeded stream (the numbers the RNG
kernels give for the same key), so a model initialises bit-identically on every backend."""
from __future__ import annotations

import math

import numpy as np

from torchlean import random


def uniform(shape, lo=0.0, hi=1.0) -> np.ndarray:
    u = random.uniform(int(np.prod(shape)), random.next_key())
    return (np.float32(lo) + u * np.float32(hi - lo)).reshape(shape)


def normal(shape, mean=0.0, std=1.0) -> np.ndarray:
    return random.normal(int(np.prod(shape)), random.next_key(), mean, std).reshape(shape)


def _fans(shape):
    if len(shape) < 2:
        return shape[0], shape[0]
    rf = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    return shape[1] * rf, shape[0] * rf


def xavier_uniform(shape) -> np.ndarray:
    fi, fo = _fans(shape)
    a = math.sqrt(6.0 / (fi + fo))
    return uniform(shape, -a, a)


def kaiming_uniform(shape) -> np.ndarray:
    fi, _ = _fans(shape)
    a = math.sqrt(6.0 / fi)
    return uniform(shape, -a, a)
