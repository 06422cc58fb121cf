"""Config parsing: the TOML contract of DESIGN.md, every validation error, path resolution, dates."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from jobs.config import REPORTS, Config, default_config, load_config, parse_config, parse_date_range
from jobs.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent

FULL = """
cluster = "prod-eu1"
reports = ["stale_metadata", "spurious_offset_resets"]
[inputs]
offsets = "data/offsets"
logdirs = "hdfs:///kafka/logdirs"
metadata = "/abs/metadata"
broker_ports = [9092, 9093]
broker_addresses = { "10.0.0.13:9092" = 3, "10.0.0.14" = 4, "Broker-5.Example.COM:9092" = 5 }
[output]
root = "out"
backend = "delta-rs"
[output.storage_options]
AWS_REGION = "eu-west-1"
[rules]
lookback_days = 2
correlation_window_minutes = 30
stale_grace_ms = 0
snapshot_tolerance_seconds = 60
[spark]
master = "local[2]"
[spark.conf]
"spark.sql.shuffle.partitions" = 4
"spark.sql.adaptive.enabled" = true
"""


def write(tmp_path: Path, text: str, name: str = "c.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_full_file_parses_and_resolves_paths_against_the_file(tmp_path: Path) -> None:
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    cfg = load_config(write(conf_dir, FULL))
    assert cfg.cluster == "prod-eu1"
    assert cfg.reports == ("stale_metadata", "spurious_offset_resets")
    assert cfg.inputs.offsets == str(conf_dir / "data" / "offsets")
    assert cfg.inputs.logdirs == "hdfs:///kafka/logdirs"  # URIs are kept as written
    assert cfg.inputs.metadata == "/abs/metadata"
    assert cfg.inputs.broker_ports == (9092, 9093)
    # keys canonical (host names lower case), a host-only key meaning any port
    assert dict(cfg.inputs.broker_addresses) == {"10.0.0.13:9092": 3, "10.0.0.14": 4, "broker-5.example.com:9092": 5}
    assert cfg.output.root == str(conf_dir / "out")
    assert cfg.output.backend == "delta-rs"
    assert dict(cfg.output.storage_options) == {"AWS_REGION": "eu-west-1"}
    assert (cfg.rules.lookback_days, cfg.rules.correlation_window_minutes) == (2, 30)
    assert (cfg.rules.stale_grace_ms, cfg.rules.snapshot_tolerance_seconds) == (0, 60)
    assert cfg.spark.master == "local[2]"
    assert dict(cfg.spark.conf) == {"spark.sql.shuffle.partitions": "4", "spark.sql.adaptive.enabled": "true"}
    assert cfg.output.table_location("offset_commits") == str(conf_dir / "out" / "offset_commits")


def test_a_relative_path_with_a_colon_resolves_against_the_file(tmp_path: Path, monkeypatch) -> None:
    """``backup:2024-03-04`` in a config is a folder beside the file, like any relative path (it was taken as a URI
    and kept as written, so a cron job read the folder of that name in its working directory, or none)."""
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    monkeypatch.chdir(tmp_path)
    cfg = load_config(write(conf_dir, 'cluster = "c"\n[inputs]\noffsets = "backup:2024-03-04"\n'
                                      'metadata = "s3://b/caps"\n[output]\nroot = "tables:nightly"\n'))
    assert cfg.inputs.offsets == str(conf_dir / "backup:2024-03-04")
    assert cfg.output.root == str(conf_dir / "tables:nightly")
    assert cfg.inputs.metadata == "s3://b/caps"


def test_relative_paths_of_a_linked_config_resolve_beside_the_link(tmp_path: Path) -> None:
    """``conf/local.toml`` is a link into ``jobs/``: its relative paths resolved against ``jobs/``, not against the
    folder of the file the user named (README: "against the config file's directory")."""
    real = tmp_path / "pkg"
    real.mkdir()
    target = write(real, 'cluster = "c"\n[output]\nroot = "./tables"\n')
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "x.toml").symlink_to(target)
    assert load_config(tmp_path / "conf" / "x.toml").output.root == str(tmp_path / "conf" / "tables")
    assert load_config(target).output.root == str(real / "tables")
    (real / "sub").mkdir()
    (tmp_path / "link").symlink_to(real / "sub")
    assert load_config(tmp_path / "link" / ".." / target.name).output.root == str(real / "tables")  # as opened


def test_defaults_for_a_minimal_file(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, 'cluster = "c"\n[output]\nroot = "/o"\n'))
    assert cfg.reports == REPORTS
    assert cfg.inputs.offsets is None and cfg.inputs.broker_ports == (9092,)
    assert dict(cfg.inputs.broker_addresses) == {}
    assert cfg.output.backend == "auto"
    assert (cfg.rules.lookback_days, cfg.rules.correlation_window_minutes) == (1, 15)
    assert (cfg.rules.stale_grace_ms, cfg.rules.snapshot_tolerance_seconds) == (1000, 300)
    assert cfg.spark.master == "local[*]" and dict(cfg.spark.conf) == {}


def test_catalog_target(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, 'cluster = "c"\n[output]\ncatalog = "kafka"\nschema = "audit"\n'))
    assert cfg.output.root is None
    assert cfg.output.table_location("stale_metadata") == "kafka.audit.stale_metadata"


def test_config_is_frozen(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, 'cluster = "c"\n[output]\nroot = "/o"\n'))
    with pytest.raises(AttributeError):
        cfg.cluster = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        cfg.spark.conf["x"] = "y"  # type: ignore[index]


@pytest.mark.parametrize("name", ["local.toml", "nightly.example.toml", "databricks.example.toml"])
def test_shipped_configs_load(name: str) -> None:
    cfg = load_config(ROOT / "conf" / name)
    assert cfg.cluster and cfg.reports == REPORTS
    # every input a user can set, the KRaft metadata log included, is in each example (and what `init` writes)
    assert all(getattr(cfg.inputs, k) for k in ("offsets", "logdirs", "metadata", "cluster_metadata")), cfg.inputs


def test_every_key_in_shipped_configs_is_commented() -> None:
    for name in ("local.toml", "nightly.example.toml", "databricks.example.toml"):
        lines = (ROOT / "conf" / name).read_text().splitlines()
        for i, line in enumerate(lines):
            if "=" in line and not line.lstrip().startswith("#"):
                above = [x for x in lines[:i] if x.strip()]
                assert above and (above[-1].lstrip().startswith("#") or "=" in above[-1]), (name, line)
                assert not above[-1].lstrip().startswith("["), (name, line)


def test_default_config_resolves_against_the_working_directory(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = default_config()
    assert cfg.output.root == str(tmp_path / "epoch-audit-demo" / "tables")
    assert cfg.inputs.offsets == str(tmp_path / "epoch-audit-demo" / "inputs" / "offsets")
    assert cfg.spark.master == "local[*]"


BAD = [
    ("cluster = 'c'\nbogus = 1\n[output]\nroot='/o'", "unknown key 'bogus'"),
    ("cluster = 'c'\n[inputs]\noffset = 'x'\n[output]\nroot='/o'", "unknown key 'inputs.offset'"),
    ("cluster = 'c'\n[output]\nroot='/o'\npath='x'", "unknown key 'output.path'"),
    ("cluster = 'c'\n[output]\nroot='/o'\n[rules]\nlookback = 1", "unknown key 'rules.lookback'"),
    ("cluster = 'c'\n[output]\nroot='/o'\n[spark]\nmaster='x'\ncores=2", "unknown key 'spark.cores'"),
    ("[output]\nroot='/o'", "missing key 'cluster'"),
    ("cluster = 3\n[output]\nroot='/o'", "'cluster' must be a string"),
    ("cluster = 'a b'\n[output]\nroot='/o'", "'cluster' = 'a b'"),
    ("cluster = ''\n[output]\nroot='/o'", "'cluster' must not be empty"),
    ("cluster = 'c'\n[inputs]\noffsets = 5\n[output]\nroot='/o'", "'inputs.offsets' must be a string"),
    ("cluster = 'c'\n[inputs]\nbroker_ports = 9092\n[output]\nroot='/o'", "must be an array of integers"),
    ("cluster = 'c'\n[inputs]\nbroker_ports = ['x']\n[output]\nroot='/o'", "must contain integers"),
    ("cluster = 'c'\n[inputs]\nbroker_ports = [70000]\n[output]\nroot='/o'", "not a TCP port"),
    ("cluster = 'c'\n[inputs]\nbroker_addresses = ['10.0.0.13']\n[output]\nroot='/o'",
     "'inputs.broker_addresses' must be a table"),
    ("cluster = 'c'\n[inputs.broker_addresses]\n'10.0.0.13:9092' = '3'\n[output]\nroot='/o'",
     "'inputs.broker_addresses': '10.0.0.13:9092': the node id must be an integer 0..2147483647, got string '3'"),
    ("cluster = 'c'\n[inputs.broker_addresses]\n'10.0.0.13:99999' = 3\n[output]\nroot='/o'",
     "'10.0.0.13:99999' is not an address (host, host:port or [ipv6]:port)"),
    ("cluster = 'c'\n[inputs.broker_addresses]\n'3' = 3\n[output]\nroot='/o'", "'3' is a node id, not an address"),
    ("cluster = 'c'\n[inputs.broker_addresses]\n'a:1' = 1\n'A:1' = 2\n[output]\nroot='/o'",
     "same address (a:1) with different node ids"),
    ("cluster = 'c'", "no output location"),
    ("cluster = 'c'\n[output]\ncatalog = 'k'", "'schema' is required"),
    ("cluster = 'c'\n[output]\nschema = 's'", "'catalog' is required"),
    ("cluster = 'c'\n[output]\nroot='/o'\ncatalog='k'\nschema='s'", "not both"),
    ("cluster = 'c'\n[output]\ncatalog='k-1'\nschema='s'", "not a plain identifier"),
    ("cluster = 'c'\n[output]\nroot='/o'\nbackend='spark'", "unknown back end 'spark'"),
    ("cluster = 'c'\n[output]\ncatalog='k'\nschema='s'\nbackend='delta-rs'", "cannot write catalog"),
    ("cluster = 'c'\n[output]\nroot='/o'\n[rules]\nlookback_days = -1", "'rules.lookback_days' must not be negative"),
    ("cluster = 'c'\n[output]\nroot='/o'\n[rules]\nstale_grace_ms = 1.5", "'rules.stale_grace_ms' must be an integer"),
    ("cluster = 'c'\n[output]\nroot='/o'\n[rules]\nlookback_days = true", "must be an integer, got boolean"),
    ("cluster = 'c'\n[output]\nroot='/data/audit%41'", "output.root /data/audit%41: a local path with a %-escape (%41)"),
    ("cluster = 'c'\n[output]\nroot='file:///data/audit%41'", "a local path with a %-escape (%41)"),
    ("cluster = 'c'\n[output]\nroot='/o'\n[rules]\nlookback_days = 1000000",
     "'rules.lookback_days' must be at most 36,500, got 1,000,000"),
    ("cluster = 'c'\n[output]\nroot='/o'\n[rules]\ncorrelation_window_minutes = 9223372036854775807",
     "'rules.correlation_window_minutes' must be at most 525,600"),
    ("cluster = 'c'\nreports = ['stale_metadata', 'nope']\n[output]\nroot='/o'", "unknown report 'nope'"),
    ("cluster = 'c'\nreports = []\n[output]\nroot='/o'", "at least one report"),
    ("cluster = 'c'\nreports = 'stale_metadata'\n[output]\nroot='/o'", "'reports' must be an array"),
    ("cluster = 'c'\ninputs = 'x'\n[output]\nroot='/o'", "'inputs' must be a table"),
    ("cluster = 'c'\n[output]\nroot='/o'\n[spark.conf]\nx = [1]", "'spark.conf.x' must be a string"),
    ("cluster = 'c'\n[output]\nroot='/o'\n[spark]\nmaster = 1", "'spark.master' must be a string"),
    ("cluster = 'c\n", "invalid TOML"),
]


@pytest.mark.parametrize(("text", "message"), BAD, ids=[m for _, m in BAD])
def test_invalid_configs_give_one_line_errors(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    text_of_error = str(info.value)
    assert message in text_of_error
    assert "\n" not in text_of_error
    assert str(path) in text_of_error  # the file is named


def test_unknown_key_error_lists_the_valid_keys(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"valid keys: offsets, logdirs, metadata, broker_ports"):
        load_config(write(tmp_path, "cluster='c'\n[inputs]\noffset='x'\n[output]\nroot='/o'"))


def test_missing_file() -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config("/nonexistent/epoch-audit.toml")


def base_config(tmp_path: Path) -> Config:
    return parse_config({"cluster": "c", "output": {"catalog": "k", "schema": "s"}}, base_dir=tmp_path)


def test_overrides_replace_settings_and_resolve_against_cwd(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = base_config(tmp_path).with_overrides(
        offsets="o", logdirs="s3a://b/l", metadata=tmp_path / "m", output_root="out", cluster="c2",
        reports="fencing_violations, stale_metadata",
    )
    assert cfg.inputs.offsets == str(tmp_path / "o")
    assert cfg.inputs.logdirs == "s3a://b/l"
    assert cfg.inputs.metadata == str(tmp_path / "m")
    assert (cfg.output.root, cfg.output.catalog, cfg.output.schema) == (str(tmp_path / "out"), None, None)
    assert cfg.cluster == "c2"
    assert cfg.reports == ("fencing_violations", "stale_metadata")


def test_overrides_of_none_change_nothing(tmp_path: Path) -> None:
    cfg = base_config(tmp_path)
    assert cfg.with_overrides() == cfg


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"reports": "stale_metadata,bogus"}, "--reports': unknown report 'bogus'"),
        ({"reports": ""}, "at least one report"),
        ({"cluster": "a/b"}, "'--cluster' = 'a/b'"),
        ({"offsets": ""}, "'--offsets' must not be empty"),
    ],
)
def test_bad_overrides(tmp_path: Path, flags: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        base_config(tmp_path).with_overrides(**flags)


def test_parse_date_range() -> None:
    assert parse_date_range("2024-01-01", "2024-01-31") == (dt.date(2024, 1, 1), dt.date(2024, 1, 31))
    assert parse_date_range("2024-02-29") == (dt.date(2024, 2, 29),) * 2
    assert parse_date_range(dt.date(2024, 1, 2), "2024-01-02") == (dt.date(2024, 1, 2),) * 2


@pytest.mark.parametrize(
    ("from_", "to", "message"),
    [
        ("2024-1-1", "2024-01-02", "--from: '2024-1-1' is not a date in the form YYYY-MM-DD"),
        ("2024-01-01", "yesterday", "--to: 'yesterday' is not a date"),
        ("2023-02-29", "2023-03-01", "--from: '2023-02-29' is not a valid date"),
        ("2024-01-02", "2024-01-01", "--from 2024-01-02 is after --to 2024-01-01"),
    ],
)
def test_parse_date_range_errors(from_: str, to: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_date_range(from_, to)


def test_config_from_flags_has_only_what_the_flags_name(tmp_path, monkeypatch) -> None:
    from jobs.config import config_from_flags

    monkeypatch.chdir(tmp_path)
    cfg = config_from_flags(cluster="c1", output_root="out", logdirs="ld")
    assert cfg.inputs.logdirs == str(tmp_path / "ld") and cfg.inputs.offsets is None and cfg.inputs.metadata is None
    assert cfg.output.root == str(tmp_path / "out") and cfg.source is None
    with pytest.raises(ConfigError, match="run without --conf needs --cluster and --output-root"):
        config_from_flags(cluster=None, output_root=None, offsets="x")
    with pytest.raises(ConfigError, match="--cluster"):
        config_from_flags(cluster="bad name", output_root="out")


def test_every_packaged_example_config_loads() -> None:
    from jobs.config import EXAMPLES, example_config_path, load_config

    for name in EXAMPLES:
        assert load_config(example_config_path(name)).cluster
    with pytest.raises(ConfigError, match="unknown example"):
        example_config_path("prod")


def test_cluster_metadata_input_key_and_flag(tmp_path: Path) -> None:
    """``[inputs] cluster_metadata`` resolves like the other inputs; ``--cluster-metadata`` overrides it."""
    from jobs.config import config_from_flags, parse_config

    cfg = parse_config({"cluster": "c", "inputs": {"cluster_metadata": "cm"}, "output": {"root": "out"}},
                       base_dir=tmp_path)
    assert cfg.inputs.cluster_metadata == str(tmp_path / "cm")
    assert cfg.with_overrides(cluster_metadata="/data/cm").inputs.cluster_metadata == "/data/cm"
    assert parse_config({"cluster": "c", "output": {"root": "out"}}).inputs.cluster_metadata is None
    flags = config_from_flags(cluster="c", output_root=str(tmp_path / "o"), cluster_metadata=str(tmp_path / "cm"))
    assert flags.inputs.cluster_metadata == str(tmp_path / "cm") and flags.inputs.offsets is None


@pytest.mark.parametrize("master", ["local[x]", "local[0]", "local[2", "localhost", "local[1,x]", "local-cluster[2]"])
def test_a_malformed_local_master_is_refused_before_any_jvm(tmp_path: Path, master: str) -> None:
    """Spark refused these only once its JVM was up: ~20 lines of Java stack trace, then a line without the cause."""
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, f"cluster='c'\n[output]\nroot='/o'\n[spark]\nmaster='{master}'"))
    assert f"[spark] master {master!r} is not a Spark master" in str(info.value) and "local[N]" in str(info.value)


@pytest.mark.parametrize("master", ["local", "local[4]", "local[*]", "local[2,3]", "local[*, 4]",
                                    "local-cluster[2, 1, 1024]", "yarn", "spark://h:7077", "k8s://https://h"])
def test_every_master_spark_accepts_is_accepted(tmp_path: Path, master: str) -> None:
    conf = load_config(write(tmp_path, f"cluster='c'\n[output]\nroot='/o'\n[spark]\nmaster='{master}'"))
    assert conf.spark.master == master


def test_a_config_saved_with_a_utf8_bom_loads(tmp_path: Path) -> None:
    """Notepad and PowerShell save one: it was "Invalid statement (at line 1, column 1)"."""
    path = tmp_path / "c.toml"
    path.write_bytes(b"\xef\xbb\xbfcluster = 'demo'\n[output]\nroot = '/o'\n")
    assert load_config(path).cluster == "demo"


def test_a_config_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_bytes(b"cluster = 'd\xe9mo'\n")  # Latin-1: was an "unexpected failure", exit 1
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        load_config(path)
