//! Key handling for `update`: overlays first, then the keymap's action on the top screen.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::app::*;
use super::data::*;
use super::keymap::Action;
use super::text;

const STATUSES: [&str; 6] = [
    "WAITING_FOR_APPROVAL",
    "RUNNING",
    "INTERRUPTED",
    "COMPLETED",
    "FAILED",
    "CANCELLED",
];

pub fn on_key(app: &mut App, k: KeyEvent) -> Vec<Effect> {
    if k.kind == KeyEventKind::Release {
        app.dirty = false;
        return vec![];
    }
    let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
    if ctrl && k.code == KeyCode::Char('c') {
        app.quit = true;
        return vec![Effect::Quit];
    }
    if ctrl && k.code == KeyCode::Char('z') {
        return vec![Effect::Suspend];
    }
    if app.overlay.is_some() {
        return on_overlay_key(app, k);
    }
    app.notice = None;
    let Some(a) = action_of(app, &k) else {
        return vec![];
    };
    on_action(app, a)
}

fn on_overlay_key(app: &mut App, k: KeyEvent) -> Vec<Effect> {
    let Some(ov) = app.overlay.take() else {
        return vec![];
    };
    match ov {
        Overlay::Filter(mut t) => match k.code {
            KeyCode::Esc => vec![],
            KeyCode::Enter => apply_filter(app, t.text),
            _ => {
                t.edit_key(&k);
                app.overlay = Some(Overlay::Filter(t));
                vec![]
            }
        },
        Overlay::Command(mut t) => match k.code {
            KeyCode::Esc => vec![],
            KeyCode::Enter => run_command(app, t.text.trim()),
            _ => {
                t.edit_key(&k);
                app.overlay = Some(Overlay::Command(t));
                vec![]
            }
        },
        Overlay::Confirm(mut c) => match k.code {
            KeyCode::Esc => {
                app.notice = Some((Level::Info, "nothing was changed".into()));
                vec![]
            }
            KeyCode::Enter => {
                let reason = c.reason.as_ref().map(|r| r.text.trim().to_string());
                if reason.as_deref() == Some("") {
                    app.notice = Some((Level::Error, "a reason is required".into()));
                    app.overlay = Some(Overlay::Confirm(c));
                    return vec![];
                }
                let by = app.cfg.by.clone();
                let note = reason.unwrap_or_default();
                let (cmd, label) = match c.what.clone() {
                    Pending::Approve {
                        run,
                        approval,
                        hash,
                    } => (
                        Command::Approve {
                            run,
                            approval,
                            shown_hash: hash,
                            by,
                            note,
                        },
                        "approving",
                    ),
                    Pending::Reject {
                        run,
                        approval,
                        hash,
                    } => (
                        Command::Reject {
                            run,
                            approval,
                            shown_hash: hash,
                            by,
                            note,
                        },
                        "rejecting",
                    ),
                    Pending::Cancel { run } => (
                        Command::Cancel {
                            run,
                            by,
                            reason: note,
                        },
                        "cancelling",
                    ),
                    Pending::Resume { run } => (Command::Resume { run }, "resuming"),
                };
                let id = app.next_id + 1;
                app.next_id = id;
                app.running.push((id, label.into()));
                app.notice = Some((Level::Info, format!("{label}…")));
                vec![Effect::Command(id, cmd)]
            }
            _ => {
                if let Some(r) = &mut c.reason {
                    r.edit_key(&k);
                }
                app.overlay = Some(Overlay::Confirm(c));
                vec![]
            }
        },
    }
}

impl TextInput {
    pub(crate) fn edit_key(&mut self, k: &KeyEvent) {
        match k.code {
            KeyCode::Char('u') if k.modifiers.contains(KeyModifiers::CONTROL) => self.text.clear(),
            KeyCode::Char(c) if !k.modifiers.contains(KeyModifiers::CONTROL) => self.text.push(c),
            KeyCode::Backspace => {
                self.text.pop();
            }
            _ => {}
        }
    }
}

