"""A run's status from its sources: what a scheduler alerts on (no silent success on missing data)."""

from __future__ import annotations

import datetime as dt

from jobs.runlog import SourceCounts, run_status, source_status

D1, D2, D3 = dt.date(2024, 3, 1), dt.date(2024, 3, 2), dt.date(2024, 3, 3)


def test_source_status_each_case() -> None:
    good = [SourceCounts("offsets", "batch", 10, 0, 100)]
    assert source_status("offsets", good, [D1, D2], (D1, D2)).status == "ok"
    nothing = source_status("offsets", [SourceCounts("offsets", "file", 0, 0, 0)], [], (D1, D1))
    assert (nothing.status, nothing.reason) == ("no_input", "configured but no input units found")
    junk = source_status("metadata", [SourceCounts("metadata", "file", 0, 11, 0)], [], (D1, D1))
    assert junk.status == "no_input" and junk.units_quarantined == 11 and "none decoded" in junk.reason
    some_bad = source_status("offsets", [SourceCounts("offsets", "batch", 9, 1, 90)], [D1], (D1, D1))
    assert some_bad.status == "partial" and some_bad.reason == "1 of 10 units quarantined"
    gap = source_status("logdirs", [SourceCounts("logdirs", "file", 4, 0, 4)], [D1, D3], (D1, D3))
    assert gap.status == "partial" and gap.days_without_input == (D2,) and "2024-03-02" in gap.reason
    out_of_range = source_status("offsets", good, [], (D1, D2))  # decoded, but not a row in the range
    assert out_of_range.status == "no_input" and out_of_range.days_without_input == (D1, D2)


def test_run_status_is_the_worst_that_matters() -> None:
    ok = source_status("offsets", [SourceCounts("offsets", "batch", 1, 0, 1)], [D1], (D1, D1))
    none = source_status("metadata", [SourceCounts("metadata", "file", 0, 0, 0)], [], (D1, D1))
    assert run_status([ok]) == "ok"
    assert run_status([ok, none]) == "partial"
    assert run_status([none]) == "no_input" and run_status([]) == "no_input"
    assert run_status([ok], failed=True) == "failed"


def test_a_metadata_log_alone_does_not_make_a_night_without_daily_input_a_success() -> None:
    """Its old files decode every night: with every daily source no_input the run is no_input (it was partial)."""
    log = source_status("cluster_metadata", [SourceCounts("cluster_metadata", "batch", 40, 0, 400)], [], (D1, D1))
    none = source_status("offsets", [SourceCounts("offsets", "batch", 5, 0, 50)], [], (D1, D1))
    assert log.status == "ok" and none.status == "no_input"
    assert run_status([none, log]) == "no_input"
    ok = source_status("offsets", [SourceCounts("offsets", "batch", 1, 0, 1)], [D1], (D1, D1))
    assert run_status([ok, log]) == "ok" and run_status([log]) == "ok"  # a copy alone is judged by itself


def test_a_source_without_units_that_kept_earlier_rows_says_so_and_covers_those_days() -> None:
    nothing = [SourceCounts("offsets", "file", 0, 0, 0)]
    kept = source_status("offsets", nothing, [D1], (D1, D2), kept={D1: 4642, D2: 0})
    assert (kept.status, kept.rows_kept, kept.days_without_input) == ("no_input", 4642, (D2,))
    assert kept.reason == "no input units; kept the 4,642 rows earlier runs stored for 2024-03-01"
    # the bad units it kept with them, and inputs read with zero units, are said too
    bad = source_status("offsets", nothing, [D1], (D1, D2), kept={D1: 4642}, quarantine_kept=2, empty="3 empty files")
    assert (bad.reason, bad.quarantine_kept) == ("no input units (3 empty files); kept the 4,642 rows earlier runs "
                                                 "stored for 2024-03-01, and their 2 quarantined units (the quarantine "
                                                 "table)", 2)
    only_bad = source_status("logdirs", nothing, [], (D1, D1), kept={}, quarantine_kept=1)
    assert only_bad.reason == ("no input units; kept the 1 quarantined unit earlier runs stored for the range (the "
                               "quarantine table)")
    empty = source_status("offsets", nothing, [], (D1, D1), empty="1 empty file")
    assert empty.reason == "configured but no input units found (1 empty file)"


def test_the_metadata_log_is_judged_by_its_units_not_by_rows_per_day() -> None:
    """A quiet day has no partition_history rows: that is no missing input for the metadata log."""
    quiet = [SourceCounts("cluster_metadata", "batch", 40, 0, 400), SourceCounts("cluster_metadata", "record", 12, 0, 3)]
    ok = source_status("cluster_metadata", quiet, [], (D1, D3))
    assert (ok.status, ok.days_without_input, ok.reason) == ("ok", (), "")
    torn = [SourceCounts("cluster_metadata", "batch", 39, 1, 390), SourceCounts("cluster_metadata", "record", 12, 0, 3)]
    bad = source_status("cluster_metadata", torn, [D1], (D1, D3))
    assert (bad.status, bad.reason) == ("partial", "1 of 52 units quarantined")
    gone = source_status("cluster_metadata", [SourceCounts("cluster_metadata", "file", 0, 0, 0)], [], (D1, D1))
    assert (gone.status, gone.reason) == ("no_input", "configured but no input units found")
    junk = source_status("cluster_metadata", [SourceCounts("cluster_metadata", "batch", 0, 3, 0)], [], (D1, D1))
    assert junk.status == "no_input" and "none decoded" in junk.reason


def test_the_reasons_count_units_in_english() -> None:
    """The summary said "1363 batchs, 4671 records decoded" and "1 files read"."""
    counts = [SourceCounts("logdirs", "batch", 1363, 0, 0), SourceCounts("logdirs", "record", 4671, 0, 0)]
    assert source_status("logdirs", counts, [], (D1, D1)).reason == (
        "1,363 batches, 4,671 records decoded, but no rows in the range")
    one = source_status("offsets", [SourceCounts("offsets", "file", 0, 1, 0)], [], (D1, D1))
    assert one.reason == "1 file read, none decoded (1 quarantined)"
