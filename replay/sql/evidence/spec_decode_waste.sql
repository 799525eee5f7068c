-- Evidence of spec_decode_waste: each request's drafts and those accepted, worst first.
SELECT request_id, num_draft_tokens, num_accepted_tokens, acceptance_rate
FROM spec_acceptance
WHERE per = 'request'
ORDER BY acceptance_rate
