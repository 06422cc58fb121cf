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
#      it or a mirror). Without --delta the tables are committed by delta-rs (no Maven needed).
#
# spark-submit: $SPARK_SUBMIT, else `spark-submit` on PATH, else the one inside the pyspark wheel of $PYTHON.
# Python: $PYTHON, else the active virtualenv's python, else python3. Only our code is shipped: the
# executors' Python needs the pure-Python dependencies (pyarrow, numpy, cramjam, crc32c, dpkt) installed,
# or ship an environment with `-- --archives env.tar.gz#env` and PYSPARK_PYTHON=./env/bin/python.
# For local masters (the default, or --master local[...]) PYSPARK_PYTHON defaults to $PYTHON.
#
# Exit codes: those of `epoch-audit run` (0 ok, 2 bad configuration/dates, 3 unreadable input, 4 table
# write failed, 1 bug), and 2 for bad usage of this script.
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
  --dry-run             print the spark-submit command instead of running it
  -h, --help            this help

Everything after -- is passed to spark-submit, e.g. -- --master yarn --num-executors 20
Environment: PYTHON, SPARK_SUBMIT, PYSPARK_PYTHON, DELTA_VERSION.
EOF
}

conf="" date_from="" date_to="" reports="" reports_only=0 delta=0 delta_version="${DELTA_VERSION:-}" dry_run=0
passthrough=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --conf) [[ $# -ge 2 ]] || die "--conf needs a FILE"; conf="$2"; shift 2 ;;
    --conf=*) conf="${1#*=}"; shift ;;
    --from) [[ $# -ge 2 ]] || die "--from needs a date (YYYY-MM-DD)"; date_from="$2"; shift 2 ;;
    --from=*) date_from="${1#*=}"; shift ;;
    --to) [[ $# -ge 2 ]] || die "--to needs a date (YYYY-MM-DD)"; date_to="$2"; shift 2 ;;
    --to=*) date_to="${1#*=}"; shift ;;
    --reports) [[ $# -ge 2 ]] || die "--reports needs a list"; reports="$2"; shift 2 ;;
    --reports=*) reports="${1#*=}"; shift ;;
    --reports-only) reports_only=1; shift ;;
    --delta) delta=1; shift ;;
    --delta-version) [[ $# -ge 2 ]] || die "--delta-version needs a version"; delta_version="$2"; shift 2 ;;
    --delta-version=*) delta_version="${1#*=}"; shift ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; passthrough=("$@"); break ;;
    *) die "unknown option '$1' (spark-submit options go after --; see --help)" ;;
  esac
done

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

[[ -n "$conf" ]] || die "--conf FILE is required (an epoch-audit TOML config; see conf/nightly.example.toml)"
[[ -f "$conf" ]] || die "config file not found: $conf"
[[ -r "$conf" ]] || die "config file not readable: $conf"
conf="$(cd "$(dirname "$conf")" && pwd)/$(basename "$conf")"

# Where our packages are: this checkout, else wherever the installed package lives.
if [[ -d "$here/jobs" && -d "$here/epochlib" ]]; then
  src="$here"
else
  src="$("$PYTHON" -c 'import jobs, os; print(os.path.dirname(os.path.dirname(os.path.abspath(jobs.__file__))))' \
    2>/dev/null)" || die "cannot find the epoch-audit code (jobs, epochlib): run from a checkout or install it"
fi

# Check the config now (one line, before a JVM starts), with the same parser the job uses.
if ! err="$(PYTHONPATH="$src${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" - "$conf" 2>&1 <<'EOF'
import sys

from jobs.config import load_config
from jobs.errors import ConfigError

try:
    load_config(sys.argv[1])
except ConfigError as exc:
    sys.exit(f"bad config: {exc}")
EOF
)"; then
  die "$(printf '%s' "$err" | tail -n 1)"
fi

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
if [[ -z "$master" || "$master" == local* ]]; then
  export PYSPARK_PYTHON="${PYSPARK_PYTHON:-$PYTHON}"
  export PYSPARK_DRIVER_PYTHON="${PYSPARK_DRIVER_PYTHON:-$PYTHON}"
fi

delta_args=()
if [[ $delta -eq 1 ]]; then
  if [[ -z "$delta_version" ]]; then
    # The installed delta-spark package pins a compatible pyspark; else a known Spark -> Delta pairing.
    delta_version="$("$PYTHON" - <<'EOF'
import importlib.metadata as md

try:
    print(md.version("delta-spark"))
except md.PackageNotFoundError:
    spark = ".".join(md.version("pyspark").split(".")[:2])
    print({"4.0": "4.0.1"}.get(spark, ""))
EOF
)" || true
    [[ -n "$delta_version" ]] || die "--delta: no known Delta release for the installed pyspark \
($("$PYTHON" -c 'import pyspark; print(pyspark.__version__)' 2>/dev/null || echo '?')); \
pass --delta-version (see Delta Lake's Spark compatibility table) or pip install the matching delta-spark"
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

# ---------------------------------------------------------------------------------- code zip and driver
work="$(mktemp -d "${TMPDIR:-/tmp}/epoch-audit-submit.XXXXXX")"
trap 'rm -rf "$work"' EXIT
"$PYTHON" - "$src" "$work/epoch_audit.zip" <<'EOF'
import os
import sys
import zipfile

src, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
    for package in ("epochlib", "jobs"):
        for root, dirs, files in os.walk(os.path.join(src, package)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
            for name in sorted(files):
                if name.endswith((".py", ".pyi", ".toml", ".json", ".typed")):
                    path = os.path.join(root, name)
                    zf.write(path, os.path.relpath(path, src))
EOF
cat >"$work/epoch_audit_driver.py" <<'EOF'
"""spark-submit driver of epoch-audit, written by spark-submit.sh: runs `epoch-audit run ARGS`."""
import sys

from jobs.cli import main

sys.argv = ["epoch-audit", "run", *sys.argv[1:]]
main()  # the console-script entry: exits with the command's code
EOF

job_args=(--conf "$conf" --from "$date_from" --to "$date_to")
[[ -n "$reports" ]] && job_args+=(--reports "$reports")
[[ $reports_only -eq 1 ]] && job_args+=(--reports-only)

cmd=("$submit" --name "epoch-audit $date_from..$date_to" --py-files "$work/epoch_audit.zip"
  "${delta_args[@]}" "${passthrough[@]}" "$work/epoch_audit_driver.py" "${job_args[@]}")

printf '%s: auditing %s .. %s with %s\n' "$prog" "$date_from" "$date_to" "$conf" >&2
if [[ $dry_run -eq 1 ]]; then
  printf '%q ' "${cmd[@]}"
  printf '\n'
  exit 0
fi
status=0
"${cmd[@]}" || status=$?
exit "$status"
