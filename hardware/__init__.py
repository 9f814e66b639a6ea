"""Models of the machine: GPU catalogue and roofline, burst-segment memory and
coalescing, shared-memory banks, the SIMT/PTX interpreter, pipeline timing.

``hardware`` may import ``refimpl``; it never imports ``oracle``.
"""
