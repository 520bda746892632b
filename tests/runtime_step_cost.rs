//! The work of one driver step, counted (issue 13 item 7): the statements a step runs on the
//! store's connection, as SQLite's statement trace sees them. Counts, not times, so the bound
//! holds on a loaded machine too.

mod runtime_support;

use std::ffi::{CStr, c_int, c_uint, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use countersign::runtime::agent::{self, ScriptedAgent};
use countersign::runtime::driver::Driver;
use countersign::runtime::policy::DefaultPolicy;
use countersign::runtime::store::StoreError;
use countersign::runtime::tools::SideEffect;
use runtime_support::*;
use rusqlite::ffi;

/// Statements run on traced connections (a trigger's own statements, reported as comments
/// starting with `--`, are not separate statements).
static STATEMENTS: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn on_stmt(
    _mask: c_uint,
    _ctx: *mut c_void,
    _p: *mut c_void,
    x: *mut c_void,
) -> c_int {
    // SAFETY: for SQLITE_TRACE_STMT, `x` is the statement's SQL text or NULL.
    let trigger = !x.is_null()
        && unsafe { CStr::from_ptr(x as *const _) }
            .to_bytes()
            .starts_with(b"--");
    if !trigger {
        STATEMENTS.fetch_add(1, Ordering::SeqCst);
    }
    0
}

/// Statements the store's connection runs for a run of `n` steps: n − 1 allowed read-only
/// tool calls, then `complete`.
fn statements_of_a_run(n: usize) -> usize {
    let db = db();
    db.store
        .write(|tx| {
            // SAFETY: the handle is the store's open connection; the callback has the
            // signature SQLite calls and touches only an atomic.
            let rc = unsafe {
                ffi::sqlite3_trace_v2(
                    tx.conn().handle(),
                    ffi::SQLITE_TRACE_STMT as c_uint,
                    Some(on_stmt),
                    std::ptr::null_mut(),
                )
            };
            assert_eq!(rc, ffi::SQLITE_OK);
            Ok::<_, StoreError>(())
        })
        .unwrap();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let tools = registry(vec![echo("lookup", SideEffect::ReadOnly, calls)]);
    let mut script: Vec<_> = (0..n - 1)
        .map(|i| agent::tool_call("lookup", &format!(r#"{{"i":{i}}}"#)))
        .collect();
    script.push(agent::complete(""));
    let cfg = config(
        &db.store,
        tools,
        Arc::new(DefaultPolicy),
        ScriptedAgent::new(script),
    );
    let driver = Driver::new(cfg).unwrap();
    let mut l = limits();
    l.max_steps = n as i64 + 1;
    let before = STATEMENTS.load(Ordering::SeqCst);
    let run = rt()
        .block_on(driver.start_with_id("run-1", "count", l))
        .unwrap();
    assert_eq!(run.step_count as usize, n, "{}", run.reason_detail);
    STATEMENTS.load(Ordering::SeqCst) - before
}

#[test]
fn an_allowed_tool_call_step_runs_at_most_28_statements() {
    // The difference between a 30-step and a 10-step run: twenty steps' own statements,
    // without the run's creation and ending.
    let (short, long) = (statements_of_a_run(10), statements_of_a_run(30));
    let per_step = (long - short) as f64 / 20.0;
    // Four write transactions (BEGIN, COMMIT), the run read before the step, one read of the
    // run's state and lease per compare-and-set, one read of the chain head per transaction
    // that appends, and the step's own writes and five events: 38 before issue 13 item 7.
    assert!(per_step <= 28.0, "{per_step} statements per step");
}
