//! `watch`: one line per new pending approval, as it arrives, for piping to a chat or paging
//! tool (issue 21). It sleeps until the database's files change (`ChangeWatch`: inotify), then
//! reads the approvals past the last rowid it announced; between commits it uses no CPU.
//! Each line is flushed as it is written. On PostgreSQL it follows the chain and waits for the
//! sequencer's NOTIFY instead ([`run_pg`]).

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::CommandError;
use super::cli::WatchArgs;
use super::open::{Reading, fail};
use super::out::{Raws, id_field};
use super::text::clean_bytes;
use crate::runtime::store::{ArrivedApproval, ChangeWatch};

/// How long one wait lasts before `data_version` is asked anyway (a missed event costs at
/// most this).
const WAKE: Duration = Duration::from_secs(30);

/// Approvals read per query.
const BATCH: u32 = 500;

pub fn run(r: Reading<'_>, a: &WatchArgs) -> Result<(), CommandError> {
    let (db, store, json_out, out) = r.parts();
    let watch = ChangeWatch::new(&db, Duration::from_millis(500));
    let mut version = store.data_version().map_err(fail)?;
    follow(
        || store.last_approval_rowid().map_err(fail),
        |after| store.approvals_after(after, BATCH).map_err(fail),
        || {
            version = store.wait_for_commit(&watch, version, WAKE).map_err(fail)?;
            Ok(())
        },
        (json_out, out, a),
        &mut Progress::default(),
    )
}

/// Announces the approvals as they arrive, until `--count` are told: from the newest
/// (`latest`), or from the start with `--existing`. `read` gives the approvals past a mark and
/// the mark past them; when a read brings nothing new, `wait` waits for a change.
/// `at` keeps where it is across calls (a watch that connects again goes on from there).
fn follow(
    latest: impl FnOnce() -> Result<i64, CommandError>,
    read: impl Fn(i64) -> Result<(Vec<ArrivedApproval>, i64), CommandError>,
    mut wait: impl FnMut() -> Result<(), CommandError>,
    (json_out, out, a): (bool, &mut super::out::Out, &WatchArgs),
    at: &mut Progress,
) -> Result<(), CommandError> {
    let mut after = match at.after {
        Some(after) => after,
        None if a.existing => 0,
        None => latest()?,
    };
    at.after = Some(after);
    loop {
        loop {
            let (batch, last) = read(after)?;
            if announce(&batch, json_out, out, a, &mut at.told)? {
                return Ok(());
            }
            if last == after {
                break;
            }
            after = last;
            at.after = Some(after);
        }
        wait()?;
    }
}

/// Where a watch is: the mark past the last approval announced (`None` before the first
/// read), and how many it has announced.
#[derive(Debug, Default)]
struct Progress {
    after: Option<i64>,
    told: u64,
}

