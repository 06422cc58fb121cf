"""The one error type every epochlib decoder raises for malformed input.

Contract (as h11's): a decoder given any bytes or text returns a value or raises
:class:`DecodeError`. Any other exception escaping a public decoder is a bug; the fuzz
tests in ``tests/`` enforce this.
"""

from __future__ import annotations

__all__ = ["DecodeError"]


class DecodeError(ValueError):
    """Malformed input, with where it went wrong and why.

    Attributes:
        reason: what was wrong, e.g. ``"string length 70000 runs past the end"``.
        offset: the byte position (``unit="byte"``) or line number (``unit="line"``)
            where the problem was found, relative to the start of the input the caller
            passed in (decoders that know an absolute file position add it).
        unit: ``"byte"`` for binary input, ``"line"`` for text formats.
    """

    def __init__(self, reason: str, offset: int = 0, *, unit: str = "byte") -> None:
        self.reason = reason
        self.offset = offset
        self.unit = unit
        super().__init__(f"{reason} at {unit} {offset}")

    def shifted(self, base: int) -> DecodeError:
        """The same error with ``base`` added to its offset (for nested decoding)."""
        return DecodeError(self.reason, self.offset + base, unit=self.unit)

    def __reduce__(self):  # keep pickling (Spark executors) lossless
        return (_rebuild, (self.reason, self.offset, self.unit))


def _rebuild(reason: str, offset: int, unit: str) -> DecodeError:
    return DecodeError(reason, offset, unit=unit)
