-- The stepscope trace: append-only facts recorded at each engine step.
--
-- Every table and column is commented; the comments are stored in the trace's
-- catalog (COMMENT ON) so `duckdb_columns()` shows them. Requests are referred to
-- by `request_index` (their position in the workload); the reader's views join
-- the string `request_id` back in. Physical tables are prefixed `_`; the reader
-- defines same-named views without the prefix. A compacted trace (a complete one of
-- 4 MB or more) stores `_requests` as `_request_rows` and `_prompt_prefixes` (each
-- shared prompt prefix once) behind a stored view `_requests` with the columns below
-- (`tracer/sql/shared_prompt_*.sql`).

CREATE TYPE request_kind AS ENUM ('new', 'resumed', 'running');
CREATE TYPE allocation_pass AS ENUM ('running', 'waiting');
CREATE TYPE refusal_check AS ENUM ('full_sequence', 'slots');
CREATE TYPE running_pass_end AS ENUM ('all_visited', 'budget', 'self_preempted');
CREATE TYPE admission_stop AS ENUM (
    'no_waiting', 'budget', 'max_num_seqs', 'kv_full', 'kv_full_sequence',
    'preempted_this_step', 'chunking_off', 'prefill_held'
);
CREATE TYPE scheduling_policy AS ENUM ('fcfs', 'priority');
CREATE TYPE event_kind AS ENUM (
    'arrive', 'reject', 'abort', 'admit', 'resume', 'preempt', 'finish', 'skip'
);
-- The vocabularies of `_events.detail` for a finish and a skip (the column stays VARCHAR:
-- it holds the other kinds' details too).
CREATE TYPE finish_reason AS ENUM ('stop', 'length', 'abort', 'error', 'repetition');
-- An unfinished request's status in a checkpoint (vLLM's RequestStatus, lower case).
CREATE TYPE request_status AS ENUM (
    'waiting', 'waiting_for_structured_output_grammar', 'waiting_for_remote_kvs',
    'waiting_for_streaming_req', 'running', 'preempted'
);
CREATE TYPE request_queue AS ENUM ('waiting', 'running');
-- A hybrid model's KV cache group's attention (vLLM's spec classes).
CREATE TYPE attention_type AS ENUM ('full', 'sliding_window', 'chunked_local');
CREATE TYPE waiting_skip_reason AS ENUM (
    'grammar_not_ready', 'stale_output', 'max_loras', 'waiting_for_remote_kvs',
    'waiting_for_streaming_req', 'cannot_schedule'
);

-- Key/value facts about the trace: schema_version, tool_version, engine, created_at,
-- complete, device, torch_version, model, workload, redacted.
CREATE TABLE _meta (
    key VARCHAR PRIMARY KEY,  -- fact name
    value VARCHAR  -- fact value, as text
);

-- The engine config of the run: every knob, flattened (one row).
CREATE TABLE _config (
    block_size INTEGER,  -- tokens per KV block
    num_blocks INTEGER,  -- KV blocks, vLLM's null block 0 included
    max_num_batched_tokens INTEGER,  -- input budget per step
    max_num_scheduled_tokens INTEGER,  -- token budget per step (NULL: = max_num_batched_tokens)
    max_num_seqs INTEGER,  -- most requests running at once
    max_num_active_seqs INTEGER,  -- admission gate if lower than max_num_seqs (NULL: max_num_seqs)
    max_model_len INTEGER,  -- longest sequence, prompt plus outputs
    policy scheduling_policy,  -- fcfs or priority
    enable_prefix_caching BOOLEAN,  -- reuse cached full blocks across requests
    enable_chunked_prefill BOOLEAN,  -- split prompts over several steps
    long_prefill_token_threshold INTEGER,  -- per-request chunk cap when 2+ requests exist (0: off)
    long_prefill_token_threshold_adaptive BOOLEAN,  -- floor the cap at a fair share of the budget
    scheduler_reserve_full_isl BOOLEAN,  -- admit only if the whole current sequence fits
    watermark DOUBLE,  -- fraction of blocks held back from admissions
    async_scheduling BOOLEAN,  -- AsyncScheduler with a batch queue: a step is scheduled before the previous one's output
    vllm_version VARCHAR,  -- vLLM version whose rules decide where versions differ (0.32.x or 0.33.0)
    num_speculative_tokens INTEGER,  -- drafts verified per decode step (0: speculative decoding off)
    speculative_method VARCHAR,  -- how drafts are proposed: ngram, draft_model, eagle, eagle3 or mtp (NULL: off)
    mtp_num_modules INTEGER,  -- MTP modules of an mtp drafter (NULL: 1)
    parallel_drafting BOOLEAN,  -- all drafts in one pass (P-EAGLE: k - 1 draft slots; PARD: k) (NULL: off)
    disable_lookahead_block_hashes BOOLEAN,  -- EAGLE-style drafters keep plain hashes and drop the last hit block (NULL: off)
    prefill_schedule_interval INTEGER,  -- prefill only once every N executed steps while a decode runs (NULL: not set, 1)
    max_loras INTEGER,  -- LoRA adapters that may run at once (NULL: LoRA off)
    block_hasher VARCHAR,  -- how full blocks are hashed: stepscope, or vllm-<prefix_caching_hash_algo> (NULL: stepscope)
    none_hash VARCHAR,  -- vLLM's NONE_HASH in hex, the parent hash of every first block (NULL: stepscope's own)
    kv_cache_groups STRUCT(type attention_type, sliding_window INTEGER, attention_chunk_size INTEGER)[],  -- hybrid KV cache groups in vLLM's group order: attention type (full, sliding_window or chunked_local) and window in tokens (NULL: one full group)
    prefix_cache_retention_interval INTEGER  -- hybrid groups: steps a windowed group keeps out-of-window blocks cached (NULL: kept forever; 0: not set)
);

