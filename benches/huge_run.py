import sqlite3, sys
db, steps, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
c = sqlite3.connect(db)
limits = '{"max_steps":5000,"max_consecutive_tool_failures":3,"loop_threshold":5}'
for rid, n, big in (("huge-run", steps, True), ("small-run", 5, False)):
    c.execute("insert into runs (id, goal, status, limits_json, step_count, created_at, started_at) values (?,?,?,?,?,?,?)",
              (rid, "a run with many steps", "COMPLETED", limits, n, "2026-10-01T09:00:00Z", "2026-10-01T09:00:00Z"))
    for i in range(n):
        content = '{"blob":"' + ("x" * size if big else "small") + '"}'
        obs = '{"kind":"tool_result","content":' + content + ',"summary":"step ' + str(i) + '"}'
        dec = '{"kind":"tool_call","tool":"get_order","args":{"order_id":"ord_1001"}}'
        c.execute("insert into steps (id, run_id, idx, status, decision_json, observation_json, started_at) values (?,?,?,?,?,?,?)",
                  ("%s-%d" % (rid, i), rid, i, "done", dec, obs, "2026-10-01T09:00:00Z"))
c.commit()
