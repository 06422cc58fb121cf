"""Shared test helper: sessions that behave like Spark Connect's where this job touches the JVM."""

from __future__ import annotations

from typing import Any


def _connect_error() -> Exception:
    """The error a Spark Connect session raises for ``sparkContext`` (pyspark 4's, word for word)."""
    from pyspark.errors import PySparkAttributeError

    return PySparkAttributeError(errorClass="JVM_ATTRIBUTE_NOT_SUPPORTED", messageParameters={"attr_name": "sparkContext"})


class FakeConf:
    """``spark.conf`` over a dict: ``get(key, default)``, ``set``, ``unset``."""

    def __init__(self, values: dict[str, str] | None = None) -> None:
        self.values = dict(values or {})

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def unset(self, key: str) -> None:
        self.values.pop(key, None)


class ConnectLike:
    """No Spark at all: a ``conf``, ``interruptAll``, ``range(n).persist()``, and a ``sparkContext`` that raises as on
    Spark Connect."""

    def __init__(self, conf: dict[str, str] | None = None, *, refuse_cache: bool = False) -> None:
        self.conf = FakeConf(conf)
        self.interrupted = 0
        self.refuse_cache = refuse_cache  # as Databricks serverless compute does
        self.cached = 0

    def range(self, *_args: Any) -> _Frame:
        return _Frame(self)

    @property
    def sparkContext(self) -> Any:  # noqa: N802 - pyspark's name
        raise _connect_error()

    def interruptAll(self) -> list[str]:  # noqa: N802 - pyspark's name
        self.interrupted += 1
        return []


class WithoutContext:
    """A real (classic) session whose ``sparkContext`` raises as on Spark Connect: everything else is the session's,
    so a code path runs for real and fails where it reaches for the JVM."""

    def __init__(self, spark: Any) -> None:
        self._spark = spark

    @property
    def sparkContext(self) -> Any:  # noqa: N802 - pyspark's name
        raise _connect_error()

    def __getattr__(self, name: str) -> Any:
        if name in ("sparkContext", "_jsparkSession", "_jvm", "_sc"):  # (the property's AttributeError lands here)
            raise _connect_error()
        return getattr(self._spark, name)


class _Frame:
    """What :func:`jobs.session.check_session` does with a frame: persist it, unpersist it."""

    def __init__(self, session: ConnectLike) -> None:
        self._session = session

    def persist(self, *_args: Any) -> _Frame:
        if self._session.refuse_cache:
            raise RuntimeError("[NOT_SUPPORTED_WITH_SERVERLESS] PERSIST TABLE is not supported on serverless compute. "
                               "SQLSTATE: 0A000")
        self._session.cached += 1
        return self

    def unpersist(self, *_args: Any) -> _Frame:
        self._session.cached -= 1
        return self
