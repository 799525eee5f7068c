"""`lora_gate_stall`: requests the waiting pass passes over because their adapter would
exceed `max_loras` (the adapters running already fill the slots)."""

from __future__ import annotations

from .candidates import more_loras
from .examined import Examined
from .finding import SHOWN_REQUESTS, Finding, Severity, span

KIND = "lora_gate_stall"

GATED_STEPS = 10
"""Steps one request must be held at the gate: a few is an adapter's requests finishing
their decode, the gate working as meant."""

CRITICAL_STEPS = 100


def lora_gate_stall(examined: Examined) -> list[Finding]:
    gated = [row for row in examined.rows("doctor_lora_gate") if row["num_steps"] >= GATED_STEPS]
    if not gated:
        return []
    worst = gated[0]
    adapters = sorted({row["lora_id"] for row in gated})
    summary = (
        f"{len(gated)} request(s) of adapter(s) {', '.join(f'lora{a}' for a in adapters)} held "
        f"at the max_loras={examined.config.max_loras} gate for {GATED_STEPS}+ steps "
        f"({worst['request_id']}: {worst['num_steps']})"
    )
    return [
        Finding(
            kind=KIND,
            severity=Severity.by(worst["num_steps"], CRITICAL_STEPS),
            summary=summary,
            steps=span(gated),
            requests=tuple(row["request_id"] for row in gated[:SHOWN_REQUESTS]),
            cost={"request_steps_gated": sum(r["num_steps"] for r in gated),
                  "num_requests": len(gated), "max_steps_gated": worst["num_steps"]},
            evidence=examined.evidence(KIND),
            candidates=more_loras(examined.config),
            target="ttft_mean_steps",
        )
    ]  # fmt: skip
