"""The state an instruction family keeps for one wave (cp.async groups, mbarrier
objects, bulk-copy queues): made on the first instruction that needs it, kept on the
wave under the family's attribute name, cleared for a relaunch of the compiled wave."""
from __future__ import annotations

from typing import Any, ClassVar, TypeVar

__all__ = ["WaveState"]

S = TypeVar("S", bound="WaveState")


class WaveState:
    """Base of a family's state: ``ATTR`` names the wave attribute that holds it,
    :meth:`reset` (the subclass's) puts it in its launch-start state."""

    ATTR: ClassVar[str]

    def __init__(self, wave: Any) -> None:
        self.wave = wave
        self.reset()

    def reset(self) -> None:  # pragma: no cover - each family defines it
        raise NotImplementedError

    @classmethod
    def of(cls: type[S], ctx: Any) -> S:
        """The state of wave ``ctx``, made on first use."""
        st = getattr(ctx, cls.ATTR, None)
        if st is None or st.wave is not ctx:
            st = cls(ctx)
            setattr(ctx, cls.ATTR, st)
        return st
