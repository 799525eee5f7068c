"""vLLM's allocation calls, preemptions and waiting-queue skips, recorded as they happen.

`allocate_slots` on vLLM's KV cache manager and the scheduler's `_preempt_request`
are wrapped on the instance (the classes stay untouched), and its
`deferred_waiting` set is swapped for one that reports additions, so every
decision made during `schedule()` lands in the recorder's decision list in call
order, as stepscope's own scheduler reports them. A refused call's numbers
(blocks needed, watermark, free blocks) are worked out from the same state
vLLM's check read. With hybrid KV cache groups the blocks a call needs are counted
by vLLM's coordinator, over every group; the block ids and tables recorded are group 0's,
as stepscope's engine records them.

The running pass's grants, one per running request every step, are not recorded as
decisions, since the output's running rows are those grants in call order. Only in a
step whose running pass is refused (and so preempts) are they listed among the
decisions, in call order, from the refusal on with the grants made before it
(`step_rows.number_decisions` walks such a step).

Where vLLM's running pass can only be refused by preempting (first come, first served,
one full-attention group, no KV connector), it runs on vLLM's own `allocate_slots`, with
no wrapper: the first preemption of a step reads the refused call and the grants before
it from `schedule()`'s frame (`request`, `num_new_tokens`, `scheduled_running_reqs`;
vLLM has changed none of them since the call, nor the pool), and the wrapper is put
back for the rest of the step. The waiting pass gets it back before its first request
(`_handle_blocked_waiting_request` is the first thing it calls for each).

The records the engine thread would make most often, a running grant and an admission call,
are kept raw (a request id, a tuple) and made on the builder thread (`decision_records`):
a frozen record costs the engine thread several times as much to make. The tap's own work
never reaches vLLM as a failure: vLLM's call is made once either way, and a failure stops
the recording (`failed`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

from stepscope.engine.kv_cache_manager import AllocationRefusal, RefusalCheck, cdiv
from stepscope.engine.probe import (
    AdmissionCall,
    Decision,
    Preemption,
    RefusedRunningCall,
    WaitingSkip,
    WaitingSkipReason,
)
from stepscope.engine.request import RunningGrant

from .schedule_facts import LastRefusal


class AllocationTap:
    """Turns one vLLM scheduler's allocation calls and preemptions into decision records."""

    def __init__(
        self,
        scheduler: Any,
        decisions: Callable[[], list[Any]],
        outside_subset: Callable[[str], None],
        failed: Callable[[Exception], None],
    ) -> None:
        self.scheduler = scheduler
        self._outside_subset = outside_subset
        self._failed = failed
        """Called with a failure of the tap's own work (vLLM's call is still made, once):
        the recording stops, vLLM's `schedule()` goes on."""
        self.kv_cache_manager = scheduler.kv_cache_manager
        self.block_pool = self.kv_cache_manager.block_pool
        self._coordinator = self.kv_cache_manager.coordinator
        self._group0 = self._coordinator.single_type_managers[0]
        self._one_full_group = _one_full_group(scheduler.kv_cache_config)
        self._decisions = decisions
        self._step_decisions: list[Decision | RawAdmission | str] = []
        """This step's decisions; a running grant (listed only in a step whose running pass
        was refused) and an admission call are kept raw, as their request id and a
        `RawAdmission` (`decision_records` makes their records on the builder thread)."""
        self._grants: dict[str, tuple[int, Any]] = {}
        """This step's running-pass grants in call order: tokens and new blocks (a refund
        needs them)."""
        self._walked = False
        """This step's running pass was refused: its grants are listed among the decisions."""
        self._needed_by: str | None = None
        self.prefix_cache = (0, 0)
        """Tokens this step's admissions looked up in the prefix cache, and the hits."""
        self.last_refusal: LastRefusal = None
        """This step's last admission call, if refused (what `ScheduleFacts.end` needs of it)."""
        self._in_schedule = False
        self._detached = False
        self._running_status = _request_status("RUNNING")
        self._watermarked_statuses = (_request_status("WAITING"), _request_status("PREEMPTED"))
        self._allocate_slots = self.kv_cache_manager.allocate_slots
        self._preempt_request = scheduler._preempt_request
        self._handle_blocked_waiting_request = scheduler._handle_blocked_waiting_request
        self._schedule_code = _untapped_running_pass_code(
            scheduler, one_full_group=self._one_full_group
        )
        """`schedule()`'s code where its running pass runs untapped (else None)."""
        self._tapped = True
        """`allocate_slots` is wrapped (outside `schedule()` always)."""

    def attach(self) -> None:
        self._tap()
        self.scheduler._preempt_request = self.preempt_request
        if self._schedule_code is not None:
            self.scheduler._handle_blocked_waiting_request = self.handle_blocked_waiting_request
        self.scheduler.deferred_waiting = _SkipReportingSet(
            self.scheduler.deferred_waiting, self._skipped
        )

    def detach(self) -> None:
        """Put vLLM's own methods back (the skip-reporting set stays, reporting nothing)."""
        self._in_schedule = False
        self._detached = True
        vars(self.kv_cache_manager).pop("allocate_slots", None)
        vars(self.scheduler).pop("_preempt_request", None)
        vars(self.scheduler).pop("_handle_blocked_waiting_request", None)

    def _tap(self) -> None:
        self.kv_cache_manager.allocate_slots = self.allocate_slots
        self._tapped = True

    def start_step(self) -> None:
        self._step_decisions = self._decisions()
        self._grants = {}
        self._walked = False
        self._needed_by = None
        self.prefix_cache = (0, 0)
        self.last_refusal = None
        self._in_schedule = not self._detached
        if self._schedule_code is not None and self._in_schedule:
            vars(self.kv_cache_manager).pop("allocate_slots", None)  # vLLM's own, untapped
            self._tapped = False

    def end_step(self) -> None:
        self._in_schedule = False
        if not self._detached:
            self._tap()  # the wrapper that notes calls outside `schedule()`

    def handle_blocked_waiting_request(self, request: Any) -> bool:
        """The waiting pass's first call for each request: its allocations are tapped."""
        if not self._tapped:
            self.kv_cache_manager.allocate_slots = self.admission_slots
            self._tapped = True
        ready: bool = self._handle_blocked_waiting_request(request)
        return ready

    def _skipped(self, request: Any) -> None:
        """The waiting pass passed over `request` (it goes back to the head afterwards)."""
        if not self._in_schedule or self._detached:
            return
        try:
            self._step_decisions.append(WaitingSkip(request.request_id, _skip_reason(request)))
        except Exception as error:
            self._failed(error)

    # ----- allocate_slots ------------------------------------------------------

    def allocate_slots(
        self,
        request: Any,
        num_new_tokens: int,
        *args: Any,
        num_lookahead_tokens: int = 0,
        **kwargs: Any,
    ) -> Any:
        if request.status is not self._running_status or args or kwargs or not self._in_schedule:
            if len(args) < 3:  # else the lookahead came positionally, and this is the default
                kwargs["num_lookahead_tokens"] = num_lookahead_tokens
            return self._other_call(request, num_new_tokens, args, kwargs)
        # The running pass's call, once per running request per step, as vLLM makes it: kept
        # to a dict entry, vLLM's defaults passed by position (the cheaper call; 0.32 and 0.33
        # order them so).
        new_blocks = self._allocate_slots(request, num_new_tokens, 0, None, num_lookahead_tokens)
        try:
            if new_blocks is None:
                kwargs["num_lookahead_tokens"] = num_lookahead_tokens
                self._refused_running_call(request, num_new_tokens, args, kwargs)
            else:
                self._grants[request.request_id] = (num_new_tokens, new_blocks)
                if self._walked:
                    self._step_decisions.append(request.request_id)
        except Exception as error:
            self._failed(error)
        return new_blocks

    def admission_slots(self, request: Any, num_new_tokens: int, *args: Any, **kwargs: Any) -> Any:
        """`allocate_slots` in the waiting pass, which vLLM calls with keywords."""
        if args or request.status is self._running_status:
            return self.allocate_slots(request, num_new_tokens, *args, **kwargs)
        return self._admission_call(request, num_new_tokens, kwargs)

    def _running_call(
        self,
        request: Any,
        num_new_tokens: int,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        new_blocks: Any,
    ) -> None:
        """A running request's call, granted or refused (the fast path above does the same
        inline)."""
        if new_blocks is None:
            self._refused_running_call(request, num_new_tokens, args, kwargs)
            return
        self._grants[request.request_id] = (num_new_tokens, new_blocks)
        if self._walked:
            self._step_decisions.append(request.request_id)

    def _other_call(
        self, request: Any, num_new_tokens: int, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """A call outside the running pass (an admission), or one made outside `schedule()`."""
        if not self._in_schedule:
            self._outside_subset("KV blocks allocated outside schedule()")
            return self._allocate_slots(request, num_new_tokens, *args, **kwargs)
        if request.status is self._running_status:  # a running request's call in another form
            new_blocks = self._allocate_slots(request, num_new_tokens, *args, **kwargs)
            try:
                self._running_call(request, num_new_tokens, args, kwargs, new_blocks)
            except Exception as error:
                self._failed(error)
            return new_blocks
        return self._admission_call(request, num_new_tokens, _by_name(args, kwargs))

    def _refused_running_call(
        self, request: Any, num_new_tokens: int, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        """A refused call changes nothing, so the state it was refused on is still here."""
        if not self._walked:
            # The grants before the first refusal, in call order, go in ahead of it.
            self._walked = True
            self._step_decisions.extend(self._grants)
        refusal = self._refusal(
            request, _AllocationArgs.bind(num_new_tokens, _by_name(args, kwargs))
        )
        self._needed_by = request.request_id
        self._step_decisions.append(RefusedRunningCall(request.request_id, num_new_tokens, refusal))

    def _admission_call(self, request: Any, num_new_tokens: int, kwargs: dict[str, Any]) -> Any:
        """A waiting request's call, its arguments past the first two all by keyword."""
        try:
            watermark = 0
            if kwargs.get("has_scheduled_reqs", True) and (
                request.status in self._watermarked_statuses
            ):
                watermark = int(self.kv_cache_manager.watermark_blocks)
            free_before = self.block_pool.get_num_free_blocks()
            # With hybrid groups a refused call may still free blocks outside a window first.
            refusal_before = None
            if not self._one_full_group:
                call = _AllocationArgs.bind(num_new_tokens, kwargs)
                refusal_before = self._refusal(request, call)
        except Exception as error:
            self._failed(error)
            return self._allocate_slots(request, num_new_tokens, **kwargs)
        new_blocks = self._allocate_slots(request, num_new_tokens, **kwargs)
        try:
            refusal = None
            if new_blocks is None:
                # One full-attention group: the refused call changed nothing it read.
                refusal = refusal_before or self._refusal(
                    request, _AllocationArgs.bind(num_new_tokens, kwargs), watermark, free_before
                )
            self._admitted(
                request, num_new_tokens, kwargs, watermark, free_before, new_blocks, refusal
            )
        except Exception as error:
            self._failed(error)
        return new_blocks

    def _admitted(
        self,
        request: Any,
        num_new_tokens: int,
        kwargs: dict[str, Any],
        watermark: int,
        free_before: int,
        new_blocks: Any,
        refusal: AllocationRefusal | None,
    ) -> None:
        """Keep an admission call as a `RawAdmission` (the builder thread makes the record,
        `decision_records`)."""
        get = kwargs.get
        num_new_computed_tokens = get("num_new_computed_tokens", 0)
        if refusal is not None:
            self.last_refusal = (refusal.check, request.request_id)
        else:
            self.last_refusal = None
            if self.kv_cache_manager.enable_caching:
                queries, hits = self.prefix_cache
                self.prefix_cache = (queries + request.num_tokens, hits + num_new_computed_tokens)
        self._step_decisions.append(
            (
                request.request_id,
                num_new_tokens,
                num_new_computed_tokens,
                get("full_sequence_must_fit", False),
                watermark,
                free_before,
                self.block_pool.get_num_free_blocks(),
                new_blocks,
                refusal,
            )
        )

    def _refusal(
        self,
        request: Any,
        call: _AllocationArgs,
        watermark: int | None = None,
        free: int | None = None,
    ) -> AllocationRefusal:
        """The check `allocate_slots` would refuse on, and its numbers, for the subset (the
        watermark and the free blocks as vLLM's check read them, where the caller has them)."""
        manager = self.kv_cache_manager
        if watermark is None:
            watermark = self._watermark(request, call)
        if free is None:
            free = self.block_pool.get_num_free_blocks()
        max_model_len = manager.max_model_len
        if call.full_sequence_must_fit:
            full = min(request.num_tokens, max_model_len)
            needed = self._blocks_needed(request, call, full, full_sequence=True)
            if needed + watermark > free:
                return AllocationRefusal(RefusalCheck.FULL_SEQUENCE, needed, watermark, free)
        total = min(request.num_computed_tokens + call.num_new_computed_tokens, max_model_len)
        slots = min(total + call.num_new_tokens + call.num_lookahead_tokens, max_model_len)
        needed = self._blocks_needed(request, call, slots, full_sequence=False)
        return AllocationRefusal(RefusalCheck.SLOTS, needed, watermark, free)

    def _watermark(self, request: Any, call: _AllocationArgs) -> int:
        """The free blocks vLLM keeps back from this call (a waiting request's, beside others)."""
        if call.has_scheduled_reqs and request.status in self._watermarked_statuses:
            return int(self.kv_cache_manager.watermark_blocks)
        return 0

    def _blocks_needed(
        self, request: Any, call: _AllocationArgs, num_tokens: int, *, full_sequence: bool
    ) -> int:
        """The blocks vLLM's check counted for `num_tokens` slots, in every group."""
        if self._one_full_group:
            return self._num_blocks_to_allocate(request, num_tokens, call.hit_blocks)
        hits = call.hit_groups or tuple(() for _ in self._coordinator.single_type_managers)
        num_local_computed = request.num_computed_tokens + call.num_new_computed_tokens
        total_computed = min(num_local_computed, self.kv_cache_manager.max_model_len)
        return int(
            self._coordinator.get_num_blocks_to_allocate(
                request_id=request.request_id,
                num_tokens=num_tokens,
                new_computed_blocks=hits,
                num_encoder_tokens=0,
                total_computed_tokens=total_computed if full_sequence else num_local_computed,
                num_local_computed_tokens=num_local_computed,
                num_tokens_main_model=(
                    num_tokens if full_sequence else total_computed + call.num_new_tokens
                ),
                apply_admission_cap=full_sequence,
                prefill_end=max(request.num_prompt_tokens, request.num_tokens - 1),
            )
        )

    def _num_blocks_to_allocate(self, request: Any, num_tokens: int, hits: Sequence[Any]) -> int:
        held = len(self._group0.req_to_blocks.get(request.request_id, ()))
        block_size = self.scheduler.block_size
        num_new = cdiv(num_tokens, block_size) - len(hits) - held
        return max(num_new, 0) + sum(1 for block in hits if block.ref_cnt == 0)

    # ----- _preempt_request -----------------------------------------------------

    def preempt_request(self, request: Any, *args: Any, **kwargs: Any) -> None:
        if not self._in_schedule:  # reset_prefix_cache() preempts everything running
            self._outside_subset("requests preempted outside schedule() (prefix cache reset)")
            self._preempt_request(request, *args, **kwargs)
            return
        try:
            if not self._tapped:
                self._untapped_refusal(self._schedule_frame())
            before = (
                self.block_pool.get_num_free_blocks(),
                request.num_computed_tokens,
                len(self._group0.req_to_blocks.get(request.request_id, ())),
            )
        except Exception as error:
            self._failed(error)
            self._preempt_request(request, *args, **kwargs)
            return
        self._preempt_request(request, *args, **kwargs)
        try:
            self._preempted(request, *before)
        except Exception as error:
            self._failed(error)

    def _preempted(
        self, request: Any, free_before: int, num_computed: int, num_blocks: int
    ) -> None:
        """Record the preemption vLLM just made, with what it read before."""
        request_id = request.request_id
        refunded_tokens, refunded_blocks = self._grants.pop(request_id, (0, None))
        self._step_decisions.append(
            Preemption(
                request_id=request_id,
                needed_by=self._needed_by or request_id,
                policy=self.scheduler.policy.value,
                num_computed_tokens_discarded=num_computed,
                num_blocks_freed=num_blocks,
                num_tokens_refunded=refunded_tokens,
                refunded_block_ids=_new_block_ids(refunded_blocks),
                num_preemptions=request.num_preemptions,
                num_free_blocks_before=free_before,
                num_free_blocks_after=self.block_pool.get_num_free_blocks(),
            )
        )

    def _schedule_frame(self) -> Any:
        """vLLM's `schedule()` running, which called `_preempt_request` (through any
        wrappers of its own), or None."""
        frame: FrameType | None = sys._getframe(2)
        for _ in range(_MAX_WRAPPERS):
            if frame is None or frame.f_code is self._schedule_code:
                return frame
            frame = frame.f_back
        return None

    def _untapped_refusal(self, frame: Any) -> None:
        """The untapped running pass was refused: record the grants before the refused
        call and the call from `schedule()`'s frame, and tap the rest of the step."""
        self._tap()
        if frame is None:  # not vLLM's running pass: its refusal cannot be recorded
            self._outside_subset("a request preempted outside schedule()'s running pass")
            return
        names = frame.f_locals
        tokens, new_blocks = names["num_scheduled_tokens"], names["req_to_new_blocks"]
        for granted in names["scheduled_running_reqs"]:
            request_id = granted.request_id
            self._grants[request_id] = (tokens[request_id], new_blocks[request_id])
        lookahead = {"num_lookahead_tokens": self.scheduler.num_lookahead_tokens}
        self._refused_running_call(names["request"], names["num_new_tokens"], (), lookahead)


def _untapped_running_pass_code(scheduler: Any, *, one_full_group: bool) -> Any:
    """`schedule()`'s code, where only a preemption follows a refused running call and the
    frame holds what the refusal's record needs; None where the running pass is tapped."""
    if not one_full_group or scheduler.policy.value != "fcfs" or scheduler.connector is not None:
        return None
    if not hasattr(scheduler, "_handle_blocked_waiting_request"):
        return None
    code = type(scheduler).schedule.__code__
    if not {*code.co_varnames, *code.co_cellvars} >= _SCHEDULE_LOCALS:
        return None
    return code


_MAX_WRAPPERS = 8
"""Frames looked through between `_preempt_request` and `schedule()`."""

_SCHEDULE_LOCALS = frozenset(
    {
        "request",
        "num_new_tokens",
        "scheduled_running_reqs",
        "num_scheduled_tokens",
        "req_to_new_blocks",
    }
)


def _skip_reason(request: Any) -> WaitingSkipReason:
    """Why the waiting pass passed over `request`, in the engine's words.

    A blocking status names itself; a request ready and holding no stale output was
    passed over by the LoRA gate if it has an adapter, else for a cause vLLM does not
    show (a transfer pending, no tokens after the prefill lookahead).
    """
    if request.num_stale_output_tokens and not request.drop_stale_output:
        return WaitingSkipReason.STALE_OUTPUT
    status = request.status.name
    if status in _BLOCKING_STATUSES:
        return _BLOCKING_STATUSES[status]
    if request.lora_request is not None and status in _READY_STATUSES:
        return WaitingSkipReason.MAX_LORAS
    return WaitingSkipReason.CANNOT_SCHEDULE


_BLOCKING_STATUSES = {
    "WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR": WaitingSkipReason.GRAMMAR_NOT_READY,
    "WAITING_FOR_REMOTE_KVS": WaitingSkipReason.WAITING_FOR_REMOTE_KVS,
    "WAITING_FOR_STREAMING_REQ": WaitingSkipReason.WAITING_FOR_STREAMING_REQ,
}
_READY_STATUSES = frozenset({"WAITING", "PREEMPTED"})


class _SkipReportingSet(set[Any]):
    """vLLM's `deferred_waiting` set, reporting each request added to it."""

    def __init__(self, items: set[Any], on_add: Callable[[Any], None]) -> None:
        super().__init__(items)
        self._on_add = on_add

    def add(self, item: Any) -> None:
        super().add(item)
        self._on_add(item)


class _AllocationArgs:
    """The `allocate_slots` arguments the records need, from vLLM's positional or keyword form."""

    __slots__ = (
        "full_sequence_must_fit",
        "has_scheduled_reqs",
        "hit_blocks",
        "hit_groups",
        "num_lookahead_tokens",
        "num_new_computed_tokens",
        "num_new_tokens",
    )

    def __init__(self) -> None:
        self.num_new_tokens = 0
        self.num_new_computed_tokens = 0
        self.hit_blocks: Sequence[Any] = ()
        self.hit_groups: tuple[Sequence[Any], ...] = ()
        self.num_lookahead_tokens = 0
        self.full_sequence_must_fit = False
        self.has_scheduled_reqs = True

    @classmethod
    def bind(cls, num_new_tokens: int, named: dict[str, Any]) -> _AllocationArgs:
        """The call's arguments past the first two, by name (`_by_name`)."""
        call = cls()
        call.num_new_tokens = num_new_tokens
        call.num_new_computed_tokens = named.get("num_new_computed_tokens", 0)
        blocks = named.get("new_computed_blocks")
        call.hit_groups = tuple(blocks.blocks) if blocks is not None else ()
        call.hit_blocks = call.hit_groups[0] if call.hit_groups else ()
        call.num_lookahead_tokens = named.get("num_lookahead_tokens", 0)
        call.full_sequence_must_fit = named.get("full_sequence_must_fit", False)
        call.has_scheduled_reqs = named.get("has_scheduled_reqs", True)
        return call


_POSITIONAL = ("num_new_computed_tokens", "new_computed_blocks", "num_lookahead_tokens")
"""`allocate_slots`'s parameters after the first two, in their order (0.32 and 0.33)."""


def _by_name(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """An `allocate_slots` call's arguments past the first two, by name."""
    return dict(zip(_POSITIONAL, args, strict=False)) | kwargs if args else kwargs


RawAdmission = tuple[str, int, int, bool, int, int, int, Any, AllocationRefusal | None]
"""An admission call as the engine thread keeps it (making a frozen record there costs it
several times as much): `AdmissionCall`'s fields in order, with vLLM's `KVCacheBlocks` granted
(or None) in place of the block ids; vLLM makes those afresh for each call and never changes
them."""


def decision_records(decisions: list[Any]) -> list[Decision]:
    """A step's decisions, each kept raw among them made its record: a request id its
    `RunningGrant`, a `RawAdmission` its `AdmissionCall` (the builder thread; in place)."""
    for index, decision in enumerate(decisions):
        kind = type(decision)
        if kind is str:
            decisions[index] = RunningGrant(decision)
        elif kind is tuple:
            (
                request_id,
                num_new,
                num_computed,
                full,
                watermark,
                before,
                after,
                new_blocks,
                refusal,
            ) = decision
            decisions[index] = AdmissionCall(
                request_id,
                num_new,
                num_computed,
                full,
                watermark,
                before,
                after,
                () if new_blocks is None else _block_ids(new_blocks),
                refusal,
            )
    return decisions


def _one_full_group(kv_cache_config: Any) -> bool:
    groups = kv_cache_config.kv_cache_groups
    return len(groups) == 1 and type(groups[0].kv_cache_spec).__name__ == "FullAttentionSpec"


def _new_block_ids(new_blocks: Any) -> tuple[int, ...]:
    """The ids of the blocks a granted running call added (group 0), or none."""
    if new_blocks is None or not new_blocks.blocks[0]:
        return ()
    return tuple([block.block_id for block in new_blocks.blocks[0]])


def _block_ids(blocks: Any) -> tuple[int, ...]:
    """Group 0's block ids of a `KVCacheBlocks`."""
    groups = blocks.get_block_ids()
    return tuple(groups[0]) if groups else ()


def _request_status(name: str) -> Any:
    from vllm.v1.request import RequestStatus

    return RequestStatus[name]
