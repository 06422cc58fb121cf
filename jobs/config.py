"""The run configuration: frozen dataclasses parsed from TOML, validated with one-line errors.

The keys are the contract of DESIGN.md ("Entry points"); ``conf/*.toml`` documents each one::

    cluster = "prod-eu1"
    reports = ["stale_metadata", "fencing_violations", "spurious_offset_resets"]
    [inputs]   offsets, logdirs, metadata, cluster_metadata (paths or URIs, each optional), broker_ports = [9092],
               broker_addresses = {"10.0.0.13:9092" = 3, "10.0.0.14" = 4} (address -> node id, optional),
               follow_symlinks = false (follow links out of the input roots)
    [output]   root = "..."  |  catalog = "...", schema = "..."; backend = "auto"; [output.storage_options]
    [rules]    lookback_days, correlation_window_minutes, stale_grace_ms, snapshot_tolerance_seconds
    [spark]    master = "local[*]"; [spark.conf] any Spark setting

Relative paths in a file are resolved against the file's directory (or ``base_dir``); relative paths
given as CLI flags (:meth:`Config.with_overrides`) against the current directory. URIs with a scheme
(``hdfs://``, ``s3a://``, ``abfss://``, ``dbfs:/``, ``file:``) are kept as written.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Literal

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from .errors import ConfigError

__all__ = [
    "BACKENDS",
    "DEFAULT_CONFIG_PATH",
    "REPORTS",
    "Config",
    "Inputs",
    "Output",
    "Rules",
    "SparkSettings",
    "check_master",
    "config_from_flags",
    "default_config",
    "example_config_path",
    "load_config",
    "parse_config",
    "parse_date_range",
]

#: The report (gold) tables a run can produce, in the order they run.
REPORTS: tuple[str, ...] = ("stale_metadata", "fencing_violations", "spurious_offset_resets")
#: Delta sink back ends: ``auto`` picks Spark's Delta source when the session has it, else delta-rs.
BACKENDS: tuple[str, ...] = ("auto", "delta-spark", "delta-rs")
Backend = Literal["auto", "delta-spark", "delta-rs"]

#: The embedded default configuration (the demo's). It ships inside the package so a plain
#: ``pip install`` (no source tree) still has it; ``conf/local.toml`` is a link to this file.
DEFAULT_CONFIG_PATH = Path(__file__).resolve().parent / "local.toml"
#: Commented example configurations shipped in the package (``conf/*.example.toml`` link to them).
EXAMPLES: dict[str, Path] = {
    "local": DEFAULT_CONFIG_PATH,
    "nightly": DEFAULT_CONFIG_PATH.with_name("nightly.example.toml"),
    "databricks": DEFAULT_CONFIG_PATH.with_name("databricks.example.toml"),
}

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CLUSTER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class Inputs:
    """Where the evidence is; each location is optional (a missing one means "no such evidence")."""

    LOCATIONS: ClassVar[tuple[str, ...]] = ("offsets", "logdirs", "metadata", "cluster_metadata")
    """The names of the four locations (fields of this class)."""

    offsets: str | None = None
    """``__consumer_offsets`` dumps: segments, Parquet/JSONL rows, console/dump-log text."""
    logdirs: str | None = None
    """Broker log-dir snapshots: ``broker=<id>/snapshot=<YYYYMMDDTHHMMSSZ>/<topic>-<partition>/``."""
    metadata: str | None = None
    """MetadataResponse captures: pcap/pcapng files and JSONL lines."""
    cluster_metadata: str | None = None
    """KRaft metadata logs: ``**/__cluster_metadata-0/`` copies (segments, snapshots) of one or more nodes, and
    ``kafka-dump-log --cluster-metadata-decoder`` text (spec/kraft-metadata.md)."""
    broker_ports: tuple[int, ...] = (9092,)
    """TCP ports that identify Kafka traffic in packet captures."""
    broker_addresses: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    """Address (``host:port``, or ``host`` for any port) -> node id, for capture brokers that a response's
    own broker list does not name (e.g. pcap peer IPs of a cluster advertising host names). Keys are
    canonical (:func:`epochlib.brokers.normalize_addresses`)."""
    follow_symlinks: bool = False
    """Follow symbolic links that lead out of an input root (off by default: a link to ``/etc`` must not
    become input). Links to paths inside the root are never followed (the target is read at its own path)
    and a loop is never descended; what is skipped is counted in the run summary."""

    @property
    def roots(self) -> tuple[str | None, ...]:
        """The four locations, in :data:`LOCATIONS` order."""
        return tuple(getattr(self, name) for name in self.LOCATIONS)


@dataclass(frozen=True)
class Output:
    """Where the tables go: ``<root>/<table>`` (Delta paths) or ``<catalog>.<schema>.<table>``."""

    root: str | None = None
    catalog: str | None = None
    schema: str | None = None
    backend: Backend = "auto"
    storage_options: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """Passed to delta-rs for object stores (e.g. ``AWS_REGION``); Spark uses its own Hadoop settings."""

    def table_location(self, table: str) -> str:
        """The path/URI (root) or the three-part name (catalog) of ``table``."""
        if self.root is not None:
            return f"{self.root.rstrip('/')}/{table}"
        return f"{self.catalog}.{self.schema}.{table}"


@dataclass(frozen=True)
class Rules:
    """Detection parameters (spec/detection-rules.md)."""

    lookback_days: int = 1
    """Days before ``from`` whose state (commits, lineage, metadata) detection may read."""
    correlation_window_minutes: int = 15
    """How far apart a stale-metadata finding and an offset reset may be and still be correlated (M4)."""
    stale_grace_ms: int = 1000
    """Metadata this little older than what a client already saw is not reported as stale."""
    snapshot_tolerance_seconds: int = 300
    """Clock skew allowed between snapshots of different brokers taken "at the same time"."""


@dataclass(frozen=True)
class SparkSettings:
    """Settings for a session the job creates itself (ignored when one is already active)."""

    master: str = "local[*]"
    conf: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class Config:
    """One run's configuration. Build with :func:`load_config`; change with :meth:`with_overrides`."""

    cluster: str
    inputs: Inputs = field(default_factory=Inputs)
    output: Output = field(default_factory=lambda: Output(root="epoch-audit-output"))
    rules: Rules = field(default_factory=Rules)
    spark: SparkSettings = field(default_factory=SparkSettings)
    reports: tuple[str, ...] = REPORTS
    source: Path | None = None
    """The file this config was read from (None when built in code)."""

    def with_overrides(
        self,
        *,
        offsets: str | Path | None = None,
        logdirs: str | Path | None = None,
        metadata: str | Path | None = None,
        cluster_metadata: str | Path | None = None,
        output_root: str | Path | None = None,
        cluster: str | None = None,
        reports: str | Sequence[str] | None = None,
    ) -> Config:
        """A copy with the CLI flags applied; ``None`` leaves a setting as it is.

        Relative paths are resolved against the current directory. ``output_root`` replaces a
        catalog/schema target. ``reports`` is a list or a comma-separated string.

        Raises:
            ConfigError: a flag value is invalid.
        """
        cwd = Path.cwd()
        inputs = self.inputs
        changes: dict[str, Any] = {}
        for name, value in (("offsets", offsets), ("logdirs", logdirs), ("metadata", metadata),
                            ("cluster_metadata", cluster_metadata)):
            if value is not None:
                changes[name] = _resolve(_text(f"--{name.replace('_', '-')}", value), cwd)
        if changes:
            inputs = dataclasses.replace(inputs, **changes)
        output = self.output
        if output_root is not None:
            output = dataclasses.replace(
                output, root=_output_root("--output-root", _text("--output-root", output_root), cwd), catalog=None,
                schema=None
            )
        new_cluster = self.cluster if cluster is None else _cluster("--cluster", cluster)
        new_reports = self.reports
        if reports is not None:
            if isinstance(reports, str):
                reports = [r.strip() for r in reports.split(",") if r.strip()]
            new_reports = _reports("--reports", list(reports))
        return dataclasses.replace(self, inputs=inputs, output=output, cluster=new_cluster, reports=new_reports)


