"""Every kind's detector, and the kinds in the order they are documented and reported."""

from __future__ import annotations

from collections.abc import Callable

from .admission_stall import admission_stall
from .budget_underuse import budget_underuse
from .examined import Examined
from .finding import Finding
from .head_of_line import head_of_line_blocking
from .lora_gate_stall import lora_gate_stall
from .preemption_thrash import preemption_thrash
from .prefix_cache_thrash import prefix_cache_thrash
from .priority_inversion import priority_inversion
from .spec_decode_waste import spec_decode_waste
from .starvation import starvation

DETECTORS: tuple[Callable[[Examined], list[Finding]], ...] = (
    preemption_thrash,
    head_of_line_blocking,
    starvation,
    admission_stall,
    priority_inversion,
    prefix_cache_thrash,
    spec_decode_waste,
    lora_gate_stall,
    budget_underuse,
)
"""Each kind's detector, in the order its kind is documented: causes first, then
`budget_underuse`, which is often the cost of one of them."""

KINDS = tuple(detector.__name__ for detector in DETECTORS)
