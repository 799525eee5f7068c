-- One step given by its columns, as a row of the table a break condition is evaluated on
-- (`StepCondition.holds`; a trace's steps read as condition_steps.sql gives them): $step,
-- $idle, $num_scheduled_tokens, $num_scheduled_reqs, $num_preemptions, $num_finished,
-- $num_free_blocks_after_schedule, $running_pass_end, $admission_stop, and the lists of
-- request ids $scheduled_ids, $preempted_ids, $finished_ids and $arrived_ids.
SELECT
    $step::INTEGER AS step,
    $idle::BOOLEAN AS idle,
    $num_scheduled_tokens::INTEGER AS num_scheduled_tokens,
    $num_scheduled_reqs::INTEGER AS num_scheduled_reqs,
    $num_preemptions::INTEGER AS num_preemptions,
    $num_finished::INTEGER AS num_finished,
    $num_free_blocks_after_schedule::INTEGER AS num_free_blocks_after_schedule,
    $running_pass_end::VARCHAR AS running_pass_end,
    $admission_stop::VARCHAR AS admission_stop,
    $scheduled_ids::VARCHAR[] AS scheduled_ids,
    $preempted_ids::VARCHAR[] AS preempted_ids,
    $finished_ids::VARCHAR[] AS finished_ids,
    $arrived_ids::VARCHAR[] AS arrived_ids
