//! Issue 18, "the console knows proxy runs", end to end: a real `countersign mcp-proxy` process
//! holds a host's write for approval against the suite's MCP server, and the console opened on
//! the proxy's database shows the call in the queue, its detail (server, upstream tool,
//! model-visible name, the arguments as the host sent them) and, on the run screen, that the
//! host's next identical call collects it.

mod console_support;
#[path = "mcp_support/host.rs"]
mod host;
mod mcp_support;

use console_support::*;
use host::*;
use mcp_support::*;

#[test]
fn a_held_proxy_call_is_in_the_queue_with_what_the_host_sent_and_the_host_collects_it() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "normal", RULES, r#""hold": "0s""#);
    pin(&cfg);
    let mut h = Host::start(&cfg);
    // The host's own bytes: key order and spacing as sent.
    let (w, _) = h.call(
        "fs_write_file",
        r#"{"text": "pay 4000", "path": "/srv/ledger"}"#,
    );
    assert!(w.starts_with("PENDING_APPROVAL: "), "{w}");
    let id = approval_in(&w);
    let (code, err) = h.close();
    assert_eq!(code, 0, "{err}");
    let db = dir.path().join("runs.db");
    let run = host::run_of(&db, &id);

    let mut c = Harness::open(&db, 120, 40);
    let s = c.screen();
    assert!(
        s.contains("fs_write_file"),
        "in the queue like any other: {s}"
    );
    c.command(&format!("approval {id}"));
    let s = c.screen();
    for shown in [
        "May the model call write_file on server fs with these arguments?",
        "fs_write_file",
        "remote_mutation",
        "/srv/ledger",
        "pay 4000",
    ] {
        assert!(s.contains(shown), "{shown:?} on the approval's page: {s}");
    }
    c.command(&format!("run {run}"));
    let s = c.screen();
    assert!(
        s.contains("collect by the MCP host's next identical call (proxy session s1)"),
        "{s}"
    );
}