# --------------------------------------------------------------------------------------------- loading


def load_config(path: str | Path, *, base_dir: str | Path | None = None) -> Config:
    """Read and validate a TOML config file.

    Args:
        path: the TOML file.
        base_dir: directory that relative paths are resolved against (default: the file's directory).

    Raises:
        ConfigError: unreadable file, bad TOML, or an invalid setting (the message names the key).
    """
    path = Path(path).expanduser()
    try:
        text = path.read_text(encoding="utf-8-sig")  # a BOM (Windows editors save one) is no TOML error
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}): save the config as UTF-8") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    # the folder of the file as given, not of a link's target (conf/local.toml is a link into jobs/); absolute(), not
    # abspath(): `link/../x.toml` names the file beside the link's target, as the OS opens it
    base = Path(base_dir) if base_dir is not None else path.absolute().parent
    try:
        return parse_config(raw, base_dir=base, source=path.resolve())
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def default_config(*, base_dir: str | Path | None = None) -> Config:
    """The embedded default (``conf/local.toml``), with relative paths resolved against ``base_dir``
    (default: the current directory, so the demo writes ``./epoch-audit-output`` where it is run)."""
    if not DEFAULT_CONFIG_PATH.is_file():
        raise ConfigError(f"embedded default config missing: {DEFAULT_CONFIG_PATH}")
    return load_config(DEFAULT_CONFIG_PATH, base_dir=Path.cwd() if base_dir is None else base_dir)


