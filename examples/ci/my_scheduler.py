"""A scheduler change to check in CI: admit waiting requests even in a step that preempted.

vLLM's anti-thrash rule stops all admission in a step that preempted anybody. This
variant drops the rule. `stepscope check` shows at which step each baseline first
decides differently, and what it does to preemptions and time to first token.
"""

from __future__ import annotations

from stepscope.engine import Scheduler
from stepscope.engine.step_plan import StepPlan


class AdmitAfterPreemption(Scheduler):
    def _may_admit(self, plan: StepPlan) -> bool:
        return True
