"""Exporters: a trace as a Perfetto timeline, or as Parquet files that other engines query."""

from .output import ExportError
from .parquet import ParquetExport, export_parquet
from .perfetto import PerfettoExport, export_perfetto

__all__ = ["ExportError", "ParquetExport", "PerfettoExport", "export_parquet", "export_perfetto"]
