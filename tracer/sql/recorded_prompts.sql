-- Each recorded request's prompt, in request order: (request_index INTEGER,
-- prompt_token_ids BIGINT[]). No parameters.
SELECT request_index, prompt_token_ids FROM recorded.main._requests ORDER BY request_index
