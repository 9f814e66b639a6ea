"""The targets of ``python -m oracle conform TARGET``: each names the check that holds
an implementation of it to the reference (:data:`CHECKS`), read by
:func:`oracle.conformance.conform` and the CLI."""
from __future__ import annotations

from typing import Callable

from oracle.conformance.formats import check_decoder, check_encoder, check_round_to
from oracle.conformance.report import ConformanceReport
from oracle.conformance.scaling import check_mx_quantize, check_nvfp4_quantize
from oracle.conformance.tensors import check_attention, check_matmul, check_softmax

__all__ = ["CHECKS"]

#: ``python -m oracle conform TARGET``: target -> check
CHECKS: dict[str, Callable[..., ConformanceReport]] = {
    "formats.encode": check_encoder,
    "formats.decode": check_decoder,
    "formats.round_to": check_round_to,
    "scaling.mx_quantize": check_mx_quantize,
    "scaling.nvfp4_quantize": check_nvfp4_quantize,
    "matmul.matmul": check_matmul,
    "attention.attention": check_attention,
    "softmax.softmax": check_softmax,
}