fn apply_filter(app: &mut App, f: String) -> Vec<Effect> {
    match app.stack.last_mut() {
        Some(Screen::Queue(s)) => {
            s.filter = f;
            s.list = Default::default();
        }
        Some(Screen::Runs(s)) => {
            s.filter = f;
            s.list = Default::default();
        }
        _ => return vec![],
    }
    reload(app)
}

fn reload(app: &mut App) -> Vec<Effect> {
    app.start()
}

pub(crate) fn run_command(app: &mut App, cmd: &str) -> Vec<Effect> {
    let mut parts = cmd.split_whitespace();
    let head = parts.next().unwrap_or("");
    let arg = parts.next();
    match (head, arg) {
        ("q" | "quit" | "q!", _) => {
            app.quit = true;
            vec![Effect::Quit]
        }
        ("queue", _) => {
            app.stack.truncate(1);
            reload(app)
        }
        ("runs", _) => {
            app.stack.truncate(1);
            on_action(app, Action::Runs)
        }
        ("damaged", _) => {
            app.stack.truncate(1);
            on_action(app, Action::Damaged)
        }
        ("help", _) => on_action(app, Action::Help),
        ("run", Some(id)) => app.push_run(Key::from(id)),
        ("approval", Some(id)) => app.push_approval(Key::from(id)),
        ("verify", _) => {
            let id = app.next_id + 1;
            app.next_id = id;
            app.running.push((id, "verify".into()));
            app.notice = Some((Level::Info, "verifying the event chain…".into()));
            vec![Effect::Query(id, Query::Verify)]
        }
        ("", _) => vec![],
        _ => {
            app.notice = Some((
                Level::Error,
                format!(
                    "unknown command; try :queue :runs :run ID :damaged :verify :q ({} chars ignored)",
                    cmd.len()
                ),
            ));
            vec![]
        }
    }
}

fn move_list<T>(
    app_rows: u16,
    l: &mut super::nav::ListView<T>,
    a: Action,
    id_of: impl Fn(&T) -> Key,
) -> bool {
    let page = i64::from(app_rows.max(1));
    let need = match a {
        Action::Up => l.move_by(-1),
        Action::Down => l.move_by(1),
        Action::Top => l.set_cursor(0),
        Action::Bottom => l.jump_to_end(),
        Action::PageDown => l.move_by(page),
        Action::PageUp => l.move_by(-page),
        Action::HalfDown => l.move_by(page / 2),
        Action::HalfUp => l.move_by(-page / 2),
        _ => return false,
    };
    l.scroll_into_view(app_rows);
    l.remember(id_of);
    need
}

fn is_move(a: Action) -> bool {
    matches!(
        a,
        Action::Up
            | Action::Down
            | Action::Top
            | Action::Bottom
            | Action::PageDown
            | Action::PageUp
            | Action::HalfDown
            | Action::HalfUp
    )
}

