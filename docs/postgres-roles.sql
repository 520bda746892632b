-- Least-privilege roles for countersign on PostgreSQL (docs/postgres.md).
--
-- Run it as the owner role (the one that created the tables: the first `countersign copy` into
-- the database, or a first open), in countersign's database, after that first migration. The
-- owner needs CREATEROLE (or a superuser runs it); run it with `psql -v ON_ERROR_STOP=1`, or
-- psql goes on past a refusal and exits 0. It
-- can be run again (after a later migration, for instance). The two roles it creates cannot
-- log in: grant them to login roles, e.g.  GRANT countersign_reviewer TO alice;
--
--   countersign_runtime   the agents' runtime (and the MCP proxy): creates runs, steps,
--                         approvals, model calls, tool specs and the proxy's call-index rows,
--                         moves them on, commits events to the inbox; never
--                         deletes anything and never writes the chain itself. A runtime
--                         process chains events too (its driver runs a sequencer, decision
--                         0083): grant its login countersign_sequencer as well.
--   countersign_reviewer  people deciding and cancelling: reads everything, records decisions
--                         (status, who, when, note) and cancels, commits the events that say
--                         so to the inbox; cannot write an event on the chain or the chain's
--                         head, cannot change what an approval asked for or its hash, cannot
--                         delete anything.
--   countersign_sequencer the process(es) that chain the inbox's events (decision 0081): takes
--                         them out of the inbox, appends them to events and moves the head;
--                         cannot change or delete an event once chained. Grant it to the login
--                         of whatever runs the sequencer (a runtime process, or one of its own).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'countersign_runtime') THEN
        CREATE ROLE countersign_runtime NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'countersign_reviewer') THEN
        CREATE ROLE countersign_reviewer NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'countersign_sequencer') THEN
        CREATE ROLE countersign_sequencer NOLOGIN;
    END IF;
END
$$;

REVOKE ALL ON countersign_schema, runs, steps, events, event_chain, event_inbox, approvals,
              model_calls, tool_specs, proxy_calls
    FROM PUBLIC, countersign_runtime, countersign_reviewer, countersign_sequencer;

GRANT SELECT ON countersign_schema, runs, steps, events, event_chain, event_inbox, approvals,
                model_calls, tool_specs, proxy_calls
    TO countersign_runtime, countersign_reviewer, countersign_sequencer;

-- The runtime.
GRANT INSERT ON runs, steps, approvals, model_calls, tool_specs, event_inbox TO countersign_runtime;
GRANT UPDATE (status, reason, reason_detail, step_count, started_at, finished_at, result_json,
              model_calls, input_tokens, output_tokens, cached_input_tokens,
              estimated_cost_micros, active_ms, lease_owner, lease_expires_at)
    ON runs TO countersign_runtime;
GRANT UPDATE (status, decision_json, policy_json, observation_json, observation_hash,
              started_at, finished_at, spec_hash, policy_id)
    ON steps TO countersign_runtime;
-- The worker's wake-up is LISTEN on the sequencer's channel, which needs no grant.
GRANT UPDATE (status, decided_at, decided_by, note) ON approvals TO countersign_runtime;
GRANT UPDATE (status, input_tokens, output_tokens, cached_input_tokens, cost_micros, latency_ms,
              error, completed_at)
    ON model_calls TO countersign_runtime;
-- The MCP proxy (`countersign mcp-proxy`, decision 0085) is a runtime process: its call index
-- claims a request key (a new row, the previous open one closed) and caches a run's outcome.
GRANT INSERT ON proxy_calls TO countersign_runtime;
GRANT UPDATE (open, closed_at, settled_at, outcome) ON proxy_calls TO countersign_runtime;

-- The reviewers: decide, deny, cancel.
GRANT INSERT ON event_inbox TO countersign_reviewer;
GRANT UPDATE (status, decided_at, decided_by, note) ON approvals TO countersign_reviewer;
GRANT UPDATE (status, reason, reason_detail, finished_at, result_json, lease_owner, lease_expires_at)
    ON runs TO countersign_reviewer;
GRANT UPDATE (status, observation_json, observation_hash, finished_at)
    ON steps TO countersign_reviewer;

-- The sequencer: the inbox's events onto the chain.
GRANT DELETE ON event_inbox TO countersign_sequencer;
GRANT INSERT ON events TO countersign_sequencer;
GRANT UPDATE ON event_chain TO countersign_sequencer;
