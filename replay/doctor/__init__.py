"""`stepscope doctor`: scheduling pathologies found in a trace, measured, shown by a query,
and cured by a knob change a what-if replay checked."""

from .detectors import KINDS
from .diagnose import Diagnosis, diagnose
from .finding import Finding, Severity, WhatIf
from .report import SEVERITY_STYLES, diagnosis_to_markdown, print_diagnosis

__all__ = [
    "KINDS",
    "SEVERITY_STYLES",
    "Diagnosis",
    "Finding",
    "Severity",
    "WhatIf",
    "diagnose",
    "diagnosis_to_markdown",
    "print_diagnosis",
]
