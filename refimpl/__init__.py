"""What the numbers must be: number formats, block scaling, matmul accumulation,
softmax, attention and the FlashAttention schedules, the paged KV cache.

``refimpl`` imports nothing from ``hardware`` or ``oracle``.
"""
