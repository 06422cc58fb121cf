"""Message tables as data, and the one interpreter that reads and writes them (spec §2).

A message layout is a :class:`MessageSpec` (name, valid versions, flexible versions, ordered
fields); each field is a :class:`FieldSpec` (name, type, versions, nullable versions, optional
tag + tagged versions, default, nested fields for structs). This mirrors Kafka's JSON schema
language (``clients/src/main/resources/common/message/README.md``) without copying any of its
files: the tables in :mod:`epochlib.coordinator` and :mod:`epochlib.protocol` are written from
spec/kafka-formats.md. Specs are validated when constructed, with errors naming the field.

Encoding rules the interpreter applies (spec §2):

* a field is on the wire in version v iff ``v in field.versions`` and v is not in its
  ``tagged_versions``; absent fields take their default;
* a version is flexible iff ``v in message.flexible_versions``; then strings, bytes and arrays
  use the COMPACT forms (unless the field's own ``flexible_versions`` excludes v, as Kafka's
  ``"flexibleVersions": "none"`` on RequestHeader.ClientId does) and every struct — top level,
  nested, array element — ends with a tagged-field section;
* tagged fields are decoded when known; unknown tags are skipped by size and kept under
  ``"_unknown_tags"`` as ``{tag: raw bytes}`` (only present when there are some), and written
  back by :func:`encode`;
* untagged nullable structs carry an INT8 marker (-1 null, 1 present); a tagged nullable struct's
  payload starts with a presence byte 1 that is counted in the tag size.

Decoded values are dicts keyed by the snake_case of the schema names; uuids are Kafka's text
form (22-char URL-safe base64); struct arrays are lists of dicts.

Contract: :func:`decode` returns ``(dict, pos)`` or raises :class:`DecodeError` with the absolute
byte position; nothing else escapes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from . import _wire as w
from ._wire import Buffer
from .errors import DecodeError

__all__ = [
    "F",
    "FieldSpec",
    "M",
    "MessageSpec",
    "SchemaError",
    "Versions",
    "decode",
    "encode",
    "snake_case",
]

_MAX = 0x7FFF  # Kafka versions are int16: "N+" means N..Short.MAX_VALUE


class SchemaError(ValueError):
    """A message or field spec contradicts itself (raised at construction, names the field)."""


# ------------------------------------------------------------------ Versions


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive range of versions: ``"0"``, ``"1-3"``, ``"3+"`` or ``"none"`` (empty)."""

    lo: int
    hi: int

    @classmethod
    def parse(cls, text: str | Versions) -> Versions:
        """Parse Kafka's range syntax; a :class:`Versions` passes through unchanged."""
        if isinstance(text, Versions):
            return text
        t = str(text).strip()
        try:
            if t == "none":
                return NONE
            if t.endswith("+"):
                return cls(int(t[:-1]), _MAX)
            if "-" in t:
                a, b = t.split("-", 1)
                lo, hi = int(a), int(b)
                if hi < lo:
                    raise SchemaError(f"invalid version range {text!r}: {hi} < {lo}")
                return cls(lo, hi)
            v = int(t)
            return cls(v, v)
        except ValueError as e:
            if isinstance(e, SchemaError):
                raise
            raise SchemaError(f"invalid version range {text!r}") from None

    @property
    def empty(self) -> bool:
        return self.hi < self.lo

    @property
    def open_ended(self) -> bool:
        return not self.empty and self.hi == _MAX

    def __contains__(self, v: object) -> bool:
        return isinstance(v, int) and self.lo <= v <= self.hi

    def __iter__(self):
        """The versions in the range (open ranges stop at ``lo`` + 63 to stay finite)."""
        return iter(range(self.lo, min(self.hi, self.lo + 63) + 1))

    def intersect(self, other: Versions) -> Versions:
        lo, hi = max(self.lo, other.lo), min(self.hi, other.hi)
        return NONE if hi < lo else Versions(lo, hi)

    def issubset(self, other: Versions) -> bool:
        return self.empty or (other.lo <= self.lo and self.hi <= other.hi)

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.hi == _MAX:
            return f"{self.lo}+"
        return str(self.lo) if self.lo == self.hi else f"{self.lo}-{self.hi}"


NONE = Versions(0, -1)
ALL = Versions(0, _MAX)


def snake_case(name: str) -> str:
    """``"LeaderEpoch"`` / ``"leaderEpoch"`` -> ``"leader_epoch"``; ``"TopicID"`` -> ``"topic_id"``."""
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