def config_from_flags(
    *,
    cluster: str | None,
    output_root: str | Path | None,
    offsets: str | Path | None = None,
    logdirs: str | Path | None = None,
    metadata: str | Path | None = None,
    cluster_metadata: str | Path | None = None,
    reports: str | Sequence[str] | None = None,
    command: str = "run",
) -> Config:
    """A config made of the CLI flags alone (no ``--conf``): only the inputs the flags name, never the
    demo's; ``--cluster`` and ``--output-root`` are required so no run writes into the demo's tables.

    Raises:
        ConfigError: ``--cluster`` or ``--output-root`` is missing, or a flag value is invalid.
    """
    missing = [flag for flag, value in (("--cluster", cluster), ("--output-root", output_root)) if value is None]
    if missing:
        raise ConfigError(
            f"{command} without --conf needs {' and '.join(missing)} (or pass --conf FILE; "
            "`epoch-audit init FILE` writes a commented one)"
        )
    base = Config(cluster=_cluster("--cluster", cluster), output=Output(root="unset"))
    return base.with_overrides(offsets=offsets, logdirs=logdirs, metadata=metadata,
                               cluster_metadata=cluster_metadata, output_root=output_root, reports=reports)


def example_config_path(name: str) -> Path:
    """The packaged example config ``name`` (``local``, ``nightly`` or ``databricks``).

    Raises:
        ConfigError: an unknown name, or the file is missing from the installation.
    """
    if name not in EXAMPLES:
        raise ConfigError(f"unknown example {name!r}; valid: {', '.join(EXAMPLES)}")
    path = EXAMPLES[name]
    if not path.is_file():
        raise ConfigError(f"example config missing from the installation: {path}")
    return path


_TOP_KEYS = ("cluster", "reports", "inputs", "output", "rules", "spark")
_INPUT_KEYS = ("offsets", "logdirs", "metadata", "broker_ports", "broker_addresses", "follow_symlinks",
               "cluster_metadata")
_OUTPUT_KEYS = ("root", "catalog", "schema", "backend", "storage_options")
_RULE_KEYS = tuple(f.name for f in dataclasses.fields(Rules))
_SPARK_KEYS = ("master", "conf")


