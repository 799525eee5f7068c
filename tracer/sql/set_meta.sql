-- Sets one `_meta` fact: $1 the key (VARCHAR), $2 its value (VARCHAR), replacing any
-- value the key had. Returns nothing.
INSERT OR REPLACE INTO _meta VALUES ($1, $2)
