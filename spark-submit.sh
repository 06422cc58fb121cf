#!/usr/bin/env bash
# epoch-audit nightly entry: audit "yesterday" (UTC), or a given range, with spark-submit.
#
#   ./spark-submit.sh --conf conf/prod.toml                          # yesterday, UTC
#   ./spark-submit.sh --conf conf/prod.toml --from 2024-05-01 --to 2024-05-07
#   ./spark-submit.sh --conf conf/prod.toml --delta -- --master yarn --num-executors 20
#
# What it does:
#   1. validates the dates and the config (one-line error, exit 2, before any JVM starts);
#   2. zips our code (epochlib + jobs) into a temporary folder and passes it with --py-files, so the
#      executors import the same code as the driver;
#   3. writes a tiny driver script that runs `epoch-audit run --conf FILE --from D --to D` (jobs.cli) and
#      submits it; everything after `--` goes to spark-submit itself (--master, --num-executors, --conf k=v …);
#   4. with --delta, adds --packages io.delta:delta-spark_<scala>:<version> and the two Delta SQL settings
#      so Spark's own Delta source writes the tables (this downloads from Maven: the cluster needs access to
#      it or a mirror). Without --delta the tables are committed by delta-rs (no Maven needed). The Delta
#      release is the installed delta-spark package's, else the one matching the installed pyspark
#      (pyspark 4.0.0 -> 4.0.1; 4.0.1-4.2 -> 4.4.1); a pyspark no release supports is refused (exit 2);
#   5. passes jobs/log4j2.properties (Spark at WARN; the job's progress lines are unaffected) to the
#      driver and executors (EPOCH_AUDIT_LOG4J=FILE uses another), so stderr holds progress and errors.
#
# spark-submit: $SPARK_SUBMIT, else `spark-submit` on PATH, else the one inside the pyspark wheel of $PYTHON.
# Python: $PYTHON, else the active virtualenv's python, else python3. Only our code is shipped: the
# executors' Python needs the pure-Python dependencies (pyarrow, numpy, cramjam, crc32c, dpkt) installed,
# or ship an environment with `-- --archives env.tar.gz#env` and PYSPARK_PYTHON=./env/bin/python.
# For local masters (the default, or --master local[...]) PYSPARK_PYTHON defaults to $PYTHON.
#
# Exit codes: those of `epoch-audit run` (0 ok, 1 bug, 2 bad configuration/dates, 3 unreadable input,
# 4 table write failed, 5 findings at/above --fail-on, 6 a configured input yielded nothing with
# --fail-on-no-input, 7 another run of the cluster holds the output root's run lease), and 2 for bad usage of
# this script.
set -euo pipefail

prog=spark-submit.sh
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

die() {
  printf '%s: error: %s\n' "$prog" "$*" >&2
  exit 2
}