pub(crate) fn on_action(app: &mut App, a: Action) -> Vec<Effect> {
    let rows = app.list_rows();
    match a {
        Action::Quit if app.stack.len() <= 1 => {
            app.quit = true;
            return vec![Effect::Quit];
        }
        Action::Quit | Action::Back => {
            if app.stack.len() > 1 {
                app.stack.pop();
                app.relayout();
                return reload(app);
            }
            return vec![];
        }
        Action::Help => {
            app.stack.push(Screen::Help { scroll: 0 });
            return vec![];
        }
        Action::Command => {
            app.overlay = Some(Overlay::Command(TextInput::default()));
            return vec![];
        }
        Action::Queue => return run_command(app, "queue"),
        Action::Runs => {
            if !matches!(app.top(), Screen::Runs(_)) {
                app.stack.truncate(1);
                return app_push_runs(app);
            }
            return vec![];
        }
        Action::Damaged => {
            app.stack.truncate(1);
            app.stack.push(Screen::Damaged(DamagedScreen {
                list: Default::default(),
            }));
            return reload(app);
        }
        Action::Refresh => {
            let mut fx = app.reload_all();
            fx.dedup();
            return fx;
        }
        _ => {}
    }
    let can_resume = app.cfg.can_resume;
    let read_only = app.cfg.read_only;
    let top = app.stack.len() - 1;
    let mut fx = Vec::new();
    let mut need = false;
    let mut copy: Option<String> = None;
    let mut push: Option<(bool, Key)> = None; // (is_run, id)
    let mut confirm: Option<Result<Confirm, String>> = None;
    let mut relayout = false;
    match &mut app.stack[top] {
        Screen::Queue(s) => {
            if is_move(a) {
                need = move_list(rows, &mut s.list, a, |r| r.approval_id.clone());
            }
            match a {
                Action::Open => push = s.list.selected().map(|r| (false, r.approval_id.clone())),
                Action::Filter => {
                    app.overlay = Some(Overlay::Filter(TextInput {
                        text: s.filter.clone(),
                    }))
                }
                Action::Copy => {
                    copy = s
                        .list
                        .selected()
                        .map(|r| text::escaped(r.approval_id.as_bytes()))
                }
                Action::Approve | Action::Reject => {
                    app.notice = Some((
                        Level::Info,
                        "open the approval (enter) and read it to decide".into(),
                    ))
                }
                _ => {}
            }
        }
        Screen::Runs(s) => {
            if is_move(a) {
                need = move_list(rows, &mut s.list, a, |r| r.id.clone());
            }
            match a {
                Action::Open => push = s.list.selected().map(|r| (true, r.id.clone())),
                Action::Filter => {
                    app.overlay = Some(Overlay::Filter(TextInput {
                        text: s.filter.clone(),
                    }))
                }
                Action::Copy => copy = s.list.selected().map(|r| text::escaped(r.id.as_bytes())),
                Action::StatusFilter => {
                    let i = s
                        .status
                        .as_deref()
                        .and_then(|x| STATUSES.iter().position(|y| *y == x));
                    s.status = match i {
                        None => Some(STATUSES[0].to_string()),
                        Some(i) if i + 1 < STATUSES.len() => Some(STATUSES[i + 1].to_string()),
                        Some(_) => None,
                    };
                    s.list = Default::default();
                    need = true;
                }
                _ => {}
            }
        }
        Screen::Damaged(s) => {
            if is_move(a) {
                need = move_list(rows, &mut s.list, a, DamagedRow::key);
            }
            match a {
                Action::Open => push = s.list.selected().map(|r| (true, r.run_id.clone())),
                Action::Copy => copy = s.list.selected().map(|r| text::bytes_escaped(&r.raw)),
                Action::CancelRun => {
                    confirm = Some(match s.list.selected() {
                        Some(r) if !read_only => Ok(cancel_confirm(&r.run_id, None)),
                        Some(_) => {
                            Err("read-only: actions are off (started with --read-only)".into())
                        }
                        None => Err("no row selected".into()),
                    })
                }
                _ => {}
            }
        }
        Screen::RunDetail(s) => {
            let tab_rows = rows.saturating_sub(5).max(1);
            if is_move(a) {
                need = match s.tab {
                    Tab::Steps => move_list(tab_rows, &mut s.steps, a, |r| r.id.clone()),
                    Tab::Events => {
                        move_list(tab_rows, &mut s.events, a, |r| Key::from(r.seq.to_string()))
                    }
                    Tab::Approvals => move_list(tab_rows, &mut s.approvals, a, |r| r.id.clone()),
                    Tab::ModelCalls => move_list(tab_rows, &mut s.calls, a, |r| r.id.clone()),
                };
            }
            match a {
                Action::NextTab | Action::PrevTab => {
                    let i = Tab::ALL.iter().position(|t| *t == s.tab).unwrap_or(0);
                    let n = Tab::ALL.len();
                    s.tab = Tab::ALL[if a == Action::NextTab {
                        (i + 1) % n
                    } else {
                        (i + n - 1) % n
                    }];
                    need = true;
                }
                Action::Open if s.tab == Tab::Approvals => {
                    push = s.approvals.selected().map(|r| (false, r.id.clone()))
                }
                Action::Copy => copy = Some(text::escaped(s.id.as_bytes())),
                Action::CancelRun => {
                    let status = s.header.as_ref().map(|h| h.status.as_str()).unwrap_or("");
                    confirm = Some(if read_only {
                        Err("read-only: actions are off (started with --read-only)".into())
                    } else if matches!(status, "COMPLETED" | "FAILED" | "CANCELLED") {
                        Err(format!("run is already finished ({status})"))
                    } else {
                        Ok(cancel_confirm(&s.id, s.header.as_ref()))
                    });
                }
                Action::ResumeRun => {
                    let status = s
                        .header
                        .as_ref()
                        .map(|h| h.status.clone())
                        .unwrap_or_default();
                    confirm = Some(if read_only {
                        Err("read-only: actions are off (started with --read-only)".into())
                    } else if !can_resume {
                        Err("this build registers no tools to resume runs with".into())
                    } else if !s.header.as_ref().is_some_and(|h| h.resumable) {
                        Err("this build does not register the tools this run needs; its own runtime resumes it".into())
                    } else if !matches!(
                        status.as_str(),
                        "WAITING_FOR_APPROVAL" | "RUNNING" | "INTERRUPTED"
                    ) {
                        Err(format!(
                            "run is {status}; only waiting or interrupted runs resume"
                        ))
                    } else {
                        Ok(Confirm {
                            what: Pending::Resume { run: s.id.clone() },
                            lines: vec![
                                ("resume run".into(), s.id.clone().into_bytes()),
                                ("status".into(), status.into_bytes()),
                            ],
                            warnings: vec!["the run's next step executes its tool for real".into()],
                            reason: None,
                        })
                    });
                }
                _ => {}
            }
        }
        Screen::Approval(s) => {
            let body = usize::from(app.size.1.saturating_sub(4).max(1));
            let n = s.view.len();
            let starts: Vec<usize> = s
                .view
                .iter()
                .scan(0, |acc, v| {
                    let st = *acc;
                    *acc += v.lines.len();
                    Some(st)
                })
                .collect();
            let total: usize = s.view.iter().map(|v| v.lines.len()).sum();
            let max_scroll = total.saturating_sub(body);
            match a {
                Action::NextTab | Action::PrevTab if s.inspect => {
                    let pages = s.fields.get(s.cursor).map_or(1, |f| {
                        super::screens::approval::inspector_pages(app.size, &f.value)
                    });
                    let last = pages.saturating_sub(1);
                    s.inspect_page = if a == Action::NextTab {
                        (s.inspect_page + 1).min(last)
                    } else {
                        s.inspect_page.min(last).saturating_sub(1)
                    };
                }
                Action::Up | Action::Down | Action::Top | Action::Bottom => {
                    s.inspect_page = 0;
                    s.cursor = match a {
                        Action::Up => s.cursor.saturating_sub(1),
                        Action::Down => (s.cursor + 1).min(n.saturating_sub(1)),
                        Action::Top => 0,
                        _ => n.saturating_sub(1),
                    };
                    if let Some(st) = starts.get(s.cursor) {
                        let end = st + s.view[s.cursor].lines.len();
                        if *st < s.scroll {
                            s.scroll = *st;
                        } else if end > s.scroll + body {
                            s.scroll = (end.saturating_sub(body)).min(*st);
                        }
                    }
                }
                Action::PageDown | Action::HalfDown | Action::PageUp | Action::HalfUp => {
                    let step = if matches!(a, Action::PageDown | Action::PageUp) {
                        body
                    } else {
                        body / 2
                    };
                    s.scroll = if matches!(a, Action::PageDown | Action::HalfDown) {
                        (s.scroll + step.max(1)).min(max_scroll)
                    } else {
                        s.scroll.saturating_sub(step.max(1))
                    };
                    // The cursor follows to the first field visible.
                    if let Some(i) = starts.iter().rposition(|st| *st <= s.scroll) {
                        if i != s.cursor {
                            s.inspect_page = 0;
                        }
                        s.cursor = i;
                    }
                }
                Action::Expand => {
                    if !s.expanded.remove(&s.cursor) {
                        s.expanded.insert(s.cursor);
                    }
                    relayout = true;
                }
                Action::Strict => {
                    s.strict = !s.strict;
                    relayout = true;
                }
                Action::Inspect => {
                    s.inspect = !s.inspect;
                    s.inspect_page = 0;
                }
                Action::Copy => {
                    copy = s.fields.get(s.cursor).map(|f| {
                        format!("{}: {}", text::escaped(&f.label), text::escaped(&f.value))
                    })
                }
                Action::Approve | Action::Reject => {
                    let s: &ApprovalScreen = s;
                    confirm = Some(confirm_decision_ro(
                        read_only,
                        &app.cfg.by,
                        s,
                        a == Action::Approve,
                        app.now,
                    ));
                }
                Action::CancelRun => {
                    confirm = Some(match &s.row {
                        _ if read_only => {
                            Err("read-only: actions are off (started with --read-only)".into())
                        }
                        Some(r) => Ok(cancel_confirm(&r.run_id, None)),
                        None => Err("the approval is not loaded yet".into()),
                    })
                }
                _ => {}
            }
        }
        Screen::Help { scroll } => match a {
            Action::Down => *scroll += 1,
            Action::Up => *scroll = scroll.saturating_sub(1),
            Action::PageDown | Action::HalfDown => *scroll += usize::from(rows / 2),
            Action::PageUp | Action::HalfUp => {
                *scroll = scroll.saturating_sub(usize::from(rows / 2))
            }
            Action::Top => *scroll = 0,
            _ => {}
        },
    }
    if relayout {
        app.relayout();
    }
    if let Some(c) = copy {
        app.notice = Some((Level::Ok, "copied (escaped form)".into()));
        fx.push(Effect::Copy(c));
    }
    if let Some(c) = confirm {
        match c {
            Ok(c) => app.overlay = Some(Overlay::Confirm(Box::new(c))),
            Err(m) => app.notice = Some((Level::Error, m)),
        }
    }
    if let Some((is_run, id)) = push {
        fx.extend(if is_run {
            app.push_run(id)
        } else {
            app.push_approval(id)
        });
        return fx;
    }
    if need {
        fx.extend(reload_top_window(app));
    }
    fx
}

