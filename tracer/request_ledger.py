"""The requests a recorder knows of, and what it keeps of their `_requests` rows.

Each request gets an index when it arrives (a workload's, up front) and one `_requests`
row when it is first recorded; its spec is dropped then, so a server's recording never
holds every prompt it was sent. A live engine learns some of a request's inputs after
that row was written: an abort, the step its grammar became ready. Those go into the
next batch as rows of their own (`request_aborts`, `request_grammars`), which readers
apply over the row.

A segmented recording keeps more: every segment holds the rows of the requests it runs,
so it replays on its own. The row of each unfinished request is carried into every
segment that opens, and that of a finished one until the next segment opens (the
segment's checkpoint may still name it), each with what was learned of it since.
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa
from stepscope.engine import Workload
from stepscope.engine.checkpoint import SchedulerCheckpoint
from stepscope.engine.workload import RequestSpec

from .checkpoint_rows import PendingCheckpoint
from .columns import TableBuffer
from .redact import Redactor
from .request_rows import request_row
from .writer import REQUEST_ABORTS, REQUEST_GRAMMARS

Row = dict[str, object]


class RequestLedger:
    """Request ids to indices, specs until their rows are recorded, and the rows a
    segmented recording carries; rows go into `rows` (the `_requests` buffer)."""

    def __init__(
        self,
        workload: Workload,
        rows: TableBuffer,
        redactor: Redactor | None,
        *,
        segmented: bool,
    ) -> None:
        self._rows = rows
        self._redactor = redactor
        self._segmented = segmented
        self.specs: dict[int, RequestSpec] = dict(enumerate(workload.requests))
        """Each request's spec until its `_requests` row is recorded."""
        self.index = {spec.request_id: i for i, spec in enumerate(workload.requests)}
        """Each request id's index (a finished request's is forgotten in a segmented one)."""
        self._num_indexed = len(workload.requests)
        self._carried: dict[int, Row] = {}
        """Segmented: the row of each unfinished request, which every segment it runs in holds."""
        self._finished: dict[int, Row] = {}
        """Segmented: the rows of requests finished since the last segment opened (its
        checkpoint may still name them: finished, not yet shipped as finished)."""
        self._row_aborts: dict[int, tuple[int, bool]] = {}
        """The abort (step, before update) in a recorded row, by request index."""
        self._late_aborts: list[tuple[int, int, bool]] = []
        """(request_index, abort_step, abort_before_update) learned after the row was
        recorded, not handed to the writer yet."""
        self._late_grammars: list[tuple[int, int]] = []
        """(request_index, grammar_ready_step) likewise."""
        self._compiling: dict[int, int | None] = {}
        """Requests whose grammar a live engine is still compiling, each with the step its
        written row says it is ready at so far (None: not said yet); see `grammar_pending`."""

    # ----- what arrives -------------------------------------------------------

    def register(self, spec: RequestSpec) -> None:
        """Keep `spec` for its request: a known id whose row is still to be recorded keeps
        its index (a planned request arriving); any other gets the next."""
        index = self.index.get(spec.request_id)
        if index is None or index not in self.specs:
            index = self.index[spec.request_id] = self._num_indexed
            self._num_indexed += 1
        self.specs[index] = spec

    def record(self, request_id: str) -> None:
        """The request's `_requests` row; from then on only what is learned late is kept."""
        index = self.index[request_id]
        spec = self.specs.pop(index, None)
        assert spec is not None, f"request {request_id}: its row is recorded already"
        row = request_row(index, request_id, spec, self._redactor)
        self._rows.append_row(row)
        if self._segmented:
            self._carried[index] = row
        if spec.abort_step is not None:
            self._row_aborts[index] = (spec.abort_step, spec.abort_before_update)

    def finished(self, index: int) -> None:
        """The request at `index` has finished: its row is kept only until a segment opens."""
        row = self._carried.pop(index, None)
        if row is not None:
            self._finished[index] = row

    # ----- what is learned late -----------------------------------------------

    def aborted(self, index: int, step: int, *, before_update: bool) -> None:
        """Put the abort in the request's row too: replay reads a request's inputs there.

        A scripted workload names its aborts up front; a live engine learns them after
        the row was written, so a row of `request_aborts` says it in the next batch.
        """
        spec = self.specs.get(index)
        if spec is None:  # its row is recorded
            if self._row_aborts.get(index) == (step, before_update):
                return
            self._row_aborts[index] = (step, before_update)
            self._update_kept_row(index, {"abort_step": step, "abort_before_update": before_update})
        elif spec.abort_step == step and spec.abort_before_update == before_update:
            return
        else:
            self.specs[index] = dataclasses.replace(
                spec, abort_step=step, abort_before_update=before_update
            )
        self._late_aborts.append((index, step, before_update))

    @property
    def num_late_aborts(self) -> int:
        return len(self._late_aborts)

    def drop_late_aborts_from(self, count: int) -> None:
        """Forget the late aborts after the first `count` (a step that failed to record)."""
        del self._late_aborts[count:]

    def grammar_pending(self, request_id: str) -> None:
        """The request waits for its grammar, which a live engine compiles: until it is
        ready, each batch says it is ready at the step after the last one recorded, so a
        reader (of a recording being written, a snapshot of it, what a kill left) holds it
        through every step it can see, as the engine did."""
        index = self.index.get(request_id)
        if index is not None:
            self._compiling[index] = None

    def grammar_ready(self, request_id: str, step: int) -> None:
        """The request's grammar became ready at `step` (a live engine learns it late)."""
        index = self.index.get(request_id)
        if index is None:
            return
        self._compiling.pop(index, None)
        spec = self.specs.get(index)
        if spec is not None:
            self.specs[index] = dataclasses.replace(spec, grammar_ready_step=step)
            return
        self._grammar_ready_in_row(index, step)

    def late_rows(self, last_step: int | None) -> dict[str, pa.Table]:
        """What was learned since the last batch, as its tables (`last_step`: the last step
        recorded, which a grammar still compiling is held past)."""
        tables = {}
        if self._late_aborts:
            tables[REQUEST_ABORTS] = _aborts_table(self._late_aborts)
            self._late_aborts = []
        if last_step is not None:
            self._hold_compiling(last_step + 1)
        if self._late_grammars:
            tables[REQUEST_GRAMMARS] = _grammars_table(self._late_grammars)
            self._late_grammars = []
        return tables

    def _hold_compiling(self, held_until: int) -> None:
        """Each recorded row of a request still compiling its grammar: ready, so far, at
        `held_until`."""
        for index, said in self._compiling.items():
            if said != held_until and index not in self.specs:
                self._compiling[index] = held_until
                self._grammar_ready_in_row(index, held_until)

    def _grammar_ready_in_row(self, index: int, step: int) -> None:
        """Say so of the request's recorded row (and of the row a later segment carries)."""
        self._update_kept_row(index, {"grammar_ready_step": step})
        self._late_grammars.append((index, step))

    def _update_kept_row(self, index: int, learned: Row) -> None:
        """Segmented: the row a segment that opens later carries says what was learned."""
        for rows in (self._carried, self._finished):
            row = rows.get(index)
            if row is not None:
                rows[index] = {**row, **learned}

    # ----- segments -----------------------------------------------------------

    def carry(self, pending: PendingCheckpoint, *, after_gap: bool) -> None:
        """The rows of every request the checkpoint names: new ones for those that arrived
        in a gap, again for the rest when a segment opens; from here on only the unfinished
        ones are kept (the rest finished before the checkpoint)."""
        for request_id, index in sorted(pending.request_index.items(), key=lambda item: item[1]):
            if index in self.specs:
                self.record(request_id)
            elif self._segmented:
                self._rows.append_row(self._carried.get(index) or self._finished[index])
        if self._segmented:
            self._keep_unfinished(pending)
        if after_gap:
            self._forget_arrived_before(pending.checkpoint)

    def carry_unfinished(self) -> None:
        """A segment opens with no checkpoint: the rows of every request not known to have
        finished."""
        for row in self._carried.values():
            self._rows.append_row(row)
        self._finished = {}

    def _keep_unfinished(self, pending: PendingCheckpoint) -> None:
        """Under async scheduling a checkpoint is taken before the previous step's update,
        which the recorder has seen by now: a request it names as unfinished may have
        finished there, and is carried no further."""
        unfinished = (self.index[rc.request_id] for rc in pending.checkpoint.requests)
        self._carried = {
            index: self._carried[index] for index in unfinished if index in self._carried
        }
        self._finished = {}
        self._row_aborts = {
            index: abort for index, abort in self._row_aborts.items() if index in self._carried
        }
        self._forget_finished_ids(pending)

    def _forget_finished_ids(self, pending: PendingCheckpoint) -> None:
        """Keep the ids of requests still to come, unfinished, or named by the checkpoint
        (finished, not yet shipped): a server's recording would otherwise hold every id it
        was sent."""
        named = set(pending.request_index)
        self.index = {
            request_id: index
            for request_id, index in self.index.items()
            if index in self.specs or index in self._carried or request_id in named
        }

    def _forget_arrived_before(self, checkpoint: SchedulerCheckpoint) -> None:
        """Drop the specs of requests that arrived and finished in a gap (never recorded)."""
        unfinished = {self.index[rc.request_id] for rc in checkpoint.requests}
        for index, spec in list(self.specs.items()):
            if spec.arrival_step < checkpoint.step and index not in unfinished:
                del self.specs[index]


def _grammars_table(grammars: list[tuple[int, int]]) -> pa.Table:
    indices, steps = zip(*grammars, strict=True)
    return pa.table(
        {
            "request_index": pa.array(indices, pa.int32()),
            "grammar_ready_step": pa.array(steps, pa.int32()),
        }
    )


def _aborts_table(aborts: list[tuple[int, int, bool]]) -> pa.Table:
    indices, steps, before_update = zip(*aborts, strict=True)
    return pa.table(
        {
            "request_index": pa.array(indices, pa.int32()),
            "abort_step": pa.array(steps, pa.int32()),
            "abort_before_update": pa.array(before_update, pa.bool_()),
        }
    )