usage() {
  cat <<EOF
Usage: $prog --conf FILE [--from YYYY-MM-DD] [--to YYYY-MM-DD] [options] [-- SPARK-SUBMIT OPTIONS...]

Audit a UTC date range (default: yesterday) with spark-submit.

Options:
  --conf FILE           epoch-audit TOML config (required; see conf/nightly.example.toml)
  --from DATE           first UTC date, inclusive (default: yesterday)
  --to DATE             last UTC date, inclusive (default: --from)
  --reports LIST        comma-separated reports to write (default: the config's)
  --reports-only        skip ingestion; rerun the reports over existing silver tables
  --delta               write with Spark's Delta source: adds --packages io.delta:delta-spark and the
                        Delta SQL extension/catalog settings (needs Maven access)
  --delta-version V     Delta release for --delta (default: the installed delta-spark package's version,
                        else the release matching the installed pyspark when known)
  --fail-on SEVERITY    exit 5 when findings at or above SEVERITY (warning, error, critical) exist
  --fail-on-no-input    exit 6 when a configured input yields nothing (no units, nothing decoded, or
                        days of the range without data, or kept from earlier runs)
  --summary-json PATH   also write the run's summary as JSON (for alerting)
  --metrics-file PATH   also write Prometheus text-format metrics (node_exporter textfile collector)
  --work-dir DIR        where the code zip and driver script go (default: a temporary folder removed at
                        exit; with --dry-run: \${XDG_CACHE_HOME:-~/.cache}/epoch-audit/submit, kept, so
                        the printed command can be run as printed)
  --dry-run             print the spark-submit command instead of running it
  -h, --help            this help

Everything after -- is passed to spark-submit, e.g. -- --master yarn --num-executors 20
Environment: PYTHON, SPARK_SUBMIT, PYSPARK_PYTHON, DELTA_VERSION.
Exit codes as \`epoch-audit run --help\`; 7 (before any JVM starts): another live run of the cluster
holds the output root's run lease.
EOF
}

conf="" date_from="" date_to="" reports="" reports_only=0 delta=0 delta_version="${DELTA_VERSION:-}" dry_run=0
fail_on="" fail_on_no_input=0 summary_json="" metrics_file="" work_dir=""
passthrough=()

# value FLAG WHAT ARGS...: the value of a flag that takes one; a missing value or one that looks like an
# option (`--conf --from`, `--conf -x.toml`) is a usage error, exit 2, like any other bad flag.
value() {
  local flag="$1" what="$2"
  [[ $# -ge 3 ]] || die "$flag needs $what"
  [[ "$3" != -* ]] || die "$flag needs $what, got '$3' (an option?)"
  printf '%s' "$3"
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --conf) conf="$(value --conf "a FILE" "${@:2:1}")"; shift 2 ;;
    --conf=*) conf="$(value --conf "a FILE" "${1#*=}")"; shift ;;
    --from) date_from="$(value --from "a date (YYYY-MM-DD)" "${@:2:1}")"; shift 2 ;;
    --from=*) date_from="${1#*=}"; shift ;;
    --to) date_to="$(value --to "a date (YYYY-MM-DD)" "${@:2:1}")"; shift 2 ;;
    --to=*) date_to="${1#*=}"; shift ;;
    --reports) reports="$(value --reports "a list" "${@:2:1}")"; shift 2 ;;
    --reports=*) reports="${1#*=}"; shift ;;
    --reports-only) reports_only=1; shift ;;
    --delta) delta=1; shift ;;
    --delta-version) delta_version="$(value --delta-version "a version" "${@:2:1}")"; shift 2 ;;
    --delta-version=*) delta_version="${1#*=}"; shift ;;
    --fail-on) fail_on="$(value --fail-on "a severity (warning, error, critical)" "${@:2:1}")"; shift 2 ;;
    --fail-on=*) fail_on="${1#*=}"; shift ;;
    --fail-on-no-input) fail_on_no_input=1; shift ;;
    --summary-json) summary_json="$(value --summary-json "a PATH" "${@:2:1}")"; shift 2 ;;
    --summary-json=*) summary_json="${1#*=}"; shift ;;
    --metrics-file) metrics_file="$(value --metrics-file "a PATH" "${@:2:1}")"; shift 2 ;;
    --metrics-file=*) metrics_file="${1#*=}"; shift ;;
    --work-dir) work_dir="$(value --work-dir "a DIR" "${@:2:1}")"; shift 2 ;;
    --work-dir=*) work_dir="${1#*=}"; shift ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; passthrough=("$@"); break ;;
    *) die "unknown option '$1' (spark-submit options go after --; see --help)" ;;
  esac
done

# the values `epoch-audit run --fail-on` accepts (jobs.cli.SEVERITY_CHOICES): refused here, not by the job later
[[ -z "$fail_on" || "$fail_on" =~ ^(warning|error|critical)$ ]] || die "--fail-on: '$fail_on' is not one of warning, error, critical"

# ---------------------------------------------------------------------------------------------- python
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -n "${VIRTUAL_ENV:-}" && -x "$VIRTUAL_ENV/bin/python" ]]; then
    PYTHON="$VIRTUAL_ENV/bin/python"
  elif [[ -x "$here/.venv/bin/python" ]]; then
    PYTHON="$here/.venv/bin/python"
  else
    PYTHON="$(command -v python3 || true)"
  fi
fi
if [[ -z "$PYTHON" ]] || ! command -v "$PYTHON" >/dev/null 2>&1; then
  die "no Python found: set PYTHON=/path/to/python"
fi

# ----------------------------------------------------------------------------------------- dates, config
# Validated by Python (portable: no GNU date needed); prints "FROM TO" or one error line.
range="$("$PYTHON" - "$date_from" "$date_to" 2>&1 <<'EOF'
import datetime as dt
import re
import sys

def day(flag, text):
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        sys.exit(f"{flag}: {text!r} is not a date in the form YYYY-MM-DD")
    try:
        return dt.date.fromisoformat(text)
    except ValueError as exc:
        sys.exit(f"{flag}: {text!r} is not a valid date ({exc})")

raw_from, raw_to = sys.argv[1], sys.argv[2]
yesterday = dt.datetime.now(dt.timezone.utc).date() - dt.timedelta(days=1)
start = day("--from", raw_from) if raw_from else (day("--to", raw_to) if raw_to else yesterday)
end = day("--to", raw_to) if raw_to else start
if start > end:
    sys.exit(f"--from {start} is after --to {end}")
print(start, end)
EOF
)" || die "$(printf '%s' "$range" | tail -n 1)"
read -r date_from date_to <<<"$range"

# Where our packages are: this checkout, else wherever the installed package lives.
if [[ -d "$here/jobs" && -d "$here/epochlib" ]]; then
  src="$here"
else
  src="$("$PYTHON" -c 'import jobs, os; print(os.path.dirname(os.path.dirname(os.path.abspath(jobs.__file__))))' \
    2>/dev/null)" || die "cannot find the epoch-audit code (jobs, epochlib): run from a checkout or install it"
fi

# A config that fails its check fails the run: its --summary-json/--metrics-file say so (status failed, exit 2), as
# `epoch-audit run` writes them for a config it cannot load: an alert on the failed status fires, and last night's
# files do not stand. Then the one-line error.
# run_failed CODE MESSAGE: the same for another failure before the job (exit CODE).
run_failed() {
  local code="$1"
  shift
  if [[ -n "$summary_json$metrics_file" ]]; then
    PYTHONPATH="$src${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" - "$conf" "$date_from" "$date_to" "$summary_json" \
      "$metrics_file" "$*" "$code" >/dev/null 2>&1 <<'EOF' || true
import datetime as dt
import sys
from types import SimpleNamespace

from jobs.cli import _cluster_of, _write_outputs

conf, start, end, summary_json, metrics_file, error, code = sys.argv[1:8]
_write_outputs(SimpleNamespace(cluster=_cluster_of(conf)), dt.date.fromisoformat(start), dt.date.fromisoformat(end),
               summary_json or None, metrics_file or None, status="failed", summary=None, duration_s=0.0,
               error=error, exit_code=int(code))
EOF
  fi
  printf '%s: error: %s\n' "$prog" "$*" >&2
  exit "$code"
}
config_failed() {
  run_failed 2 "$@"
}

[[ -n "$conf" ]] || config_failed "--conf FILE is required (an epoch-audit TOML config; see conf/nightly.example.toml)"
[[ -f "$conf" ]] || config_failed "config file not found: $conf"
[[ -r "$conf" ]] || config_failed "config file not readable: $conf"
conf="$(cd "$(dirname "$conf")" && pwd)/$(basename "$conf")"

# Check the config now (one line, before a JVM starts), with the same parser the job uses; it also names
# the driver JVM flags for the size of the config's local inputs (jobs.session.java_options_for_input).
# A live run of the cluster holding the output root's run lease (jobs.sink.check_run_lease) is refused here too,
# exit 7 (not for --dry-run, which runs nothing); the job itself then takes the lease.
rc=0
err="$(PYTHONPATH="$src${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" - "$conf" "$dry_run" 2>&1 <<'EOF'
import sys

from jobs.config import load_config
from jobs.errors import ConfigError, RunLeaseHeld

try:
    config = load_config(sys.argv[1])
except ConfigError as exc:
    sys.exit(f"bad config: {exc}")
if sys.argv[2] != "1":
    try:
        from jobs.sink import check_run_lease

        check_run_lease(config)
    except RunLeaseHeld as exc:
        print(exc)
        sys.exit(7)
    except Exception:  # the lease cannot be read from here: the job takes it, and says what is wrong
        pass
try:  # the size probe never fails the check: unknown means the flags of an input of unknown size
    from jobs.session import java_options_for_input, local_input_size

    print(f"java-options:{java_options_for_input(local_input_size(config))}")
except Exception:
    pass
try:  # the class-data archive a CLI run made (jobs.class_cache), for a local driver JVM; none: nothing
    from jobs.class_cache import archive_for_session

    archive = archive_for_session("use")
    if archive is not None:
        print(f"class-data:{archive.java_options}")
except Exception:
    pass
EOF
)" || rc=$?
if [[ $rc -eq 7 ]]; then
  run_failed 7 "$(printf '%s' "$err" | tail -n 1)"
elif [[ $rc -ne 0 ]]; then
  config_failed "$(printf '%s' "$err" | tail -n 1)"
fi
local_jvm="$(printf '%s\n' "$err" | sed -n 's/^java-options://p' | tail -n 1)"
class_data="$(printf '%s\n' "$err" | sed -n 's/^class-data://p' | tail -n 1)"

# ---------------------------------------------------------------------------------------- spark-submit
if [[ -n "${SPARK_SUBMIT:-}" ]]; then
  submit="$SPARK_SUBMIT"
elif command -v spark-submit >/dev/null 2>&1; then
  submit="$(command -v spark-submit)"
else
  pyspark_dir="$("$PYTHON" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))' 2>/dev/null)" \
    || die "spark-submit not found: put it on PATH, set SPARK_SUBMIT, or install pyspark for $PYTHON"
  submit="$pyspark_dir/bin/spark-submit"
fi
[[ -x "$submit" ]] || die "spark-submit is not executable: $submit"

master=""
for ((i = 0; i < ${#passthrough[@]}; i++)); do
  case "${passthrough[$i]}" in
    --master) master="${passthrough[$((i + 1))]:-}" ;;
    --master=*) master="${passthrough[$i]#*=}" ;;
  esac
done
local_env=()  # what this script adds to the environment (printed by --dry-run)
daemon_args=()
if [[ -z "$master" || "$master" == local* ]]; then
  export PYSPARK_PYTHON="${PYSPARK_PYTHON:-$PYTHON}"
  export PYSPARK_DRIVER_PYTHON="${PYSPARK_DRIVER_PYTHON:-$PYTHON}"
  local_env=("PYSPARK_PYTHON=$PYSPARK_PYTHON" "PYSPARK_DRIVER_PYTHON=$PYSPARK_DRIVER_PYTHON")
  # the Python worker daemon of the CLI's local sessions (jobs.pydaemon: no bundled pyspark copies on the
  # workers' path, young-generation collections between tasks), when the workers' Python has our package;
  # a --conf spark.python.daemon.module after -- wins
  if "$PYSPARK_PYTHON" -c 'import jobs.pydaemon' >/dev/null 2>&1; then
    daemon_args=(--conf "spark.python.daemon.module=jobs.pydaemon")
  fi
fi

delta_args=()
if [[ $delta -eq 1 ]]; then
  if [[ -z "$delta_version" ]]; then
    # The installed delta-spark package pins a compatible pyspark; else the release whose PyPI metadata
    # (Requires-Dist) accepts the installed pyspark: delta-spark 4.0.1 needs pyspark>=4.0.0, 4.4.1
    # pyspark>=4.0.1,<=4.2.0. Prints the version, or one error line and exits 1.
    if ! delta_version="$("$PYTHON" - 2>&1 <<'EOF'
import importlib.metadata as md
import sys

try:
    print(md.version("delta-spark"))
    sys.exit(0)
except md.PackageNotFoundError:
    pass
try:
    pyspark = md.version("pyspark")
except md.PackageNotFoundError:
    sys.exit("--delta: pyspark is not installed for this Python; pass --delta-version")
parts = tuple(int(p) for p in pyspark.split(".")[:3] if p.isdigit())
if parts[:2] == (4, 0) and parts < (4, 0, 1):
    print("4.0.1")
elif (4, 0) <= parts[:2] <= (4, 2):
    print("4.4.1")
else:
    sys.exit(f"--delta: no delta-spark release supports pyspark {pyspark} (delta-spark 4.4.x supports "
             "pyspark 4.0-4.2): install pyspark>=4.0,<4.3 (pip install 'pyspark>=4.2,<4.3'), or pass "
             "--delta-version for a newer Delta release")
EOF
)"; then
      die "$(printf '%s' "$delta_version" | tail -n 1)"
    fi
  fi
  scala="$("$PYTHON" - "$submit" <<'EOF'
import glob
import os
import re
import sys

home = os.environ.get("SPARK_HOME") or os.path.dirname(os.path.dirname(os.path.realpath(sys.argv[1])))
jars = glob.glob(os.path.join(home, "jars", "scala-library-*.jar"))
m = re.search(r"scala-library-(\d+\.\d+)", jars[0]) if jars else None
print(m.group(1) if m else "2.13")
EOF
)"
  delta_args=(--packages "io.delta:delta-spark_${scala}:${delta_version}"
    --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension
    --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog)
fi

# ------------------------------------------------------------------------------------------- logging
log4j="${EPOCH_AUDIT_LOG4J:-$src/jobs/log4j2.properties}"
[[ -f "$log4j" ]] || die "log4j2 configuration not found: $log4j (set EPOCH_AUDIT_LOG4J=FILE)"
log4j="$(cd "$(dirname "$log4j")" && pwd)/$(basename "$log4j")"
# Spark splits extraJavaOptions at spaces: the driver gets the file as a URI (a checkout under "My Projects"
# ran `main class ace.repo.jobs...`), the executors its name, which therefore must have none
[[ "$(basename "$log4j")" != *[[:space:]]* ]] || die "the log4j2 configuration's file name has a space: $log4j (rename it)"
log4j_uri="$("$PYTHON" -c 'import pathlib, sys; print(pathlib.Path(sys.argv[1]).as_uri())' "$log4j")"
# Before the pass-through options: a user's own --conf spark.driver.extraJavaOptions=... wins.
# A local master auditing the inputs also gets the local JVM flags for their size (the throughput collector,
# and C1 only up to jobs.session.SMALL_INPUT_BYTES; not with --reports-only), and any local master the
# class-data archive a CLI run made, when there is one (jobs.class_cache).
driver_jvm="-Dlog4j2.configurationFile=$log4j_uri"
if [[ -n "$local_jvm" && $reports_only -eq 0 && ( -z "$master" || "$master" == local* ) ]]; then
  driver_jvm="$driver_jvm $local_jvm"
fi
if [[ -n "$class_data" && ( -z "$master" || "$master" == local* ) ]]; then
  driver_jvm="$driver_jvm $class_data"
fi
log_args=(--files "$log4j"
  --conf "spark.driver.extraJavaOptions=$driver_jvm"
  --conf "spark.executor.extraJavaOptions=-Dlog4j2.configurationFile=$(basename "$log4j")")

# ---------------------------------------------------------------------------------- code zip and driver
# A dry run prints a command to run later: its files must outlive this script, so they go to a kept folder.
if [[ -z "$work_dir" && $dry_run -eq 1 ]]; then
  work_dir="${XDG_CACHE_HOME:-$HOME/.cache}/epoch-audit/submit"
fi
if [[ -n "$work_dir" ]]; then
  mkdir -p "$work_dir" || die "cannot create --work-dir $work_dir"
  work="$(cd "$work_dir" && pwd)"
else
  work="$(mktemp -d "${TMPDIR:-/tmp}/epoch-audit-submit.XXXXXX")"
fi
# The Python driver (the JVM's child) writes its pid here: a signal to this script reaches it (the JVM alone would
# leave it to fail on a dead gateway), and a temporary work folder goes only after it ended (up to 60 s: a signal
# ends the JVM at once, while the driver still records the failed run importing from the zip)
export EPOCH_AUDIT_DRIVER_PID_FILE="$work/driver.$$.pid"
driver_pid() {
  local pid=""
  [[ -f "$EPOCH_AUDIT_DRIVER_PID_FILE" ]] && pid="$(<"$EPOCH_AUDIT_DRIVER_PID_FILE")"
  [[ "$pid" =~ ^[0-9]+$ ]] && printf '%s' "$pid"
}
remove_work() {
  local pid i
  pid="$(driver_pid)"
  if [[ -n "$pid" ]]; then
    for ((i = 0; i < 600; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  if [[ -z "$work_dir" ]]; then rm -rf "$work"; else rm -f "$EPOCH_AUDIT_DRIVER_PID_FILE"; fi
}
[[ $dry_run -eq 1 ]] || trap remove_work EXIT
"$PYTHON" - "$src" "$work/epoch_audit.zip" <<'EOF'
import os
import sys
import zipfile

src, out = sys.argv[1], sys.argv[2]
tmp = f"{out}.{os.getpid()}.tmp"  # then renamed: a run reading a kept --work-dir never sees half a zip
with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
    for package in ("epochlib", "jobs"):
        for root, dirs, files in os.walk(os.path.join(src, package)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
            for name in sorted(files):
                if name.endswith((".py", ".pyi", ".toml", ".json", ".typed", ".properties")):
                    path = os.path.join(root, name)
                    zf.write(path, os.path.relpath(path, src))
os.replace(tmp, out)
EOF
cat >"$work/epoch_audit_driver.py" <<'EOF'
"""spark-submit driver of epoch-audit, written by spark-submit.sh: runs `epoch-audit run ARGS`."""
import os
import sys

# spark-submit merges the Python driver's stderr into its stdout; spark-submit.sh hands us a FIFO that
# leads to its own stderr, so progress and errors stay on stderr and stdout holds only the summary.
_fifo = os.environ.get("EPOCH_AUDIT_STDERR")
if _fifo:
    try:
        _fd = os.open(_fifo, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO when nobody reads: keep the merged stream
        os.set_blocking(_fd, True)
        sys.stderr.flush()
        os.dup2(_fd, 2)
        os.close(_fd)
    except OSError:
        pass

_pid_file = os.environ.get("EPOCH_AUDIT_DRIVER_PID_FILE")
if _pid_file:  # spark-submit.sh removes its code zip only after this process ended (a signal ends the JVM first)
    try:
        with open(_pid_file, "w") as f:
            f.write(str(os.getpid()))
    except OSError:
        pass

from jobs.cli import main  # noqa: E402

sys.argv = ["epoch-audit", "run", *sys.argv[1:]]
main()  # the console-script entry: exits with the command's code
EOF

abspath() { case "$1" in /*) printf '%s' "$1" ;; *) printf '%s/%s' "$PWD" "$1" ;; esac; }
job_args=(--conf "$conf" --from "$date_from" --to "$date_to")
[[ -n "$reports" ]] && job_args+=(--reports "$reports")
[[ $reports_only -eq 1 ]] && job_args+=(--reports-only)
[[ -n "$fail_on" ]] && job_args+=(--fail-on "$fail_on")
[[ $fail_on_no_input -eq 1 ]] && job_args+=(--fail-on-no-input)
[[ -n "$summary_json" ]] && job_args+=(--summary-json "$(abspath "$summary_json")")
[[ -n "$metrics_file" ]] && job_args+=(--metrics-file "$(abspath "$metrics_file")")

cmd=("$submit" --name "epoch-audit $date_from..$date_to" --py-files "$work/epoch_audit.zip"
  "${log_args[@]}" "${delta_args[@]}" "${daemon_args[@]}" "${passthrough[@]}" "$work/epoch_audit_driver.py" "${job_args[@]}")

printf '%s: auditing %s .. %s with %s\n' "$prog" "$date_from" "$date_to" "$conf" >&2
if [[ $dry_run -eq 1 ]]; then
  printf '%s: the code zip and driver stay in %s\n' "$prog" "$work" >&2
  # the environment this script sets for local masters is part of the command (runnable as printed)
  for assignment in "${local_env[@]}"; do
    printf '%s=%q ' "${assignment%%=*}" "${assignment#*=}"
  done
  printf '%q ' "${cmd[@]}"
  printf '\n'
  exit 0
fi
# The driver's stderr reaches ours through a FIFO (spark-submit merges it into stdout otherwise).
if [[ -z "${EPOCH_AUDIT_STDERR:-}" ]] && command -v mkfifo >/dev/null 2>&1; then
  fifo="$work/stderr.$$.fifo"
  if mkfifo "$fifo" 2>/dev/null; then
    cat "$fifo" >&2 &
    reader=$!
    exec 4>"$fifo"  # our own writer end: the reader sees EOF only after the driver and we both closed it
    export EPOCH_AUDIT_STDERR="$fifo"
  fi
fi
# In the background, waited for: a signal to this script (a scheduler's SIGTERM, Ctrl-C) is passed on to the driver
# and the JVM, and the driver records the failed run before the EXIT trap removes the code zip it imports from (it ran
# at once and the driver's --summary-json/--metrics-file were lost). `timeout` and Ctrl-C signal the whole process
# group anyway (the driver takes the same signal again within a second for the same one). A subshell that execs, not
# `cmd &`: bash starts a background command with SIGINT ignored, and a JVM that outlives Ctrl-C hung the driver.
forward() {
  local pid
  pid="$(driver_pid)"
  [[ -n "$pid" ]] && kill -s "$1" "$pid" 2>/dev/null
  kill -s "$1" "$child" 2>/dev/null || true
}
status=0
( exec "${cmd[@]}" ) &
child=$!
trap 'forward TERM' TERM
trap 'forward INT' INT
while :; do
  wait "$child" && status=0 || status=$?
  kill -0 "$child" 2>/dev/null || break  # ended; else a trapped signal interrupted the wait
done
trap - TERM INT
if [[ -n "${reader:-}" ]]; then
  exec 4>&-
  wait "$reader" || true
  rm -f "$fifo"
fi
exit "$status"