#: The local masters Spark accepts (SparkContext's LOCAL_N_REGEX, LOCAL_N_FAILURES_REGEX, LOCAL_CLUSTER_REGEX;
#: with at least one thread: Spark refuses ``local[0]`` only once its JVM is up).
_LOCAL_MASTER = re.compile(r"local|local\[([1-9][0-9]*|\*)\]|local\[([1-9][0-9]*|\*)\s*,\s*[0-9]+\]"
                           r"|local-cluster\[\s*[0-9]+\s*,\s*[0-9]+\s*,\s*[0-9]+\s*\]")


def check_master(name: str, value: str) -> str:
    """``value`` when it is not a malformed local master; said before a JVM is started for it (Spark's own refusal
    comes as a Java stack trace, after the JVM's start).

    Raises:
        ConfigError: ``value`` starts with ``local`` but is none of ``local``, ``local[N]``, ``local[*]``,
            ``local[N,M]`` (N ≥ 1; M: task retries), ``local-cluster[N,C,M]``.
    """
    if value.strip().startswith("local") and not _LOCAL_MASTER.fullmatch(value):
        raise ConfigError(f"{name} {value!r} is not a Spark master: a local one is local, local[N], local[*], "
                          "local[N,M] or local-cluster[N,C,M]")
    return value


def parse_config(raw: Mapping[str, Any], *, base_dir: str | Path = ".", source: Path | None = None) -> Config:
    """Validate an already-parsed TOML mapping (the same rules as :func:`load_config`)."""
    base = Path(base_dir)
    _check_keys("", raw, _TOP_KEYS)
    if "cluster" not in raw:
        raise ConfigError("missing key 'cluster' (the name of the audited Kafka cluster)")
    cluster = _cluster("cluster", raw["cluster"])
    reports = _reports("reports", raw["reports"]) if "reports" in raw else REPORTS

    inputs_raw = _table("inputs", raw.get("inputs", {}))
    _check_keys("inputs.", inputs_raw, _INPUT_KEYS)
    inputs = Inputs(
        **{
            k: _resolve(_text(f"inputs.{k}", inputs_raw[k]), base)
            for k in Inputs.LOCATIONS
            if k in inputs_raw
        },
        broker_ports=_ports(inputs_raw["broker_ports"]) if "broker_ports" in inputs_raw else (9092,),
        broker_addresses=_addresses(inputs_raw.get("broker_addresses", {})),
        follow_symlinks=_bool("inputs.follow_symlinks", inputs_raw.get("follow_symlinks", False)),
    )

    out_raw = _table("output", raw.get("output", {}))
    _check_keys("output.", out_raw, _OUTPUT_KEYS)
    root = _output_root("output.root", _text("output.root", out_raw["root"]), base) if "root" in out_raw else None
    catalog = _ident("output.catalog", out_raw["catalog"]) if "catalog" in out_raw else None
    schema = _ident("output.schema", out_raw["schema"]) if "schema" in out_raw else None
    if root is not None and (catalog is not None or schema is not None):
        raise ConfigError("[output]: set either 'root' or 'catalog' + 'schema', not both")
    if root is None and (catalog is None or schema is None):
        if catalog is None and schema is None:
            raise ConfigError("[output]: no output location: set 'root' (a path) or 'catalog' + 'schema'")
        missing = "schema" if schema is None else "catalog"
        raise ConfigError(f"[output]: '{missing}' is required with a catalog target (catalog + schema)")
    backend = out_raw.get("backend", "auto")
    if backend not in BACKENDS:
        raise ConfigError(f"output.backend: unknown back end {backend!r}; valid: {', '.join(BACKENDS)}")
    if catalog is not None and backend == "delta-rs":
        raise ConfigError("output.backend: 'delta-rs' cannot write catalog tables; use 'auto' or 'delta-spark'")
    storage = _str_map("output.storage_options", out_raw.get("storage_options", {}))
    output = Output(root=root, catalog=catalog, schema=schema, backend=backend, storage_options=storage)

    rules_raw = _table("rules", raw.get("rules", {}))
    _check_keys("rules.", rules_raw, _RULE_KEYS)
    rules = Rules(**{k: _non_negative_int(f"rules.{k}", v, RULE_LIMITS.get(k)) for k, v in rules_raw.items()})

    spark_raw = _table("spark", raw.get("spark", {}))
    _check_keys("spark.", spark_raw, _SPARK_KEYS)
    master = "local[*]"
    if "master" in spark_raw:
        master = check_master("[spark] master", _text("spark.master", spark_raw["master"]))
    spark_conf = _str_map("spark.conf", spark_raw.get("conf", {}))
    spark = SparkSettings(master=master, conf=spark_conf)

    return Config(
        cluster=cluster, inputs=inputs, output=output, rules=rules, spark=spark, reports=reports, source=source
    )


