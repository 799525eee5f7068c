-- Hashes of the names the scheduled rows refer to by code: each request's id by its index
-- (kind 'request') and each `request_kind` label by its enum code (kind 'kind'), so two
-- traces compare by name: (kind, code, name_hash). No parameters.
SELECT 'request' AS kind, request_index AS code, hash(request_id) AS name_hash
FROM _requests
UNION ALL
SELECT 'kind', list_position(enum_range(NULL::request_kind), k) - 1, hash(k)
FROM unnest(enum_range(NULL::request_kind)) AS labels(k)
