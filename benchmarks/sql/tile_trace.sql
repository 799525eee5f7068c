-- Copy k ($1) of the attached trace `src` appended to the open trace, every step, seq,
-- request index and arrival moved past copy k - 1: steps by getvariable('steps'), seqs by
-- getvariable('seqs'), requests by getvariable('requests'), arrival times by
-- getvariable('span'); request ids get '#k'. One statement per table; rows keep their order.
INSERT INTO _requests SELECT * REPLACE (
    request_index + $1 * getvariable('requests') AS request_index,
    request_id || '#' || $1 AS request_id,
    arrival_step + $1 * getvariable('steps') AS arrival_step,
    arrival_time + $1 * getvariable('span') AS arrival_time,
    abort_step + $1 * getvariable('steps') AS abort_step,
    grammar_ready_step + $1 * getvariable('steps') AS grammar_ready_step
) FROM src._requests;
INSERT INTO _steps SELECT * REPLACE (
    step + $1 * getvariable('steps') AS step,
    update_step + $1 * getvariable('steps') AS update_step,
    blocked_request_index + $1 * getvariable('requests') AS blocked_request_index
) FROM src._steps;
INSERT INTO _scheduled SELECT * REPLACE (
    step + $1 * getvariable('steps') AS step,
    seq + $1 * getvariable('seqs') AS seq,
    request_index + $1 * getvariable('requests') AS request_index
) FROM src._scheduled;
INSERT INTO _block_ids SELECT * REPLACE (
    step + $1 * getvariable('steps') AS step,
    request_index + $1 * getvariable('requests') AS request_index
) FROM src._block_ids;
INSERT INTO _allocations SELECT * REPLACE (
    step + $1 * getvariable('steps') AS step,
    seq + $1 * getvariable('seqs') AS seq,
    request_index + $1 * getvariable('requests') AS request_index
) FROM src._allocations;
INSERT INTO _preemptions SELECT * REPLACE (
    step + $1 * getvariable('steps') AS step,
    seq + $1 * getvariable('seqs') AS seq,
    request_index + $1 * getvariable('requests') AS request_index,
    needed_by_index + $1 * getvariable('requests') AS needed_by_index
) FROM src._preemptions;
INSERT INTO _events SELECT * REPLACE (
    step + $1 * getvariable('steps') AS step,
    seq + $1 * getvariable('seqs') AS seq,
    request_index + $1 * getvariable('requests') AS request_index
) FROM src._events;
INSERT INTO _spec_decode SELECT * REPLACE (
    step + $1 * getvariable('steps') AS step,
    request_index + $1 * getvariable('requests') AS request_index
) FROM src._spec_decode;
