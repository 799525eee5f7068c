"""Waiting queues: FCFS and PRIORITY with vLLM's exact semantics."""

from __future__ import annotations

from stepscope.engine import Request, SamplingParams
from stepscope.engine.request_queue import FCFSRequestQueue, PriorityRequestQueue


def _request(request_id: str, priority: int = 0, arrival_time: float = 0.0) -> Request:
    return Request(request_id, [1, 2, 3], SamplingParams(max_tokens=4), arrival_time, priority)


def _ids(queue: FCFSRequestQueue | PriorityRequestQueue) -> list[str]:
    return [r.request_id for r in queue]


def test_fcfs_prepend_puts_a_request_at_the_front() -> None:
    queue = FCFSRequestQueue()
    a, b, c = _request("a"), _request("b"), _request("c")
    queue.add_request(a)
    queue.add_request(b)
    queue.prepend_request(c)
    assert _ids(queue) == ["c", "a", "b"]
    assert queue.peek_request() is c
    assert queue.pop_request() is c


def test_fcfs_prepend_requests_reverses_them() -> None:
    queue = FCFSRequestQueue()
    queue.add_request(_request("z"))
    queue.prepend_requests([_request("a"), _request("b"), _request("c")])
    assert _ids(queue) == ["c", "b", "a", "z"]


def test_fcfs_remove_requests_keeps_the_order_of_the_rest() -> None:
    queue = FCFSRequestQueue()
    requests = [_request(name) for name in "abcde"]
    for request in requests:
        queue.add_request(request)
    queue.remove_requests([requests[3], requests[1]])
    assert _ids(queue) == ["a", "c", "e"]


def test_priority_orders_by_priority_then_arrival_then_id() -> None:
    queue = PriorityRequestQueue()
    for request in (
        _request("late", priority=1, arrival_time=5.0),
        _request("b", priority=1, arrival_time=1.0),
        _request("a", priority=1, arrival_time=1.0),
        _request("urgent", priority=0, arrival_time=9.0),
    ):
        queue.add_request(request)
    assert _ids(queue) == ["urgent", "a", "b", "late"]
    assert [queue.pop_request().request_id for _ in range(4)] == ["urgent", "a", "b", "late"]


def test_priority_prepend_gives_no_head_start() -> None:
    queue = PriorityRequestQueue()
    queue.add_request(_request("high", priority=0, arrival_time=2.0))
    queue.prepend_request(_request("preempted", priority=3, arrival_time=0.0))
    assert queue.peek_request().request_id == "high"


def test_priority_remove_requests() -> None:
    queue = PriorityRequestQueue()
    requests = [_request(name, arrival_time=float(i)) for i, name in enumerate("abcd")]
    for request in requests:
        queue.add_request(request)
    queue.remove_requests([requests[0], requests[2]])
    assert _ids(queue) == ["b", "d"]
    assert len(queue) == 2
