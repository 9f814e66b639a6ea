"""Old spellings of renamed arguments and names, kept working for one release.

Policy: an old keyword argument is mapped to its new name with a ``DeprecationWarning``
that names both; passing both spellings is a ``TypeError`` (the call is ambiguous, and
nothing is guessed). An old module-level name is served by :func:`deprecated_names`
through the module's ``__getattr__`` with the same warning. Each rename records the
release that will remove the old spelling.
"""
from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, Mapping, TypeVar

__all__ = ["REMOVED_IN", "renamed_arguments", "deprecated_names"]

#: the release that drops the old spellings kept by this module
REMOVED_IN = "0.3.0"

F = TypeVar("F", bound=Callable[..., Any])


def renamed_arguments(renames: Mapping[str, str]) -> Callable[[F], F]:
    """Decorate a function so that each old keyword in ``renames`` (old -> new) still
    works, with a DeprecationWarning.

    Raises (from the decorated function):
        TypeError: both the old and the new spelling were passed.
    """
    renames = dict(renames)

    def wrap(func: F) -> F:
        where = getattr(func, "__qualname__", func.__name__)  # MXArray.__init__

        @functools.wraps(func)
        def inner(*args: Any, **kwargs: Any) -> Any:
            for old, new in renames.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(f"{where}() got both {old}= (deprecated) "
                                        f"and {new}=; pass {new}= only")
                    warnings.warn(f"{where}({old}=...) is deprecated and will be "
                                  f"removed in {REMOVED_IN}; use {new}=",
                                  DeprecationWarning, stacklevel=2)
                    kwargs[new] = kwargs.pop(old)
            return func(*args, **kwargs)

        inner.__renamed_arguments__ = dict(renames)  # type: ignore[attr-defined]
        return inner  # type: ignore[return-value]

    return wrap


def deprecated_names(module: str, renames: Mapping[str, tuple[str, Any]]
                     ) -> Callable[[str], Any]:
    """A module ``__getattr__`` serving old names: ``renames`` maps an old name to
    ``(new name, object)``; a new name with a dot is the full path of a name that moved
    to another module.

    Usage in a module: ``__getattr__ = deprecated_names(__name__, {"Old": ("New", New)})``.

    Raises (from the returned function):
        AttributeError: a name that is neither current nor an old spelling.
    """
    renames = dict(renames)

    def __getattr__(name: str) -> Any:
        if name in renames:
            new, obj = renames[name]
            where = new if "." in new else f"{module}.{new}"
            warnings.warn(f"{module}.{name} is deprecated and will be removed in "
                          f"{REMOVED_IN}; use {where}", DeprecationWarning,
                          stacklevel=2)
            return obj
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