fn app_push_runs(app: &mut App) -> Vec<Effect> {
    app.stack.push(Screen::Runs(RunsScreen {
        list: Default::default(),
        filter: String::new(),
        status: None,
    }));
    reload(app)
}

fn reload_top_window(app: &mut App) -> Vec<Effect> {
    let mut fx = app.start();
    fx.retain(|e| !matches!(e, Effect::Query(_, Query::Run { .. })));
    fx
}

fn cancel_confirm(run: &Key, h: Option<&RunHeader>) -> Confirm {
    let mut lines = vec![("cancel run".into(), run.as_bytes().to_vec())];
    if let Some(h) = h {
        lines.push(("status".into(), h.status.clone().into_bytes()));
        lines.push(("goal".into(), h.goal.clone()));
    }
    Confirm {
        what: Pending::Cancel { run: run.clone() },
        lines,
        warnings: vec![
            "the run ends as CANCELLED (operator_cancelled); this cannot be undone".into(),
        ],
        reason: Some(TextInput::default()),
    }
}

fn confirm_decision_ro(
    read_only: bool,
    by: &str,
    s: &ApprovalScreen,
    approve: bool,
    now: i64,
) -> Result<Confirm, String> {
    let cfg = AppConfig {
        by: by.to_string(),
        read_only,
        can_resume: false,
    };
    confirm_decision_cfg(&cfg, s, approve, now)
}
