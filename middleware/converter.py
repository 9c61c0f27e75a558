"""The converter protocol every adapter implements."""

from __future__ import annotations

from typing import Protocol, TypeVar, runtime_checkable

from middleware.models import MetaInfo, ReachMessage, ReachResult

__all__ = ["Converter"]

NativeIn = TypeVar("NativeIn")
NativeOut = TypeVar("NativeOut")


@runtime_checkable
class Converter(Protocol[NativeIn, NativeOut]):
    """Moves a native input/output to and from the intermediate format.

    The router only ever sees `ReachMessage` and `ReachResult`; an adapter's converter is the one
    place that knows the native shapes.
    """

    def to_middleware(self, native: NativeIn, meta: MetaInfo | None = None) -> ReachMessage: ...

    def from_middleware(self, message: ReachMessage) -> NativeIn: ...

    def result_to_middleware(self, native: NativeOut, message: ReachMessage) -> ReachResult: ...

    def result_from_middleware(self, result: ReachResult) -> NativeOut: ...
