"""A counter-based random stream for golden-vector inputs, the same on every machine.

Golden inputs must be the same bytes forever, whatever the NumPy version, the CPU or the
order in which cases are generated. NumPy's ``Generator`` methods carry no
stream-compatibility promise across versions, and a normal variate drawn through
``log``/``cos`` depends on the platform's libm. So the stream is SplitMix64 (Steele,
Lea, Flood 2014) over a counter, keyed by SHA-256 of ``(seed, case id)``: each case has
its own stream, independent of every other case, and every derived value (integers,
uniforms, approximately normal values) is computed with exact integer arithmetic and
correctly rounded IEEE operations only.
"""
from __future__ import annotations

import hashlib

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_SQRT3 = 1.7320508075688772  # sqrt(3) correctly rounded; a literal, not libm


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's output function (wrapping uint64 arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


class CaseRandom:
    """The random stream of one case: ``CaseRandom(seed, case_id)``.

    Every method draws the next words of the stream, so the values depend only on the
    seed, the case id and the sequence of calls made by that case's input builder.
    """

    def __init__(self, seed: int, key: str) -> None:
        digest = hashlib.sha256(f"{int(seed)}\x00{key}".encode()).digest()
        self._state = np.uint64(int.from_bytes(digest[:8], "little"))
        self._counter = 0

    def words(self, n: int) -> np.ndarray:
        """The next ``n`` 64-bit words."""
        n = int(n)
        i = np.arange(self._counter + 1, self._counter + n + 1, dtype=np.uint64)
        self._counter += n
        return _mix(self._state + i * _GOLDEN)

    def bits(self, shape: int | tuple[int, ...], dtype: type = np.uint32) -> np.ndarray:
        """Uniform unsigned integers of ``dtype`` (all bits random)."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        dt = np.dtype(dtype)
        n = int(np.prod(shape, dtype=np.int64))
        w = self.words(n) >> np.uint64(64 - 8 * dt.itemsize)
        return w.astype(dt).reshape(shape)

    def integers(self, low: int, high: int, shape: int | tuple[int, ...] = ()) -> np.ndarray:
        """Integers in ``[low, high)`` as int64 (modulo reduction: the bias of at most
        (high - low) / 2^64 is irrelevant for test inputs)."""
        if high <= low:
            raise ValueError(f"integers: empty range [{low}, {high})")
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        n = int(np.prod(shape, dtype=np.int64))
        span = np.uint64(high - low)
        return ((self.words(n) % span).astype(np.int64) + low).reshape(shape)

    def uniform(self, shape: int | tuple[int, ...], low: float = 0.0, high: float = 1.0,
                dtype: type = np.float32) -> np.ndarray:
        """Uniform values in ``[low, high)``: 24 random bits give u = k / 2^24 exactly,
        then low + (high - low) * u in float64, rounded once to ``dtype``."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        n = int(np.prod(shape, dtype=np.int64))
        u = (self.words(n) >> np.uint64(40)).astype(np.float64) * 2.0 ** -24
        return (low + (high - low) * u).astype(dtype).reshape(shape)

    def normal(self, shape: int | tuple[int, ...], scale: float = 1.0,
               dtype: type = np.float32) -> np.ndarray:
        """Approximately standard normal values (Irwin-Hall: the centred sum of four
        24-bit uniforms, scaled to unit variance), using integer sums only, so no libm.
        Tails stop at +-2 * sqrt(3) * scale."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        n = int(np.prod(shape, dtype=np.int64))
        w = self.words(4 * n).reshape(4, n) >> np.uint64(40)
        total = (w[0] + w[1] + w[2] + w[3]).astype(np.int64) - 2 * (1 << 24) + 2
        # variance of the sum of 4 uniforms on [0, 2^24) is 4 * 2^48 / 12 = 2^48 / 3
        values = total.astype(np.float64) * (scale * _SQRT3 / 2.0 ** 24)
        return values.astype(dtype).reshape(shape)

    def permutation(self, n: int) -> np.ndarray:
        """A permutation of ``range(n)`` (stable sort of random words)."""
        return np.argsort(self.words(n), kind="stable").astype(np.int64)

    def choice(self, options: list, size: int) -> list:
        """``size`` elements drawn from ``options`` with replacement."""
        return [options[i] for i in self.integers(0, len(options), size)]