-- One row per workload request, written when it arrives (rejected ones included).
CREATE TABLE _requests (
    request_index INTEGER,  -- position in the workload; the key other tables use
    request_id VARCHAR,  -- the request's id
    arrival_step INTEGER,  -- engine step at which it arrived
    arrival_time DOUBLE,  -- arrival time (orders the priority heap)
    priority INTEGER,  -- lower is more important
    prompt_len INTEGER,  -- prompt tokens
    prompt_token_ids BIGINT[],  -- prompt tokens (keyed pseudonyms when the trace is redacted)
    max_tokens INTEGER,  -- output token limit
    min_tokens INTEGER,  -- outputs before EOS / stop ids may stop it (enforced by the sampler)
    eos_token_id BIGINT,  -- EOS token (NULL: ignores EOS); a pseudonym when redacted
    stop_token_ids BIGINT[],  -- stop token ids; pseudonyms when redacted
    abort_step INTEGER,  -- step at which it was aborted (NULL: never)
    abort_before_update BOOLEAN,  -- the abort landed after that step's schedule(), before its update
    temperature DOUBLE,  -- sampling temperature (0: greedy)
    top_k INTEGER,  -- top-k sampling (0: off)
    top_p DOUBLE,  -- nucleus sampling (1: off)
    seed BIGINT,  -- sampling seed (NULL: derived from the request id)
    lora_id INTEGER,  -- the LoRA adapter it runs with (NULL: base model)
    grammar_ready_step INTEGER,  -- step its structured-output grammar is ready (NULL: no structured output)
    draft_mismatch_every INTEGER,  -- tape model: the draft for output i is wrong when (i + 1) % this = 0 (NULL: none)
    draft_accept INTEGER[]  -- tape model: drafts accepted at each verification of real drafts (NULL: none)
);