# ------------------------------------------------------------------------------------------ date range


def parse_date_range(from_: str | dt.date, to: str | dt.date | None = None, *,
                     audited: bool = False) -> tuple[dt.date, dt.date]:
    """Parse ``--from``/``--to`` (``YYYY-MM-DD``, inclusive; ``to`` defaults to ``from``).

    Raises:
        ConfigError: a value is not a date, ``from`` is after ``to``, or (``audited``: a range a run or
            report is asked for) a date is outside :data:`FIRST_DAY` .. :data:`LAST_DAY`.
    """
    start = _date("--from", from_)
    end = start if to is None else _date("--to", to)
    if start > end:
        raise ConfigError(f"--from {start.isoformat()} is after --to {end.isoformat()}")
    for flag, day in (("--from", start), ("--to", end)) if audited else ():
        if not FIRST_DAY <= day <= LAST_DAY:
            raise ConfigError(f"{flag} {day.isoformat()} is outside {FIRST_DAY.isoformat()}..{LAST_DAY.isoformat()}")
    return start, end


#: The dates a run may audit: Kafka's timestamps count from 1970, and a run reads the day after its range.
FIRST_DAY, LAST_DAY = dt.date(1970, 1, 1), dt.date(9999, 12, 29)


def _date(flag: str, value: str | dt.date) -> dt.date:
    if isinstance(value, dt.datetime):
        raise ConfigError(f"{flag}: expected a date (YYYY-MM-DD), got a datetime {value!r}")
    if isinstance(value, dt.date):
        return value
    if not isinstance(value, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value.strip()):
        raise ConfigError(f"{flag}: {value!r} is not a date in the form YYYY-MM-DD")
    try:
        return dt.date.fromisoformat(value.strip())
    except ValueError as exc:
        raise ConfigError(f"{flag}: {value!r} is not a valid date ({exc})") from None


# ------------------------------------------------------------------------------------------ validators


def _type_name(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "float", str: "string", list: "array", dict: "table"}.get(
        type(value), type(value).__name__
    )


def _check_keys(prefix: str, raw: Mapping[str, Any], valid: Sequence[str]) -> None:
    for key in raw:
        if key not in valid:
            where = f"[{prefix[:-1]}]" if prefix else "top level"
            raise ConfigError(
                f"unknown key '{prefix}{key}' ({where}); valid keys: {', '.join(valid)}"
            )


def _table(name: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"'{name}' must be a table ([{name}]), got {_type_name(value)}")
    return value


def _text(key: str, value: Any) -> str:
    if isinstance(value, Path):
        value = str(value)
    if not isinstance(value, str):
        raise ConfigError(f"'{key}' must be a string, got {_type_name(value)} {value!r}")
    if not value.strip():
        raise ConfigError(f"'{key}' must not be empty")
    return value.strip()


def _cluster(key: str, value: Any) -> str:
    text = _text(key, value)
    if not _CLUSTER.match(text):
        raise ConfigError(
            f"'{key}' = {text!r}: use letters, digits, '.', '_' or '-' (it becomes a partition value)"
        )
    return text


def _ident(key: str, value: Any) -> str:
    text = _text(key, value)
    if not _IDENT.match(text):
        raise ConfigError(f"'{key}' = {text!r} is not a plain identifier (letters, digits, '_')")
    return text


