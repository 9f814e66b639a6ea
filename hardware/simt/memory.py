"""Device memory for the SIMT interpreter: byte-addressed global memory with exact bounds.

``cudaMalloc`` returns 256-byte-aligned memory (CUDA C Programming Guide, "Device Memory
Accesses"); :meth:`GlobalMemory.alloc` does the same. Each allocation lives alone in its
own :data:`SLOT_BYTES` (2^36-byte) region of the address space: allocation ``k`` starts
at ``GLOBAL_BASE + k * SLOT_BYTES``, and addresses are never reused, even after
:meth:`GlobalMemory.free`. A pointer into one allocation plus any offset smaller than
2^36 bytes therefore lands in that allocation or in unallocated space, never in another
allocation, and every access is checked against the exact bounds ``[address, address +
nbytes)`` of the allocation it falls in (compute-sanitizer's memcheck; see
:mod:`hardware.simt.sanitizer`). The bytes behind the allocations are stored compactly.

Limits: a GlobalMemory holds at most :data:`MAX_BYTES` (2^32) bytes of allocations over
its lifetime (each rounded up to 256 bytes; freed ones count, since their addresses are
not reused) and at most :data:`MAX_ALLOCATIONS` allocations; an ``alloc`` over either is
refused before anything is allocated (:class:`HostMemoryError`).

Initialisation (initcheck): every byte has a flag saying whether it was written. Bytes of
``alloc`` start unwritten (``cudaMalloc`` memory is undefined), ``to_device``, ``write``
and ``memset`` write them, and so do a kernel's stores; a kernel's read of an unwritten
byte is an initcheck hazard. The bytes themselves start at zero.

Address map of the generic address space (PTX ISA 6.4.1, "Generic Addressing"): global
allocations live in ``[GLOBAL_BASE, SHARED_WINDOW)``; a ``.shared`` address ``a`` has the
generic address ``SHARED_WINDOW + a`` and a ``.local`` address ``a`` the generic address
``LOCAL_WINDOW + a`` (``cvta.shared`` / ``cvta.to.shared`` add or remove the window).
Global addresses are their own generic addresses, so ``cvta.global`` is the identity.
"""
from __future__ import annotations

import bisect

from typing import Any

import numpy as np

from .errors import ExecutionError, HostMemoryError

__all__ = ["GlobalMemory", "GLOBAL_BASE", "SHARED_WINDOW", "LOCAL_WINDOW", "WINDOW_SIZE",
           "SLOT_BYTES", "MAX_BYTES", "MAX_ALLOCATIONS"]


def spans(first: np.ndarray, k: int) -> np.ndarray:
    """``(first[:, None] + arange(k)).ravel()``: the ``k`` consecutive indices from each
    of ``first`` (the bytes or words of each lane's access), lane by lane. For a few
    (``k`` <= 8) one strided store per position (NumPy's broadcast add runs an inner
    loop of ``k`` elements per lane, several times slower)."""
    if k > 8 or first.ndim != 1:
        return (first[:, None] + np.arange(k)).ravel()
    out = np.empty(first.size * k, dtype=np.result_type(first.dtype, np.int64))
    for j in range(k):
        if j:
            np.add(first, j, out=out[j::k])
        else:
            out[0::k] = first
    return out

GLOBAL_BASE = 1 << 32
SHARED_WINDOW = 1 << 56
LOCAL_WINDOW = 2 << 56
WINDOW_SIZE = 1 << 56
#: the address-space region of one allocation (its bytes, then unallocated space)
SLOT_BYTES = 1 << 36
_SLOT_SHIFT = 36
#: bytes of allocations a GlobalMemory may hold over its lifetime (256-byte rounded)
MAX_BYTES = 1 << 32
#: allocations a GlobalMemory may hold over its lifetime
MAX_ALLOCATIONS = (SHARED_WINDOW - GLOBAL_BASE) // SLOT_BYTES
_ALIGN = 256

#: why an address fails (see :meth:`GlobalMemory.locate`)
UNALLOCATED, PAST_END, FREED = "unallocated", "past the end", "freed"