-- One row per engine step, idle steps included.
CREATE TABLE _steps (
    step INTEGER,  -- engine step, from 0
    idle BOOLEAN,  -- schedule() was not called: nothing to schedule or ship
    update_step INTEGER,  -- step whose update processed this step's output (= step unless async; NULL: idle)
    token_budget INTEGER,  -- tokens the scheduler could issue this step
    input_budget INTEGER,  -- max_num_batched_tokens for this step
    long_prefill_token_threshold INTEGER,  -- chunk cap in force this step (0: off or lone request)
    num_running_before INTEGER,  -- running requests when schedule() began
    num_waiting_before INTEGER,  -- waiting requests when schedule() began
    num_free_blocks_before INTEGER,  -- free KV blocks when schedule() began
    num_scheduled_tokens INTEGER,  -- tokens scheduled
    num_scheduled_reqs INTEGER,  -- requests scheduled
    num_new_reqs INTEGER,  -- first admissions
    num_resumed_reqs INTEGER,  -- re-admissions after preemption
    num_preemptions INTEGER,  -- requests preempted during schedule()
    num_finished INTEGER,  -- requests that finished in update_from_output()
    num_free_blocks_after_schedule INTEGER,  -- free KV blocks right after schedule()
    num_free_blocks_after_update INTEGER,  -- free KV blocks after update_from_output()
    num_held_blocks_by_group INTEGER[],  -- hybrid KV cache groups: blocks each group's requests hold right after schedule(), in group order; a block shared through the prefix cache counts once, a null entry not at all (NULL: no kv_cache_groups, or before schema 11)
    num_running_after INTEGER,  -- running requests after the update
    num_waiting_after INTEGER,  -- waiting requests after the update
    prefix_cache_queries INTEGER,  -- tokens looked up in the prefix cache by admitted requests
    prefix_cache_hits INTEGER,  -- of those, tokens that hit
    running_pass_end running_pass_end,  -- why the running pass stopped
    admission_stop admission_stop,  -- why the waiting pass admitted no more
    blocked_request_index INTEGER,  -- the waiting head that could not be admitted (NULL: none)
    schedule_ns BIGINT,  -- wall time of schedule()
    model_ns BIGINT,  -- wall time of the model runner
    update_ns BIGINT,  -- wall time of update_from_output()
    ended_at_ns BIGINT  -- wall clock when the step was handed to the recorder, its update done (Unix epoch, ns; NULL before schema 8)
);

-- The SchedulerOutput and what the model sampled: one row per scheduled request.
-- `seq` orders a step's rows as vLLM does (running requests in running order, then
-- admissions in admission order); it is the seq of the request's allocate_slots call.
CREATE TABLE _scheduled (
    step INTEGER,  -- engine step
    seq BIGINT,  -- order of events, allocations and preemptions (increases through the trace)
    request_index INTEGER,  -- the request
    kind request_kind,  -- new (first admission), resumed (after preemption) or running
    num_tokens INTEGER,  -- tokens scheduled for it
    computed_before INTEGER,  -- num_computed_tokens before this step (the prefix hit for admissions)
    sampled_token_id BIGINT  -- token the model sampled (NULL: a prefill chunk that samples nothing)
);

-- Block ids in each step's SchedulerOutput: a running request's new blocks, a new or
-- resumed request's whole block table, of every KV cache group (hybrid models have several).
CREATE TABLE _block_ids (
    step INTEGER,  -- engine step
    request_index INTEGER,  -- the request
    slot INTEGER,  -- index of the block in the request's block table of its group
    block_id INTEGER,  -- the KV block (0: vLLM's null block, a windowed group's skipped entry)
    kv_cache_group INTEGER  -- the KV cache group whose table holds it (0: the first, the only one without hybrid groups)
);

