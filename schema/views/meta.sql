-- Facts about the trace: schema version, tool, engine, model, device, complete or not.
SELECT key, value FROM _meta