/// Prints each approval of `batch`, flushed; true once `--count` are told.
fn announce(
    batch: &[ArrivedApproval],
    json_out: bool,
    out: &mut super::out::Out,
    a: &WatchArgs,
    told: &mut u64,
) -> Result<bool, CommandError> {
    for ap in batch {
        if json_out {
            out.jsonl(&line_json(ap), &Raws::default())?;
        } else {
            out.line(&line_text(ap))?;
        }
        out.flush()?;
        *told += 1;
        if a.count != 0 && *told >= a.count {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `watch` on PostgreSQL: the approvals announced by their chained `approval.requested`
/// events, in chain order (commit order there; `ord` is not), waiting between reads for a
/// sequencer's NOTIFY on a connection of its own (decision 0084). The same lines as on
/// SQLite; `--existing` follows the chain from its start. When the server drops its
/// connections (a restart), it says so on stderr, connects again (waiting 1 s, doubling to
/// 30 s) and goes on from the last approval it announced: none is missed or told twice.
#[cfg(feature = "postgres")]
pub fn run_pg(
    store: &crate::pgstore::PgStore,
    json_out: bool,
    out: &mut super::out::Out,
    a: &WatchArgs,
) -> Result<(), CommandError> {
    let say = |line: &str| {
        use std::io::Write;
        let _ = writeln!(std::io::stderr().lock(), "watch: {line}");
    };
    let never = std::sync::atomic::AtomicBool::new(false);
    let mut at = Progress::default();
    let mut again: Option<crate::pgstore::PgStore> = None;
    loop {
        let s = again.as_ref().unwrap_or(store);
        let e = match follow_pg(s, (json_out, out, a), &mut at) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        // Lost, or refused while the server answers: one plain read tells which.
        if s.server_clock().is_ok() {
            return Err(e);
        }
        say(&format!(
            "the database's connection was lost ({}); connecting again",
            super::text::clean(&e.to_string(), 400)
        ));
        again = super::open::pg_store_again(s.url(), &never, &say);
        say("connected again; going on from the last approval announced");
    }
}

/// One connection's share of [`run_pg`]: follows the chain on `store` until `--count` are
/// told or a read fails.
#[cfg(feature = "postgres")]
fn follow_pg(
    store: &crate::pgstore::PgStore,
    how: (bool, &mut super::out::Out, &WatchArgs),
    at: &mut Progress,
) -> Result<(), CommandError> {
    let pg =
        |e: crate::pgstore::PgError| CommandError::Failed(super::text::clean(&e.to_string(), 4000));
    store.prepare_console_reads().map_err(fail)?;
    // Listening before the first read: a batch chained after it is never missed.
    let mut listener = crate::pgstore::Listener::open(store.url()).map_err(pg)?;
    follow(
        || store.watch_start().map_err(fail),
        |after| store.approvals_requested_after(after, BATCH).map_err(fail),
        || listener.wait(WAKE).map(|_changed| ()).map_err(pg),
        how,
        at,
    )
}

fn field(b: &[u8]) -> String {
    if b.is_empty() {
        "-".into()
    } else {
        clean_bytes(b, 80)
    }
}

/// The presentation's `title`, when it is a JSON object with a string title.
fn title(ap: &ArrivedApproval) -> Option<String> {
    let v: Value = serde_json::from_slice(&ap.presentation).ok()?;
    v.get("title")?.as_str().map(str::to_string)
}

/// A tool's name, marked when the read cut it (the name is longer than the bytes it holds).
fn tool_text(tool: &[u8], len: u64) -> String {
    let cut = len.saturating_sub(tool.len() as u64);
    if cut == 0 {
        field(tool)
    } else {
        format!("{} [cut: {cut} more bytes]", field(tool))
    }
}

fn line_text(ap: &ArrivedApproval) -> String {
    let what = match (title(ap), &ap.tool) {
        (Some(t), _) => clean_bytes(t.as_bytes(), 120),
        (None, Some(tool)) => tool_text(tool, ap.tool_len),
        (None, None) => "(no readable tool)".into(),
    };
    format!(
        "pending  {}  run {}  approval {}  {}  {}  expires {}",
        field(&ap.created_at),
        field(&ap.run_id),
        field(&ap.id),
        field(&ap.kind),
        what,
        field(&ap.expires_at),
    )
}

fn line_json(ap: &ArrivedApproval) -> Value {
    let mut m = Map::new();
    id_field(&mut m, "id", &ap.id);
    id_field(&mut m, "run_id", &ap.run_id);
    id_field(&mut m, "step_id", &ap.step_id);
    id_field(&mut m, "kind", &ap.kind);
    id_field(&mut m, "created_at", &ap.created_at);
    if !ap.expires_at.is_empty() {
        id_field(&mut m, "expires_at", &ap.expires_at);
    }
    match &ap.tool {
        Some(t) => {
            id_field(&mut m, "tool", t);
            if ap.tool_len > t.len() as u64 {
                m.insert("tool_bytes".into(), json!(ap.tool_len));
            }
        }
        None => {
            m.insert("tool".into(), Value::Null);
        }
    }
    let whole = ap.presentation_len as usize == ap.presentation.len();
    match serde_json::from_slice::<Value>(&ap.presentation) {
        Ok(v) if whole => {
            m.insert("presentation".into(), v);
        }
        _ => {
            m.insert("presentation".into(), Value::Null);
            m.insert("presentation_bytes".into(), json!(ap.presentation_len));
        }
    }
    Value::Object(m)
}