-- The allocate_slots calls that are not a plain running-pass grant (those are rows of
-- _scheduled): refused calls, admissions, and grants later refunded by a preemption.
CREATE TABLE _allocations (
    step INTEGER,  -- engine step
    seq BIGINT,  -- order of events, allocations and preemptions (increases through the trace)
    request_index INTEGER,  -- the request needing slots
    pass allocation_pass,  -- running pass or waiting pass (admission)
    num_new_tokens INTEGER,  -- tokens to give slots to
    num_new_computed_tokens INTEGER,  -- prefix-hit tokens adopted with it
    num_lookahead_tokens INTEGER,  -- slots asked for past the new tokens, for the drafter (draft_model: k; else 0)
    full_sequence_check BOOLEAN,  -- whether the whole current sequence had to fit
    num_blocks_needed INTEGER,  -- blocks the call needed from the free pool
    watermark_blocks INTEGER,  -- blocks it had to leave free
    num_free_blocks_before INTEGER,  -- free blocks before the call (NULL for a refunded grant)
    num_free_blocks_after INTEGER,  -- free blocks after the call (NULL for a refunded grant)
    granted BOOLEAN,  -- the slots were allocated
    refusal refusal_check,  -- which check refused it (NULL when granted)
    block_ids INTEGER[]  -- blocks newly allocated by the call
);

-- Every preemption, in order: who was evicted, for whom, and what it cost.
CREATE TABLE _preemptions (
    step INTEGER,  -- engine step
    seq BIGINT,  -- order of events, allocations and preemptions (increases through the trace)
    request_index INTEGER,  -- the victim
    needed_by_index INTEGER,  -- the running request whose allocation failed
    policy scheduling_policy,  -- fcfs (tail victim) or priority (largest priority value, latest arrival)
    num_computed_tokens_discarded INTEGER,  -- computed tokens thrown away (recomputed later)
    num_blocks_freed INTEGER,  -- blocks the victim held
    num_tokens_refunded INTEGER,  -- tokens of this step returned to the budget (victim already scheduled)
    num_preemptions INTEGER,  -- the victim's preemption count, this one included
    num_free_blocks_before INTEGER,  -- free blocks before the preemption
    num_free_blocks_after INTEGER  -- free blocks after it
);

-- Lifecycle events of requests, in order within each step.
CREATE TABLE _events (
    step INTEGER,  -- engine step
    seq BIGINT,  -- order of events, allocations and preemptions (increases through the trace)
    request_index INTEGER,  -- the request
    kind event_kind,  -- arrive, reject, abort, admit, resume, preempt, finish, skip
    detail VARCHAR,  -- finish reason (a finish_reason), skip reason (a waiting_skip_reason), reject reason, the request a preemption made room for
    stop_reason BIGINT  -- the stop token that finished the request (NULL otherwise)
);

-- Speculative decoding, only when it is on: one row per (step, request) scheduled that
-- step or given drafts after it.
CREATE TABLE _spec_decode (
    step INTEGER,  -- engine step
    request_index INTEGER,  -- the request
    scheduled_draft_token_ids BIGINT[],  -- scheduled_spec_decode_tokens of this step ([] none; -1 padding or async placeholder)
    num_accepted INTEGER,  -- of those, accepted when this step's output was processed (NULL: not verified)
    sampled_token_ids BIGINT[],  -- every token the step appended: accepted drafts, then the bonus token (NULL: none)
    proposed_draft_token_ids BIGINT[]  -- drafts update_draft_token_ids gave it after this step (NULL: none)
);

-- Checkpoints: the scheduler's whole state at the start of a step, before that step's
-- arrivals, so a replay can start there (`stepscope replay --from-step`). One row per
-- checkpoint; its requests, blocks and queued batch are in the tables below, keyed by
-- the same step.
CREATE TABLE _checkpoints (
    step INTEGER,  -- the step whose start the state is at
    num_requests INTEGER,  -- unfinished requests (its rows in _checkpoint_requests)
    num_blocks INTEGER,  -- KV blocks in the pool, the null block 0 included (its rows in _checkpoint_blocks)
    finished_req_indices INTEGER[],  -- finished since the last schedule(): the next SchedulerOutput ships them
    preempted_req_indices INTEGER[],  -- preempted since the last schedule()
    prev_step_scheduled_req_indices INTEGER[],  -- scheduled by the last schedule() (their tokens are not shipped again)
    pending_batch_step INTEGER,  -- async: the step whose batch is queued, its output not processed (NULL: none)
    take_ns BIGINT,  -- wall time the engine thread spent taking it
    num_executed_steps INTEGER,  -- prefill cadence: schedule() calls that scheduled a token (NULL: no cadence kept)
    last_prefill_step INTEGER,  -- prefill cadence: the executed step that last carried prefill
    prefill_capacity_bound BOOLEAN,  -- prefill cadence: the last release left a backlog, so nothing is held
    deferred_req_indices INTEGER[]  -- prefill cadence: waiting requests passed over (or waiting for a grammar)
);