# ------------------------------------------------------------------ specs

_INTS = {"int8": (-(1 << 7), (1 << 7) - 1), "int16": (-(1 << 15), (1 << 15) - 1),
         "int32": (-(1 << 31), (1 << 31) - 1), "int64": (-(1 << 63), (1 << 63) - 1),
         "uint16": (0, 0xFFFF)}
_PRIMITIVES = set(_INTS) | {"bool", "float64", "string", "bytes", "uuid", "records"}
_NULLABLE_OK = {"string", "bytes", "records", "struct"}
_MISSING: Any = object()


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One field of a struct. ``type`` is a primitive name, ``"struct"``, or ``"[]<elem>"``
    (``"[]struct"`` for arrays of structs, whose element fields are ``fields``)."""

    name: str
    type: str
    versions: Versions = ALL
    nullable_versions: Versions = NONE
    tag: int | None = None
    tagged_versions: Versions = NONE
    default: Any = _MISSING
    fields: tuple[FieldSpec, ...] = ()
    flexible_versions: Versions | None = None  # None = follow the message; "none" = never compact
    key: str = field(default="", compare=False)  # dict key; "" = snake_case(name)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        for attr in ("versions", "nullable_versions", "tagged_versions"):
            try:
                set_(self, attr, Versions.parse(getattr(self, attr)))
            except SchemaError as e:
                raise SchemaError(f"field {self.name!r}: {attr}: {e}") from None
        if self.flexible_versions is not None:
            set_(self, "flexible_versions", Versions.parse(self.flexible_versions))
        set_(self, "fields", tuple(self.fields))
        set_(self, "key", self.key or snake_case(self.name))
        where = f"field {self.name!r}"
        if not self.name or not self.name.replace("_", "a").isalnum():
            raise SchemaError(f"{where}: invalid name")
        elem = self.elem_type
        if elem not in _PRIMITIVES and elem != "struct":
            raise SchemaError(f"{where}: unknown type {self.type!r}")
        if elem == "struct" and not self.fields:
            raise SchemaError(f"{where}: struct type needs nested fields")
        if elem != "struct" and self.fields:
            raise SchemaError(f"{where}: only struct types have nested fields")
        if self.versions.empty:
            raise SchemaError(f"{where}: versions must not be 'none'")
        if not self.nullable_versions.empty:
            if not self.is_array and elem not in _NULLABLE_OK:
                raise SchemaError(f"{where}: type {self.type!r} cannot be nullable")
            if not self.nullable_versions.issubset(self.versions):
                raise SchemaError(f"{where}: nullable_versions {self.nullable_versions} not within versions {self.versions}")
        if (self.tag is None) != self.tagged_versions.empty:
            raise SchemaError(f"{where}: a tag needs tagged_versions and tagged_versions need a tag")
        if self.tag is not None:
            if self.tag < 0:
                raise SchemaError(f"{where}: negative tag {self.tag}")
            if not self.tagged_versions.open_ended:
                raise SchemaError(f"{where}: tagged_versions {self.tagged_versions} must be open-ended (N+)")
            if not self.tagged_versions.issubset(self.versions):
                raise SchemaError(f"{where}: tagged_versions {self.tagged_versions} not within versions {self.versions}")
        _check_struct(self.fields, f"{where}.")
        if self.default is _MISSING:
            set_(self, "default", self._implicit_default())
        else:
            self._check_default(where)

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def elem_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    def _implicit_default(self) -> Any:
        if self.is_array:
            return ()
        t = self.type
        if t in _INTS:
            return 0
        return {"bool": False, "float64": 0.0, "string": "", "bytes": b"", "records": None,
                "uuid": w.ZERO_UUID, "struct": None}[t]

    def _check_default(self, where: str) -> None:
        d, t = self.default, self.type
        if d is None:
            if self.nullable_versions.empty and t not in ("records", "struct"):
                raise SchemaError(f"{where}: default null on a field that is never nullable")
            return
        ok = (
            (self.is_array and isinstance(d, (tuple, list)))
            or (t in _INTS and isinstance(d, int) and not isinstance(d, bool) and _INTS[t][0] <= d <= _INTS[t][1])
            or (t == "bool" and isinstance(d, bool))
            or (t == "float64" and isinstance(d, (int, float)))
            or (t == "string" and isinstance(d, str))
            or (t in ("bytes", "records") and isinstance(d, bytes))
            or (t == "uuid" and isinstance(d, str))
        )
        if not ok:
            raise SchemaError(f"{where}: default {d!r} does not fit type {t!r}")

    def default_value(self) -> Any:
        """A fresh copy of the default as decoded output would show it."""
        d = self.default
        if isinstance(d, tuple):
            return list(d)
        if d is None and self.type == "struct" and self.nullable_versions.empty:
            return {f.key: f.default_value() for f in self.fields}
        return d


def _check_struct(fields: Iterable[FieldSpec], prefix: str) -> None:
    names: set[str] = set()
    tags: set[int] = set()
    for f in fields:
        if not isinstance(f, FieldSpec):
            raise SchemaError(f"{prefix}{f!r}: not a FieldSpec")
        if f.key in names:
            raise SchemaError(f"field {prefix + f.name!r}: duplicate name")
        names.add(f.key)
        if f.tag is not None:
            if f.tag in tags:
                raise SchemaError(f"field {prefix + f.name!r}: duplicate tag {f.tag}")
            tags.add(f.tag)


def _walk(fields: Iterable[FieldSpec], prefix: str = ""):
    for f in fields:
        yield prefix + f.name, f
        yield from _walk(f.fields, f"{prefix}{f.name}.")


@dataclass(frozen=True, slots=True)
class MessageSpec:
    """A message (or coordinator key/value, or embedded protocol) layout."""

    name: str
    valid_versions: Versions
    flexible_versions: Versions
    fields: tuple[FieldSpec, ...]

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        try:
            set_(self, "valid_versions", Versions.parse(self.valid_versions))
            set_(self, "flexible_versions", Versions.parse(self.flexible_versions))
        except SchemaError as e:
            raise SchemaError(f"message {self.name!r}: {e}") from None
        set_(self, "fields", tuple(self.fields))
        if self.valid_versions.empty:
            raise SchemaError(f"message {self.name!r}: valid_versions must not be 'none'")
        _check_struct(self.fields, f"{self.name}.")
        for path, f in _walk(self.fields, f"{self.name}."):
            if f.tag is not None and not f.tagged_versions.issubset(self.flexible_versions):
                raise SchemaError(f"field {path!r}: tagged_versions {f.tagged_versions} outside "
                                  f"the message's flexible_versions {self.flexible_versions}")
            if f.flexible_versions is not None and not f.flexible_versions.issubset(self.flexible_versions):
                raise SchemaError(f"field {path!r}: flexible_versions {f.flexible_versions} outside "
                                  f"the message's {self.flexible_versions}")

    def versions(self) -> list[int]:
        """Every valid version (open ranges are cut at 63 versions)."""
        return list(self.valid_versions)


# ------------------------------------------------------------------ decode

_FIXED_READERS: dict[str, Callable[[Buffer, int], tuple[Any, int]]] = {
    "int8": w.read_int8, "int16": w.read_int16, "int32": w.read_int32, "int64": w.read_int64,
    "uint16": w.read_uint16, "bool": w.read_bool, "float64": w.read_float64, "uuid": w.read_uuid,
}
# (compact, nullable) -> reader
_STRING_READERS = {
    (False, False): w.read_string, (False, True): w.read_nullable_string,
    (True, False): w.read_compact_string, (True, True): w.read_compact_nullable_string,
}
_BYTES_READERS = {
    (False, False): w.read_bytes, (False, True): w.read_nullable_bytes,
    (True, False): w.read_compact_bytes, (True, True): w.read_compact_nullable_bytes,
}


def decode(spec: MessageSpec, version: int, buf: Buffer, pos: int = 0) -> tuple[dict[str, Any], int]:
    """Decode one ``spec`` struct at ``version`` from ``buf[pos:]``.

    Returns:
        ``(value, pos_after)`` — the dict has one snake_case key per field of the spec
        (absent fields hold their defaults), plus ``"_unknown_tags"`` when unknown tagged
        fields were present.

    Raises:
        DecodeError: unsupported version, truncated or malformed data (absolute position).
    """
    if version not in spec.valid_versions:
        raise DecodeError(f"{spec.name} version {version} not in {spec.valid_versions}", pos)
    flexible = version in spec.flexible_versions
    try:
        return _decode_struct(spec.fields, version, flexible, buf, pos)
    except DecodeError:
        raise
    except (RecursionError, MemoryError):
        raise DecodeError(f"{spec.name}: input too deeply nested or too large", pos) from None
    except Exception as e:  # noqa: BLE001 - contract: only DecodeError escapes
        raise DecodeError(f"{spec.name}: {type(e).__name__}: {e}", pos) from None


def _compact(f: FieldSpec, version: int, flexible: bool) -> bool:
    return flexible and (f.flexible_versions is None or version in f.flexible_versions)


def _decode_struct(fields: tuple[FieldSpec, ...], version: int, flexible: bool, buf: Buffer, pos: int):
    out: dict[str, Any] = {}
    tagged: dict[int, FieldSpec] = {}
    for f in fields:
        if version not in f.versions:
            out[f.key] = f.default_value()
        elif f.tag is not None and version in f.tagged_versions:
            out[f.key] = f.default_value()
            tagged[f.tag] = f
        else:
            out[f.key], pos = _decode_field(f, version, flexible, buf, pos)
    if flexible:
        pos = _decode_tags(tagged, version, buf, pos, out)
    return out, pos


def _decode_tags(known: dict[int, FieldSpec], version: int, buf: Buffer, pos: int, out: dict) -> int:
    start = pos
    count, pos = w.read_uvarint(buf, pos)
    if count > len(buf) - pos:
        raise DecodeError(f"tagged-field count {count} exceeds the bytes left", start)
    unknown: dict[int, bytes] = {}
    for _ in range(count):  # in any order, a tag repeated taking its last value: Kafka's generated readers check neither
        tag_pos = pos
        tag, pos = w.read_uvarint(buf, pos)
        size, pos = w.read_uvarint(buf, pos)
        end = pos + size
        if end > len(buf):
            raise DecodeError(f"tagged field {tag} of {size} bytes runs past the end", tag_pos)
        f = known.get(tag)
        if f is None:
            unknown[tag] = bytes(buf[pos:end])
        else:
            view = memoryview(buf)[:end]  # the payload may not read past its declared size
            if f.type == "struct":
                marker, p = w.read_int8(view, pos)
                if marker < 0:
                    value = None
                else:
                    value, p = _decode_struct(f.fields, version, True, view, p)
            else:
                value, p = _decode_field(f, version, True, view, pos)
            if p != end:
                raise DecodeError(f"tagged field {tag} ({f.name}) declared {size} bytes but used {p - pos}", pos)
            out[f.key] = value
        pos = end
    if unknown:
        out["_unknown_tags"] = unknown
    return pos


def _decode_field(f: FieldSpec, version: int, flexible: bool, buf: Buffer, pos: int):
    nullable = version in f.nullable_versions
    compact = _compact(f, version, flexible)
    if f.is_array:
        start = pos
        if compact:
            n1, pos = w.read_uvarint(buf, pos)
            n = n1 - 1
        else:
            n, pos = w.read_int32(buf, pos)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise DecodeError(f"{f.name}: array length {n}", start)
        if n > len(buf) - pos:
            raise DecodeError(f"{f.name}: array of {n} elements exceeds the {len(buf) - pos} bytes left", start)
        elem = f.elem_type
        items = []
        if elem == "struct":
            for _ in range(n):
                v, pos = _decode_struct(f.fields, version, flexible, buf, pos)
                items.append(v)
        else:
            read = _elem_reader(elem, compact)
            for _ in range(n):
                v, pos = read(buf, pos)
                items.append(v)
        return items, pos
    t = f.type
    if t == "struct":
        if nullable:
            marker, pos = w.read_int8(buf, pos)
            if marker < 0:
                return None, pos
        return _decode_struct(f.fields, version, flexible, buf, pos)
    if t == "string":
        return _STRING_READERS[compact, nullable](buf, pos)
    if t == "bytes":
        return _BYTES_READERS[compact, nullable](buf, pos)
    if t == "records":
        return _BYTES_READERS[compact, True](buf, pos)
    return _FIXED_READERS[t](buf, pos)


def _elem_reader(elem: str, compact: bool):
    if elem == "string":
        return _STRING_READERS[compact, False]
    if elem in ("bytes", "records"):
        return _BYTES_READERS[compact, False]
    return _FIXED_READERS[elem]


# ------------------------------------------------------------------ encode

_FIXED_WRITERS: dict[str, Callable[[Any], bytes]] = {
    "int8": w.write_int8, "int16": w.write_int16, "int32": w.write_int32, "int64": w.write_int64,
    "uint16": w.write_uint16, "bool": w.write_bool, "float64": w.write_float64, "uuid": w.write_uuid,
}
_STRING_WRITERS = {
    (False, False): w.write_string, (False, True): w.write_nullable_string,
    (True, False): w.write_compact_string, (True, True): w.write_compact_nullable_string,
}
_BYTES_WRITERS = {
    (False, False): w.write_bytes, (False, True): w.write_nullable_bytes,
    (True, False): w.write_compact_bytes, (True, True): w.write_compact_nullable_bytes,
}


def encode(spec: MessageSpec, version: int, value: dict[str, Any]) -> bytes:
    """Encode ``value`` (snake_case keys; missing keys take defaults) as ``spec`` at ``version``.

    Fields absent in ``version`` are ignored; tagged fields equal to their default are not
    written; ``value["_unknown_tags"]`` is written back. Raises ``ValueError`` for bad input.
    """
    if version not in spec.valid_versions:
        raise ValueError(f"{spec.name} version {version} not in {spec.valid_versions}")
    out: list[bytes] = []
    _encode_struct(spec.fields, version, version in spec.flexible_versions, value, out)
    return b"".join(out)


def _encode_struct(fields, version: int, flexible: bool, value: dict | None, out: list[bytes]) -> None:
    value = value or {}
    tags: dict[int, bytes] = {}
    for f in fields:
        if version not in f.versions:
            continue
        v = value.get(f.key, _MISSING)
        if v is _MISSING:
            v = f.default_value()
        if f.tag is not None and version in f.tagged_versions:
            if _is_default(f, v):
                continue
            buf: list[bytes] = []
            if f.type == "struct":
                if v is None:
                    continue
                buf.append(b"\x01")
                _encode_struct(f.fields, version, True, v, buf)
            else:
                _encode_field(f, version, True, v, buf)
            tags[f.tag] = b"".join(buf)
        else:
            _encode_field(f, version, flexible, v, out)
    if flexible:
        extra = value.get("_unknown_tags") or {}
        overlap = set(extra) & set(tags)
        if overlap:
            raise ValueError(f"_unknown_tags {sorted(overlap)} collide with known tags")
        out.append(w.write_tagged_fields({**extra, **tags}))


def _is_default(f: FieldSpec, v: Any) -> bool:
    d = f.default_value()
    if isinstance(d, list):
        return list(v or []) == d
    return v == d


def _encode_field(f: FieldSpec, version: int, flexible: bool, v: Any, out: list[bytes]) -> None:
    nullable = version in f.nullable_versions
    compact = _compact(f, version, flexible)
    if v is None and not nullable and f.type != "records":
        raise ValueError(f"{f.name}: null in version {version}, where it is not nullable")
    if f.is_array:
        if v is None:
            out.append(b"\x00" if compact else w.write_int32(-1))
            return
        items = list(v)
        out.append(w.write_uvarint(len(items) + 1) if compact else w.write_int32(len(items)))
        if f.elem_type == "struct":
            for item in items:
                _encode_struct(f.fields, version, flexible, item, out)
        else:
            write = _elem_writer(f.elem_type, compact)
            out.extend(write(item) for item in items)
        return
    t = f.type
    if t == "struct":
        if nullable:
            if v is None:
                out.append(w.write_int8(-1))
                return
            out.append(w.write_int8(1))
        _encode_struct(f.fields, version, flexible, v, out)
    elif t == "string":
        out.append(_STRING_WRITERS[compact, nullable](v))
    elif t == "bytes":
        out.append(_BYTES_WRITERS[compact, nullable](v))
    elif t == "records":
        out.append(_BYTES_WRITERS[compact, True](v))
    else:
        out.append(_FIXED_WRITERS[t](v))


def _elem_writer(elem: str, compact: bool):
    if elem == "string":
        return _STRING_WRITERS[compact, False]
    if elem in ("bytes", "records"):
        return _BYTES_WRITERS[compact, False]
    return _FIXED_WRITERS[elem]


def F(name: str, type: str, versions: str = "0+", *, nullable: str = "none", tag: int | None = None,
      tagged: str = "none", default: Any = _MISSING, fields: Iterable[FieldSpec] = (),
      flexible: str | None = None, key: str = "") -> FieldSpec:
    """Compact constructor for tables: ``F("LeaderEpoch", "int32", "3+", default=-1)``."""
    return FieldSpec(name, type, Versions.parse(versions), Versions.parse(nullable), tag,
                     Versions.parse(tagged), default, tuple(fields),
                     None if flexible is None else Versions.parse(flexible), key)


def M(name: str, valid: str, flexible: str, *fields: FieldSpec) -> MessageSpec:
    """Compact constructor for tables: ``M("OffsetCommitValue", "0-4", "4+", F(...), ...)``."""
    return MessageSpec(name, Versions.parse(valid), Versions.parse(flexible), tuple(fields))
