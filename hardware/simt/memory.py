"""Device memory for the SIMT interpreter: a flat, byte-addressed global memory.

``cudaMalloc`` returns 256-byte-aligned memory (CUDA C Programming Guide, "Device Memory
Accesses"); :meth:`GlobalMemory.alloc` does the same. Every access is checked against the
allocations: an address outside every allocation, or an access that runs past the end of
its allocation, is an error naming the kernel, block, thread, PTX line and address. Each
allocation is followed by an unallocated guard gap as large as itself (at least 256
bytes), so that an index past the end by up to the array's own size is caught rather
than landing in the next array; an access before anything is allocated is an error too.

Address map of the generic address space (PTX ISA 6.4.1, "Generic Addressing"): global
allocations live in ``[GLOBAL_BASE, SHARED_WINDOW)``; a ``.shared`` address ``a`` has the
generic address ``SHARED_WINDOW + a`` and a ``.local`` address ``a`` the generic address
``LOCAL_WINDOW + a`` (``cvta.shared`` / ``cvta.to.shared`` add or remove the window).
Global addresses are their own generic addresses, so ``cvta.global`` is the identity.
"""
from __future__ import annotations

import bisect

import numpy as np

__all__ = ["GlobalMemory", "GLOBAL_BASE", "SHARED_WINDOW", "LOCAL_WINDOW", "WINDOW_SIZE"]

GLOBAL_BASE = 1 << 32
SHARED_WINDOW = 1 << 44
LOCAL_WINDOW = 2 << 44
WINDOW_SIZE = 1 << 44
_ALIGN = 256


class GlobalMemory:
    """Flat byte-addressed device memory with 256-byte-aligned allocations.

    Example::

        mem = GlobalMemory()
        a = mem.to_device(np.arange(4, dtype=np.float32))
        out = mem.alloc(16)
        ... launch ...
        mem.from_device(out, np.float32, (4,))
    """

    def __init__(self) -> None:
        self._buf = np.zeros(0, dtype=np.uint8)
        self._starts: list[int] = []   # sorted allocation starts (absolute addresses)
        self._ends: list[int] = []
        self._top = 0                  # next free offset in _buf
        self._modules: dict[int, tuple[object, dict[str, int]]] = {}

    # ------------------------------------------------------------------ allocation
    def alloc(self, nbytes: int) -> int:
        """Allocate ``nbytes`` (>= 1) zero-filled bytes; returns the 256-aligned address."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)):
            raise TypeError(f"nbytes must be an int, got {type(nbytes).__name__}")
        nbytes = int(nbytes)
        if nbytes < 1:
            raise ValueError(f"nbytes must be >= 1, got {nbytes}")
        off = -(-self._top // _ALIGN) * _ALIGN
        # leave an unallocated guard gap after each allocation, as large as the
        # allocation itself (at least 256 bytes): an index past the end by up to the
        # array's own size never lands silently in the next array
        size = -(-nbytes // _ALIGN) * _ALIGN
        need = off + size + max(size, _ALIGN)
        if need > self._buf.size:
            cap = max(need, 2 * self._buf.size, 4096)
            buf = np.zeros(cap, dtype=np.uint8)
            buf[: self._buf.size] = self._buf
            self._buf = buf
        self._top = need
        addr = GLOBAL_BASE + off
        self._starts.append(addr)
        self._ends.append(addr + nbytes)
        return addr

    def to_device(self, array: np.ndarray) -> int:
        """Allocate and copy ``array`` (C order, its own dtype); returns the address."""
        a = np.ascontiguousarray(array)
        addr = self.alloc(max(1, a.nbytes))
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
        module variables do in a CUDA context)."""
        entry = self._modules.get(id(module))
        if entry is None or entry[0] is not module:
            addrs = {}
            for name, v in variables.items():
                addrs[name] = self.alloc(max(1, v.nbytes))
                if v.nbytes:
                    self.write(addrs[name], np.frombuffer(v.init or bytes(v.nbytes), np.uint8))
            entry = (module, addrs)
            self._modules[id(module)] = entry
        return entry[1]

    # ------------------------------------------------------------------- host access
    def _check_host(self, address: int, nbytes: int, what: str) -> int:
        if not isinstance(address, (int, np.integer)) or isinstance(address, bool):
            raise TypeError(f"address must be an int, got {type(address).__name__}")
        address = int(address)
        k = bisect.bisect_right(self._starts, address) - 1
        if k < 0 or address + nbytes > self._ends[k]:
            raise IndexError(f"{what} of {nbytes} bytes at address {address:#x} is outside "
                             "every allocation")
        return address - GLOBAL_BASE

    def write(self, address: int, array: np.ndarray) -> None:
        """Copy the bytes of ``array`` to ``address`` (must lie inside one allocation)."""
        a = np.ascontiguousarray(array)
        off = self._check_host(address, a.nbytes, "write")
        self._buf[off: off + a.nbytes] = a.reshape(-1).view(np.uint8)

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
        """The backing bytes (index = address - GLOBAL_BASE); for the interpreter."""
        return self._buf

    def extent(self, address: int) -> int:
        """Bytes from ``address`` to the end of the allocation holding it (0 outside
        every allocation)."""
        k = bisect.bisect_right(self._starts, address) - 1
        if k < 0 or address >= self._ends[k]:
            return 0
        return self._ends[k] - address

    def check(self, addresses: np.ndarray, width: int) -> np.ndarray | None:
        """Indices of addresses whose ``width`` bytes are not inside one allocation, or
        None when all are fine (fast path: one allocation holds them all)."""
        if addresses.size == 0:
            return None
        if not self._starts:
            return np.arange(addresses.size)
        lo = int(addresses.min())
        hi = int(addresses.max())
        k = bisect.bisect_right(self._starts, lo) - 1
        if k >= 0 and hi + width <= self._ends[k]:
            return None
        starts = np.asarray(self._starts, dtype=np.int64)
        ends = np.asarray(self._ends, dtype=np.int64)
        a = addresses.astype(np.int64)
        j = np.searchsorted(starts, a, side="right") - 1
        ok = (j >= 0) & (a + width <= ends[np.maximum(j, 0)])
        bad = np.flatnonzero(~ok)
        return bad if bad.size else None

    def holds(self, lo: int, end: int) -> bool:
        """Whether one allocation holds every byte of ``[lo, end)``."""
        k = bisect.bisect_right(self._starts, lo) - 1
        return k >= 0 and end <= self._ends[k]

    def describe(self, address: int) -> str:
        """Where ``address`` is relative to the allocations (for error messages)."""
        if not self._starts:
            return "nothing is allocated in this GlobalMemory"
        k = bisect.bisect_right(self._starts, address) - 1
        if k < 0:
            return "below every allocation"
        s, e = self._starts[k], self._ends[k]
        if address < e:
            return f"runs past the end of allocation [{s:#x}, {e:#x})"
        return f"{address - e} bytes past the end of allocation [{s:#x}, {e:#x})"

    @property
    def allocations(self) -> list[tuple[int, int]]:
        """(address, nbytes) of every allocation, in order."""
        return [(s, e - s) for s, e in zip(self._starts, self._ends)]