class GlobalMemory:
    """Byte-addressed device memory with 256-byte-aligned, exactly bounded allocations.

    Example::

        mem = GlobalMemory()
        a = mem.to_device(np.arange(4, dtype=np.float32), name="a")
        out = mem.alloc(16, name="out")
        ... launch ...
        mem.from_device(out, np.float32, (4,))
        mem.free(out)
    """

    def __init__(self) -> None:
        self._buf = np.zeros(0, dtype=np.uint8)
        self._init = np.zeros(0, dtype=bool)   # per byte: written since allocated
        self._size: list[int] = []            # per allocation (slot): nbytes
        self._boff: list[int] = []            # offset of its bytes in _buf
        self._live: list[bool] = []
        self._names: list[str] = []
        self._top = 0                          # bytes of _buf in use
        self._arrays: tuple | None = None      # numpy copies of the tables
        self._modules: dict[int, tuple[object, dict[str, int]]] = {}
        self._full: dict[int, bool] = {}       # allocation -> all its bytes written (memo)

    # ------------------------------------------------------------------ allocation
    def alloc(self, nbytes: int, name: str | None = None) -> int:
        """Allocate ``nbytes`` (>= 1) bytes, unwritten (they read as zero; initcheck
        reports a kernel reading them before any write); returns the 256-aligned
        address. ``name`` names the allocation in error messages (default "#k")."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)):
            raise TypeError(f"nbytes must be an int, got {type(nbytes).__name__}")
        nbytes = int(nbytes)
        if nbytes < 1:
            raise ValueError(f"nbytes must be >= 1, got {nbytes}")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name must be a str, got {type(name).__name__}")
        size = -(-nbytes // _ALIGN) * _ALIGN
        if self._top + size > MAX_BYTES:
            raise HostMemoryError(
                f"alloc of {nbytes} bytes: a GlobalMemory holds at most MAX_BYTES = "
                f"{MAX_BYTES} bytes of allocations ({self._top} already allocated)")
        k = len(self._size)
        if k >= MAX_ALLOCATIONS:
            raise HostMemoryError(f"alloc: a GlobalMemory holds at most {MAX_ALLOCATIONS} "
                                  "allocations")
        need = self._top + size
        if need > self._buf.size:
            cap = max(need, 2 * self._buf.size, 4096)
            buf = np.zeros(cap, dtype=np.uint8)
            buf[: self._buf.size] = self._buf
            init = np.zeros(cap, dtype=bool)
            init[: self._init.size] = self._init
            self._buf, self._init = buf, init
        self._size.append(nbytes)
        self._boff.append(self._top)
        self._live.append(True)
        self._names.append(name if name is not None else f"#{k}")
        self._top = need
        self._arrays = None
        return GLOBAL_BASE + k * SLOT_BYTES

    def calloc(self, nbytes: int, name: str | None = None) -> int:
        """Allocate ``nbytes`` zero bytes, written (``cudaMalloc`` then ``cudaMemset``
        to 0: counters, flags and accumulators a kernel reads before writing)."""
        addr = self.alloc(nbytes, name)
        self.memset(addr, 0, int(nbytes))
        return addr

    def free(self, address: int) -> None:
        """Free the allocation starting at ``address`` (``cudaFree``). Its addresses are
        never reused: a later access to it is a use after free. HostMemoryError for an
        address that is not the start of an allocation, or one already freed."""
        k = self._slot_of_start(address, "free")
        if not self._live[k]:
            raise HostMemoryError(f"free({address:#x}): allocation {self._label(k)} was "
                                  "already freed (double free)")
        self._live[k] = False
        self._arrays = None

    def to_device(self, array: np.ndarray, name: str | None = None) -> int:
        """Allocate and copy ``array`` (C order, its own dtype); returns the address."""
        a = np.ascontiguousarray(array)
        addr = self.alloc(max(1, a.nbytes), name)
        self.write(addr, a)
        return addr

    def from_device(self, address: int, dtype: np.dtype | type, shape: tuple[int, ...] | int
                    ) -> np.ndarray:
        """Copy out an array of ``shape`` and ``dtype`` starting at ``address``."""
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        count = int(np.prod(shape, dtype=np.int64))
        return self.read(address, dtype, count).reshape(shape)

    def module_variables(self, module: object, variables: dict) -> dict[str, int]:
        """Addresses of a module's ``.global``/``.const`` variables in this memory,
        allocated and initialised on first use (they then persist across launches, as
        module variables do in a CUDA context; without an initialiser they are zero, as
        static storage is)."""
        entry = self._modules.get(id(module))
        if entry is None or entry[0] is not module:
            addrs = {}
            for name, v in variables.items():
                addrs[name] = self.alloc(max(1, v.nbytes), name)
                if v.nbytes:
                    self.write(addrs[name], np.frombuffer(v.init or bytes(v.nbytes), np.uint8))
            entry = (module, addrs)
            self._modules[id(module)] = entry
        return entry[1]

    # ------------------------------------------------------------------- host access
    def _slot_of_start(self, address: int, what: str) -> int:
        address = self._address(address)
        k = (address - GLOBAL_BASE) >> _SLOT_SHIFT
        if address < GLOBAL_BASE or k >= len(self._size) or \
                address != GLOBAL_BASE + k * SLOT_BYTES:
            raise HostMemoryError(f"{what}({address:#x}): not the address of an allocation "
                                  f"({self.describe(address)})")
        return k

    @staticmethod
    def _address(address: object) -> int:
        if not isinstance(address, (int, np.integer)) or isinstance(address, bool):
            raise TypeError(f"address must be an int, got {type(address).__name__}")
        return int(address)

    def _check_host(self, address: int, nbytes: int, what: str) -> int:
        address = self._address(address)
        k = (address - GLOBAL_BASE) >> _SLOT_SHIFT
        if address >= GLOBAL_BASE and k < len(self._size) and self._live[k]:
            rel = address - GLOBAL_BASE - k * SLOT_BYTES
            if rel + nbytes <= self._size[k]:
                return self._boff[k] + rel
        raise HostMemoryError(f"{what} of {nbytes} bytes at address {address:#x} is outside "
                              f"every live allocation ({self.describe(address)}; "
                              f"allocations: {self._listing()})")

    def write(self, address: int, array: np.ndarray) -> None:
        """Copy the bytes of ``array`` to ``address`` (must lie inside one allocation)."""
        a = np.ascontiguousarray(array)
        off = self._check_host(address, a.nbytes, "write")
        self._buf[off: off + a.nbytes] = a.reshape(-1).view(np.uint8)
        self._init[off: off + a.nbytes] = True

    def memset(self, address: int, value: int, nbytes: int) -> None:
        """Set ``nbytes`` bytes at ``address`` to ``value`` (0-255), as ``cudaMemset``."""
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
                or not 0 <= int(value) <= 255:
            raise ValueError(f"value must be an int in [0, 255], got {value!r}")
        if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or nbytes < 0:
            raise ValueError(f"nbytes must be a non-negative int, got {nbytes!r}")
        off = self._check_host(address, int(nbytes), "memset")
        self._buf[off: off + int(nbytes)] = int(value)
        self._init[off: off + int(nbytes)] = True

    def read(self, address: int, dtype: np.dtype | type, count: int) -> np.ndarray:
        """Copy out ``count`` elements of ``dtype`` starting at ``address``."""
        dt = np.dtype(dtype)
        if int(count) < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        n = int(count) * dt.itemsize
        off = self._check_host(address, max(n, 1), "read") if n else 0
        return self._buf[off: off + n].copy().view(dt)

    # ----------------------------------------------------------------- device access
    @property
    def buffer(self) -> np.ndarray:
        """The backing bytes (see :meth:`locate`); for the interpreter."""
        return self._buf

    @property
    def used(self) -> int:
        """Bytes of :attr:`buffer` that allocations occupy (the rest is spare room)."""
        return self._top

    @property
    def init_shadow(self) -> np.ndarray:
        """Per byte of :attr:`buffer`: whether it was written (for initcheck)."""
        return self._init

    def _tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        if self._arrays is None:
            size = np.asarray(self._size, dtype=np.int64)
            self._arrays = (size, -(-size // _ALIGN) * _ALIGN,
                            np.asarray(self._boff, dtype=np.int64),
                            np.asarray(self._live, dtype=bool))
        return self._arrays

    def locate(self, addresses: np.ndarray, width: int
               ) -> tuple[np.ndarray, int | None, str | None]:
        """``(offsets, bad, why)``: the offsets in :attr:`buffer` of ``width``-byte
        accesses at ``addresses``; ``bad`` the index of the first access not inside one
        live allocation and ``why`` one of "unallocated" (outside every allocation's
        backing: the offsets are not usable), "past the end" (past the exact end, inside
        the allocation's 256-byte rounding) or "freed"; ``(offsets, None, None)`` when
        every access is fine."""
        a = addresses.astype(np.int64, copy=False)
        if a.size == 0:
            return a, None, None
        lo, hi = int(a.min()), int(a.max())
        k = (lo - GLOBAL_BASE) >> _SLOT_SHIFT
        if lo >= GLOBAL_BASE and k < len(self._size) and self._live[k]:
            start = GLOBAL_BASE + k * SLOT_BYTES
            if hi + width <= start + self._size[k]:
                return a - (start - self._boff[k]), None, None
        size, cap, boff, live = self._tables()
        n = size.size
        ks = (a - GLOBAL_BASE) >> _SLOT_SHIFT
        inside = (a >= GLOBAL_BASE) & (ks < n)
        kc = np.where(inside, ks, 0)
        rel = a - GLOBAL_BASE - kc * SLOT_BYTES
        unalloc = ~inside | (rel + width > (cap[kc] if n else 0))
        past = ~unalloc & (rel + width > (size[kc] if n else 0))
        freed = ~unalloc & ~(live[kc] if n else False)
        offs = (boff[kc] if n else 0) + rel
        for why, sel in ((UNALLOCATED, unalloc), (FREED, freed), (PAST_END, past)):
            if sel.any():
                return offs, int(np.argmax(sel)), why
        return offs, None, None

    def extent(self, address: int) -> int:
        """Bytes from ``address`` to the end of the live allocation holding it (0 outside
        every live allocation)."""
        k = (address - GLOBAL_BASE) >> _SLOT_SHIFT
        if address < GLOBAL_BASE or k >= len(self._size) or not self._live[k]:
            return 0
        return max(0, GLOBAL_BASE + k * SLOT_BYTES + self._size[k] - address)

    def offset(self, address: int) -> int:
        """The offset in :attr:`buffer` of ``address`` (inside a live allocation)."""
        return self._check_host(address, 1, "access")

    def holds(self, lo: int, end: int) -> bool:
        """Whether one live allocation holds every byte of ``[lo, end)``."""
        k = (lo - GLOBAL_BASE) >> _SLOT_SHIFT
        return (lo >= GLOBAL_BASE and k < len(self._size) and self._live[k]
                and end <= GLOBAL_BASE + k * SLOT_BYTES + self._size[k])

    def written(self, lo: int, end: int) -> bool:
        """Whether one live allocation holds every byte of ``[lo, end)`` and each was
        written (:attr:`init_shadow`; a fast path of initcheck)."""
        if not self.holds(lo, end):
            return False
        k = (lo - GLOBAL_BASE) >> _SLOT_SHIFT
        full = self._full.get(k)
        if full:
            return True
        if full is None:
            # looked at in full once: an allocation every byte of which was written stays
            # so while it lives (nothing un-writes a byte; slots are never reused)
            b = self._boff[k]
            full = self._full[k] = bool(self._init[b: b + self._size[k]].all())
            if full:
                return True
        off = self._boff[k] + lo - (GLOBAL_BASE + k * SLOT_BYTES)
        return bool(self._init[off: off + end - lo].all())

    def address_of(self, offset: int) -> int:
        """The device address of byte ``offset`` of :attr:`buffer` (inside an allocation)."""
        k = bisect.bisect_right(self._boff, int(offset)) - 1
        if k < 0 or offset - self._boff[k] >= self._size[k]:
            raise ValueError(f"buffer offset {offset} is in no allocation")
        return GLOBAL_BASE + k * SLOT_BYTES + int(offset) - self._boff[k]

    def _label(self, k: int) -> str:
        s = GLOBAL_BASE + k * SLOT_BYTES
        return f"'{self._names[k]}' ({self._size[k]} bytes at {s:#x})"

    def _listing(self, limit: int = 8) -> str:
        live = [k for k in range(len(self._size)) if self._live[k]]
        if not live:
            return "none live"
        more = f", ... {len(live) - limit} more" if len(live) > limit else ""
        return ", ".join(self._label(k) for k in live[:limit]) + more

    def describe(self, address: int) -> str:
        """Where ``address`` is relative to the allocations: inside one (with its
        offset), or how far before or past the nearest (for error messages)."""
        if not self._size:
            return "nothing is allocated in this GlobalMemory"
        address = int(address)
        k = (address - GLOBAL_BASE) >> _SLOT_SHIFT
        if address < GLOBAL_BASE:
            return f"{GLOBAL_BASE - address} bytes before allocation {self._label(0)}"
        if k >= len(self._size):
            k = len(self._size) - 1
        start = GLOBAL_BASE + k * SLOT_BYTES
        rel = address - start
        freed = "" if self._live[k] else "freed "
        if rel < self._size[k]:
            return f"{freed}allocation {self._label(k)} + {rel}"
        past = rel - self._size[k]
        if k + 1 < len(self._size) and start + SLOT_BYTES - address < past:
            nxt = self._label(k + 1)
            return f"{start + SLOT_BYTES - address} bytes before allocation {nxt}"
        return f"{past} bytes past the end of {freed}allocation {self._label(k)}"

    @property
    def allocations(self) -> list[tuple[int, int]]:
        """(address, nbytes) of every live allocation, in order."""
        return [(GLOBAL_BASE + k * SLOT_BYTES, s) for k, s in enumerate(self._size)
                if self._live[k]]


def generic_to_shared(ctx: Any, a: np.ndarray, threads: np.ndarray, inst: Any,
                      what: str) -> np.ndarray:
    """Generic addresses ``a`` of ``threads`` as .shared addresses (PTX ISA 6.4.1: the
    shared window); ExecutionError naming the thread for one outside the window,
    ``what`` formatted with the address (``"mapa of {:#x}, not ..."``)."""
    bad = (a < SHARED_WINDOW) | (a >= SHARED_WINDOW + WINDOW_SIZE)
    if bad.any():
        k = int(np.argmax(bad))
        raise ExecutionError(f"{ctx.location(int(threads[k]), inst)}: "
                             + what.format(int(a[k])))
    return a - SHARED_WINDOW
