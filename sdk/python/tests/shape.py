"""Helpers of the shape tests: compare a class with a transcribed seed interface."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Dict, List

from seeds import REQUIRED


def params(fn: Any) -> List[tuple]:  # type: ignore[type-arg]
    sig = inspect.signature(fn)
    out = []
    for p in list(sig.parameters.values())[1:]:  # self
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            continue
        default = REQUIRED if p.default is inspect.Parameter.empty else p.default
        out.append((p.name, default, p.kind.name))
    return out


def check_class(cls: type, spec: Dict[str, Any], allow_extra_kw: bool = True) -> None:
    for prop in spec["properties"]:
        attr = inspect.getattr_static(cls, prop, None)
        assert isinstance(attr, property), f"{cls.__name__}.{prop} must be a property"
    for name, want in spec["methods"].items():
        fn = getattr(cls, name, None)
        assert callable(fn), f"{cls.__name__}.{name} is missing"
        got = params(fn)
        if allow_extra_kw:
            # extra keyword-only parameters (with defaults) after the seed's are allowed
            extra = got[len(want):]
            assert all(k == "KEYWORD_ONLY" and d is not REQUIRED for _, d, k in extra), (cls, name, got)
            got = got[:len(want)]
        assert got == want, f"{cls.__name__}.{name}{got} != seed {want}"


def check_fields(cls: type, fields: List[str]) -> None:
    assert dataclasses.is_dataclass(cls), f"{cls.__name__} must be a dataclass"
    names = [f.name for f in dataclasses.fields(cls)]
    assert names[:len(fields)] == fields, f"{cls.__name__} fields {names} != seed {fields}"