-- Every unfinished request in a checkpoint: its counters, tokens, drafts and block table.
-- Its spec (prompt, sampling params, priority, arrival) is its _requests row.
CREATE TABLE _checkpoint_requests (
    step INTEGER,  -- the checkpoint's step
    request_index INTEGER,  -- the request
    queue request_queue,  -- waiting or running
    queue_position INTEGER,  -- place in that queue from 0 (the running list's order; the waiting queue's pop order)
    status request_status,  -- its status
    num_computed_tokens INTEGER,  -- tokens with KV computed (or scheduled: the counter runs ahead)
    output_token_ids BIGINT[],  -- tokens sampled so far (pseudonyms when redacted)
    num_output_placeholders INTEGER,  -- async: tokens being sampled whose output has not come back
    num_in_flight_tokens INTEGER,  -- scheduled tokens whose step's output has not been processed
    num_stale_output_tokens INTEGER,  -- in-flight tokens of steps scheduled before a preemption
    num_preemptions INTEGER,  -- times preempted so far
    is_prefill_chunk BOOLEAN,  -- its last scheduled chunk did not reach the end of its tokens
    spec_token_ids BIGINT[],  -- drafts to verify in its next step (-1: async placeholders)
    is_grammar_ready BOOLEAN,  -- its structured-output grammar has compiled (NULL: no structured output)
    block_ids INTEGER[],  -- its block table, prefix hits first (hybrid: KV cache group 0's; 0: a null entry a window left behind)
    num_cached_blocks INTEGER,  -- leading blocks of that table registered in the prefix cache
    group_block_ids INTEGER[][],  -- the block tables of the KV cache groups after the first, in group order (0: a null entry); [] with one group
    group_num_cached_blocks INTEGER[],  -- num_cached_blocks of the KV cache groups after the first, in group order; [] with one group
    shared_prefix_boundary INTEGER  -- hybrid groups: the full-attention hit its last prefix-cache lookup found beyond the one every group could serve, where its window blocks are cached too (0: none)
);

-- Every block of the pool in a checkpoint: who holds it, where it is in the free queue,
-- and its hash if it is cached.
CREATE TABLE _checkpoint_blocks (
    step INTEGER,  -- the checkpoint's step
    block_id INTEGER,  -- the KV block
    ref_cnt INTEGER,  -- requests holding it
    free_position INTEGER,  -- place in the free queue from 0, the next allocated first (NULL: held, or the null block)
    block_hash BLOB,  -- the prefix-cache hash of its tokens (NULL: not cached)
    cache_position INTEGER  -- place in the prefix-cache index by insertion (a lookup returns the earliest of equal hashes; NULL: not cached)
);

-- Async scheduling: the batch queued at a checkpoint, scheduled and run, its output not
-- processed yet. One row per request in it, in the output's order.
CREATE TABLE _checkpoint_batches (
    step INTEGER,  -- the checkpoint's step
    position INTEGER,  -- place in the batch's num_scheduled_tokens from 0
    request_index INTEGER,  -- the request
    num_scheduled_tokens INTEGER,  -- tokens scheduled for it
    scheduled_draft_token_ids BIGINT[],  -- its scheduled_spec_decode_tokens ([]: none)
    sampled_token_ids BIGINT[]  -- what the model sampled for it (NULL: not in the runner's output)
);
