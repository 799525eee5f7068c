"""Runs statements, then queries, in a local Spark session; run in the Spark venv.

Usage: spark_driver.py JOB.json RESULT.json. The job holds `statements` (run in order;
one that fails is noted and the rest go on) and `queries` (name → SQL). The result holds
each failed statement's first line of error, and each query's rows (lists of plain
values) or error.
"""

from __future__ import annotations

import json
import sys
import tempfile
from typing import Any


def main(job_path: str, result_path: str) -> None:
    from pyspark.sql import SparkSession

    with open(job_path, encoding="utf-8") as file:
        job = json.load(file)
    warehouse = tempfile.mkdtemp(prefix="stepscope-spark-")
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("stepscope-views")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.warehouse.dir", warehouse)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("OFF")
    failed = {}
    for statement in job["statements"]:
        try:
            spark.sql(statement)
        except Exception as error:
            failed[statement[:120]] = _first_line(error)
    results = {}
    for name, query in job["queries"].items():
        try:
            rows = spark.sql(query).collect()
            results[name] = {"rows": [[_plain(v) for v in row] for row in rows]}
        except Exception as error:
            results[name] = {"error": _first_line(error)}
    spark.stop()
    with open(result_path, "w", encoding="utf-8") as file:
        json.dump({"failed_statements": failed, "results": results}, file)


def _plain(value: Any) -> Any:
    if hasattr(value, "asDict"):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
