"""jobs: the Spark side of epoch-audit — ingestion, reports, the Delta sink and the CLI."""