def _bool(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"'{key}' must be true or false, got {_type_name(value)} {value!r}")
    return value


#: The largest value of each ``[rules]`` setting: far beyond any use (a century of lookback, a year of window or
#: grace), and small enough that the dates and milliseconds computed from it stay in range (a lookback of a million
#: days was an OverflowError, exit 1).
RULE_LIMITS = {"lookback_days": 36_500, "correlation_window_minutes": 525_600, "stale_grace_ms": 31_536_000_000,
               "snapshot_tolerance_seconds": 31_536_000}


def _non_negative_int(key: str, value: Any, limit: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"'{key}' must be an integer, got {_type_name(value)} {value!r}")
    if value < 0:
        raise ConfigError(f"'{key}' must not be negative, got {value}")
    if limit is not None and value > limit:
        raise ConfigError(f"'{key}' must be at most {limit:,}, got {value:,}")
    return value


def _ports(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise ConfigError(f"'inputs.broker_ports' must be an array of integers, got {_type_name(value)}")
    ports = []
    for port in value:
        if isinstance(port, bool) or not isinstance(port, int):
            raise ConfigError(f"'inputs.broker_ports' must contain integers, got {_type_name(port)} {port!r}")
        if not 1 <= port <= 65535:
            raise ConfigError(f"'inputs.broker_ports': {port} is not a TCP port (1-65535)")
        ports.append(port)
    return tuple(dict.fromkeys(ports))


def _addresses(value: Any) -> Mapping[str, int]:
    key = "inputs.broker_addresses"
    if not isinstance(value, Mapping):
        raise ConfigError(f"'{key}' must be a table of \"address\" = node id, got {_type_name(value)} {value!r}")
    if not value:
        return MappingProxyType({})
    from epochlib.brokers import normalize_addresses  # pyarrow: only when there is a mapping

    try:
        return MappingProxyType(normalize_addresses(value))
    except ValueError as exc:
        raise ConfigError(f"'{key}': {exc}") from None


def _reports(key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"'{key}' must be an array of report names; valid: {', '.join(REPORTS)}")
    for name in value:
        if name not in REPORTS:
            raise ConfigError(f"'{key}': unknown report {name!r}; valid: {', '.join(REPORTS)}")
    if not value:
        raise ConfigError(f"'{key}' must name at least one report; valid: {', '.join(REPORTS)}")
    return tuple(dict.fromkeys(value))


def _str_map(key: str, value: Any) -> Mapping[str, str]:
    table = _table(key, value)
    out: dict[str, str] = {}
    for k, v in table.items():
        if isinstance(v, bool):
            out[k] = "true" if v else "false"
        elif isinstance(v, (int, float, str)):
            out[k] = str(v)
        else:
            raise ConfigError(f"'{key}.{k}' must be a string, number or boolean, got {_type_name(v)}")
    return MappingProxyType(out)


_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")


def _output_root(name: str, value: str, base: Path) -> str:
    """:func:`_resolve` for the output root, refusing a local path with a ``%XX`` in it: delta-rs reads a local table
    path as a URI and unescapes it (``audit%41`` becomes ``auditA``), so every commit of the run failed after its
    work (exit 4), and the failed run could not be recorded."""
    from .fs import resolve

    root = _resolve(value, base)
    native = resolve(root).native  # a ``file:`` URI is a local path too
    m = _PERCENT_ESCAPE.search(native) if native.startswith("/") else None
    if m:
        raise ConfigError(f"{name} {value}: a local path with a %-escape ({m.group()}) cannot hold the Delta tables "
                          "(delta-rs reads it unescaped): choose a folder name without '%XX'")
    return root


def _resolve(value: str, base: Path) -> str:
    """Resolve a local relative path against ``base``; keep URIs (:func:`jobs.fs.is_uri`) and absolute paths."""
    from .fs import is_uri

    if is_uri(value):
        return value
    path = Path(value).expanduser()
    if not path.is_absolute():
        path = base / path
    return str(path.resolve())
