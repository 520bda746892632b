//! A real PostgreSQL server for the tests. It is the server named by `COUNTERSIGN_TEST_PG` (a
//! URL) or by the `PG*` environment (`PGHOST`, `PGPORT`, `PGUSER`; `PGPASSWORD` is read by the
//! client) when given; else a throwaway cluster this test binary starts from the PostgreSQL
//! binaries (`/usr/lib/postgresql/15/bin`, else the newest other version there): `initdb` and
//! `pg_ctl` on a Unix socket in a temporary directory, no TCP port. As root (CI), `initdb`
//! refuses to run, so the cluster runs as the `postgres` (else `nobody`) account through
//! `setpriv`, in a directory that account owns. One cluster per test binary; each test gets a
//! fresh database. A watchdog stops the cluster and removes its directory once this process
//! has exited.
//!
//! Where no server binary exists, a test prints one `SKIPPED: ...` line and passes, unless
//! `COUNTERSIGN_REQUIRE_PG` is set (`.ci/run` sets it): then it fails.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use countersign::pgstore::{PgUrl, postgres};

// The binary as tests start it. A test that also declares `mod support;` loads this file a
// second time, as `support::bin`: the benches that use this module have a `support` of
// their own, so it cannot be reached through `crate::support`.
#[allow(clippy::duplicate_mod)]
#[path = "../support/bin.rs"]
mod bin;

/// Where a server is, as a URL whose path is replaced by each test's database name.
struct Server {
    /// `postgresql://USER@HOST[:PORT]` or `...@/?host=DIR` (no path).
    prefix: String,
    /// The query after the database name (the socket directory), or empty.
    query: String,
    /// The server's log, when this suite started the server.
    log: Option<PathBuf>,
}

static SERVER: OnceLock<Result<Server, String>> = OnceLock::new();
static NEXT: AtomicU32 = AtomicU32::new(0);

/// A database of its own for one test, dropped when the test ends.
pub struct TestDb {
    pub url: String,
    name: String,
    admin: String,
}

impl TestDb {
    pub fn pg_url(&self) -> PgUrl {
        PgUrl::parse(&self.url).expect("test URL parses")
    }

    /// A superuser connection to this database.
    pub fn client(&self) -> postgres::Client {
        countersign::pgstore::connect(&self.pg_url()).expect("connect to the test database")
    }

    /// This database's URL as another (login) role.
    pub fn url_as(&self, role: &str) -> String {
        let s = server().expect("server");
        let rest = s.prefix.split_once('@').map(|x| x.1).unwrap_or("");
        format!("postgresql://{role}@{rest}/{}{}", self.name, s.query)
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Ok(url) = PgUrl::parse(&self.admin)
            && let Ok(mut c) = countersign::pgstore::connect(&url)
        {
            let _ = c.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// The password [`with_password`] puts in a URL: no output may ever show it.
pub const SECRET: &str = "s3cret-pw";

/// `url` with the password [`SECRET`] when it has none (else as it is). The test cluster
/// trusts its socket, so the password is accepted and never checked.
pub fn with_password(url: &str) -> String {
    let after = url.find("://").map(|i| i + 3).unwrap_or(0);
    match url[after..].find('@') {
        Some(at) if !url[after..after + at].contains(':') => {
            format!("{}:{SECRET}{}", &url[..after + at], &url[after + at..])
        }
        _ => url.to_string(),
    }
}

/// What a run of the binary printed, stdout then stderr.
pub fn said(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn server() -> Result<&'static Server, String> {
    SERVER
        .get_or_init(find_or_start)
        .as_ref()
        .map_err(|e| e.clone())
}

/// The server's log (its default line prefix names each backend's pid), when this suite
/// started the server; `None` for a server named by `COUNTERSIGN_TEST_PG` or `PGHOST`.
pub fn server_log() -> Option<PathBuf> {
    server().ok()?.log.clone()
}

/// A fresh database, or `None` after printing `SKIPPED: ...` where no server can be had.
pub fn fresh_db() -> Option<TestDb> {
    let s = match server() {
        Ok(s) => s,
        Err(why) => {
            if std::env::var_os("COUNTERSIGN_REQUIRE_PG").is_some() {
                panic!("COUNTERSIGN_REQUIRE_PG is set but no PostgreSQL server: {why}");
            }
            eprintln!("SKIPPED: no PostgreSQL server for this test: {why}");
            return None;
        }
    };
    let name = format!(
        "cs_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    );
    let admin = format!("{}/postgres{}", s.prefix, s.query);
    let url = PgUrl::parse(&admin).expect("admin URL");
    let mut c = countersign::pgstore::connect(&url).expect("connect to the test server");
    c.batch_execute(&format!(
        "CREATE DATABASE {name} ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
    ))
    .expect("create a test database");
    Some(TestDb {
        url: format!("{}/{name}{}", s.prefix, s.query),
        name,
        admin,
    })
}

fn find_or_start() -> Result<Server, String> {
    if let Ok(u) = std::env::var("COUNTERSIGN_TEST_PG")
        && !u.is_empty()
    {
        // The URL's own database is replaced by each test's.
        let (base, query) = match u.find('?') {
            Some(q) => (u[..q].to_string(), u[q..].to_string()),
            None => (u.clone(), String::new()),
        };
        let after = base.find("://").map(|i| i + 3).unwrap_or(0);
        let prefix = match base[after..].find('/') {
            Some(p) => base[..after + p].to_string(),
            None => base,
        };
        return Ok(Server {
            prefix,
            query,
            log: None,
        });
    }
    if let Ok(host) = std::env::var("PGHOST")
        && !host.is_empty()
    {
        let user = std::env::var("PGUSER").unwrap_or_else(|_| "postgres".into());
        let port = std::env::var("PGPORT").unwrap_or_else(|_| "5432".into());
        return Ok(if host.starts_with('/') {
            Server {
                prefix: format!("postgresql://{user}@"),
                query: format!("?host={host}&port={port}"),
                log: None,
            }
        } else {
            Server {
                prefix: format!("postgresql://{user}@{host}:{port}"),
                query: String::new(),
                log: None,
            }
        });
    }
    start_cluster()
}

/// The directory with `initdb`, `pg_ctl` and `postgres`: version 15, else the newest.
fn bin_dir() -> Option<PathBuf> {
    let has = |d: &Path| {
        ["initdb", "pg_ctl", "postgres"]
            .iter()
            .all(|b| d.join(b).is_file())
    };
    let preferred = PathBuf::from("/usr/lib/postgresql/15/bin");
    if has(&preferred) {
        return Some(preferred);
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            let d = e.path().join("bin");
            has(&d).then_some((v, d))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, d)| d)
}

/// The account a root process runs the server as: `(uid, gid)`.
fn server_account() -> Option<(u32, u32)> {
    for name in [c"postgres", c"nobody"] {
        // SAFETY: getpwnam returns a pointer to static storage or null; read at once.
        let pw = unsafe { libc::getpwnam(name.as_ptr()) };
        if !pw.is_null() {
            // SAFETY: non-null, checked above.
            let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
            return Some((uid, gid));
        }
    }
    None
}

/// `cmd` run as `account` when given (through setpriv), else as this process.
fn as_account(account: Option<(u32, u32)>, program: &Path) -> Command {
    match account {
        Some((uid, gid)) => {
            let mut c = Command::new("setpriv");
            c.arg(format!("--reuid={uid}"))
                .arg(format!("--regid={gid}"))
                .arg("--clear-groups")
                .arg("--")
                .arg(program);
            c
        }
        None => Command::new(program),
    }
}

fn run(mut c: Command, what: &str) -> Result<(), String> {
    let out = c
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{what}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{what} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

fn start_cluster() -> Result<Server, String> {
    let dir = start_cluster_with("-c listen_addresses=''", &[])?;
    Ok(Server {
        prefix: "postgresql://postgres@".into(),
        query: format!("?host={}", dir.display()),
        log: Some(dir.join("log")),
    })
}

/// Starts a throwaway cluster (stopped and removed when this process ends) with `extra`
/// server options, after writing `files` (name, contents; mode 0600, the server's) into its
/// directory, where `extra` can name them as `{dir}/NAME`. Returns the directory, which is
/// also its Unix socket directory.
pub fn start_cluster_with(extra: &str, files: &[(&str, &[u8])]) -> Result<PathBuf, String> {
    let bin = bin_dir().ok_or("no PostgreSQL server binaries under /usr/lib/postgresql")?;
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let account = if root {
        Some(server_account().ok_or("running as root and no postgres or nobody account")?)
    } else {
        None
    };
    let dir = std::env::temp_dir().join(format!("cs-pg-{}-{}", std::process::id(), rand_suffix()));
    std::fs::create_dir(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    if let Some((uid, gid)) = account {
        std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).map_err(|e| format!("chown: {e}"))?;
    }
    for (name, bytes) in files {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(name);
        std::fs::write(&path, bytes).map_err(|e| format!("write {}: {e}", path.display()))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("chmod {}: {e}", path.display()))?;
        if let Some((uid, gid)) = account {
            std::os::unix::fs::chown(&path, Some(uid), Some(gid))
                .map_err(|e| format!("chown: {e}"))?;
        }
    }
    let data = dir.join("data");
    let mut init = as_account(account, &bin.join("initdb"));
    init.arg("-D").arg(&data).args([
        "-U",
        "postgres",
        "--auth=trust",
        "-E",
        "UTF8",
        "--locale=C",
        "-N",
    ]);
    run(init, "initdb")?;
    // Tests need no durability; a bench measuring commits sets COUNTERSIGN_TEST_PG_DURABLE.
    let durability = if std::env::var_os("COUNTERSIGN_TEST_PG_DURABLE").is_some() {
        "-c fsync=on -c synchronous_commit=on"
    } else {
        "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    };
    let extra = extra.replace("{dir}", &dir.display().to_string());
    let opts = format!(
        "-k {} {extra} {durability} \
         -c shared_buffers=32MB -c max_connections=60 -c dynamic_shared_memory_type=mmap",
        dir.display()
    );
    let mut ctl = as_account(account, &bin.join("pg_ctl"));
    ctl.arg("-D")
        .arg(&data)
        .arg("-l")
        .arg(dir.join("log"))
        .args(["-w", "-t", "120", "-o", &opts, "start"]);
    run(ctl, "pg_ctl start")?;
    watchdog(account, &bin, &dir);
    Ok(dir)
}

/// Stops the cluster and removes its directory once this process has gone.
fn watchdog(account: Option<(u32, u32)>, bin: &Path, dir: &Path) {
    let script = format!(
        "while [ -d /proc/{pid} ]; do sleep 1; done; '{ctl}' -D '{dir}/data' -m immediate stop >/dev/null 2>&1; rm -rf '{dir}'",
        pid = std::process::id(),
        ctl = bin.join("pg_ctl").display(),
        dir = dir.display()
    );
    let mut c = as_account(account, Path::new("/bin/sh"));
    c.arg("-c")
        .arg(script)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // A session of its own: the test harness's end does not take it along.
    use std::os::unix::process::CommandExt;
    // SAFETY: setsid is async-signal-safe and touches no memory of this process.
    unsafe {
        c.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let _ = c.spawn();
}

fn rand_suffix() -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    let n = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{n:08x}")
}

/// A demo database made by `demo --no-tui` in `dir` (`dir/demo.db`, its backend
/// `dir/demo.orders.db`) and copied into `db`.
pub fn demo_on(db: &TestDb, dir: &Path) -> (PathBuf, PathBuf) {
    let lite = dir.join("demo.db");
    let o = bin::cs(&lite, &["demo", "--no-tui"]);
    assert!(o.status.success(), "{}", said(&o));
    use countersign::pgstore::copy::{Endpoint, copy};
    copy(&Endpoint::Sqlite(lite.clone()), &Endpoint::Pg(db.pg_url())).expect("copy");
    (lite, dir.join("demo.orders.db"))
}

/// A demo database made by `demo --no-tui` in `dir` and copied into `db`: the run whose refund
/// over the automatic limit waits for a person there, and the demo's order backend.
pub fn demo_refund_on(db: &TestDb, dir: &Path) -> (String, PathBuf) {
    let (lite, backend) = demo_on(db, dir);
    let run: String = rusqlite::Connection::open(&lite)
        .unwrap()
        .query_row(
            "SELECT a.run_id FROM approvals a JOIN runs r ON r.id = a.run_id \
             WHERE r.status = 'WAITING_FOR_APPROVAL' AND a.status = 'pending' \
             AND a.kind = 'over_auto_limit' AND a.request_json LIKE '%issue_refund%' LIMIT 1",
            [],
            |r| r.get(0),
        )
        .expect("a refund waits");
    (run, backend)
}

/// How many refunds the order backend executed for `run`.
pub fn refunds_of(backend: &Path, run: &str) -> i64 {
    rusqlite::Connection::open(backend)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM effects WHERE session_id = ?1 AND tool = 'issue_refund'",
            [run],
            |r| r.get(0),
        )
        .unwrap()
}

/// A proxy in front of `db`'s server that counts the client's round trips: each
/// extended-protocol `Sync` and each simple `Query` message the client sends (one per
/// statement the store runs). For tests that bound how many statements a read makes, which no
/// clock can. It listens on a Unix socket of its own (the client speaks plain text to it) and
/// forwards to the server's socket or TCP address, so the server must take a connection
/// without TLS (the test cluster does). Returns the URL to connect through and the count.
pub fn counting_proxy(
    db: &TestDb,
) -> (
    PgUrl,
    std::sync::Arc<std::sync::atomic::AtomicU64>,
    tempfile::TempDir,
) {
    use std::io::{Read, Write};
    use std::os::unix::net::{UnixListener, UnixStream};
    use std::sync::Arc;
    use std::sync::atomic::AtomicU64;

    let (user, rest) = db.url.split_once('@').expect("the test URL names a user");
    let (hostport, rest) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let param = |k: &str| {
        query
            .split('&')
            .find_map(|p| p.strip_prefix(&format!("{k}=")).map(str::to_string))
    };
    enum Up {
        Unix(PathBuf),
        Tcp(String),
    }
    let up = match param("host") {
        Some(h) if h.starts_with('/') => Up::Unix(PathBuf::from(format!(
            "{h}/.s.PGSQL.{}",
            param("port").unwrap_or_else(|| "5432".into())
        ))),
        _ if hostport.contains(':') => Up::Tcp(hostport.to_string()),
        _ => Up::Tcp(format!("{hostport}:5432")),
    };
    let dir = tempfile::tempdir().expect("a directory for the proxy's socket");
    let listener = UnixListener::bind(dir.path().join(".s.PGSQL.5432")).expect("proxy socket");
    let trips = Arc::new(AtomicU64::new(0));
    let counted = trips.clone();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let server: Box<dyn ReadWrite> = match &up {
                Up::Unix(p) => Box::new(UnixStream::connect(p).expect("server socket")),
                Up::Tcp(a) => Box::new(std::net::TcpStream::connect(a).expect("server address")),
            };
            let (mut to_server, mut from_server) = server.split();
            let mut to_client = client.try_clone().expect("clone the client socket");
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut from_server, &mut to_client);
            });
            let counted = counted.clone();
            std::thread::spawn(move || {
                let mut client = client;
                let mut frames = Frames::default();
                let mut buf = [0u8; 16384];
                while let Ok(n) = client.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    // Counted before it is passed on, so a reply never arrives before its count.
                    counted.fetch_add(frames.feed(&buf[..n]), Ordering::SeqCst);
                    if to_server.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    let mut url = format!("{user}@{path}?host={}&port=5432", dir.path().display());
    if let Some(p) = param("password") {
        url.push_str(&format!("&password={p}"));
    }
    (PgUrl::parse(&url).expect("proxy URL"), trips, dir)
}

/// A stream the proxy can read from and write to on two threads.
trait ReadWrite: Send {
    fn split(
        self: Box<Self>,
    ) -> (
        Box<dyn std::io::Write + Send>,
        Box<dyn std::io::Read + Send>,
    );
}

impl ReadWrite for std::os::unix::net::UnixStream {
    fn split(
        self: Box<Self>,
    ) -> (
        Box<dyn std::io::Write + Send>,
        Box<dyn std::io::Read + Send>,
    ) {
        let r = self.try_clone().expect("clone");
        (self, Box::new(r))
    }
}

impl ReadWrite for std::net::TcpStream {
    fn split(
        self: Box<Self>,
    ) -> (
        Box<dyn std::io::Write + Send>,
        Box<dyn std::io::Read + Send>,
    ) {
        let r = self.try_clone().expect("clone");
        (self, Box::new(r))
    }
}

/// The client's side of PostgreSQL's protocol, cut into messages: untyped ones (an SSL or GSS
/// request, then the startup message) and then typed ones (a type byte and a length).
#[derive(Default)]
struct Frames {
    buf: Vec<u8>,
    started: bool,
}

impl Frames {
    /// Takes the next bytes; says how many round trips (`S`ync or `Q`uery) they completed.
    fn feed(&mut self, bytes: &[u8]) -> u64 {
        self.buf.extend_from_slice(bytes);
        let mut trips = 0;
        loop {
            let head = if self.started { 1 } else { 0 };
            let Some(len) = self.buf.get(head..head + 4) else {
                return trips;
            };
            let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
            if self.buf.len() < head + len {
                return trips;
            }
            if self.started {
                trips += u64::from(matches!(self.buf[0], b'S' | b'Q'));
            } else {
                // 80877103 asks for SSL, 80877104 for GSS: the startup message follows.
                let code = self
                    .buf
                    .get(4..8)
                    .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
                self.started = !matches!(code, Some(80877103 | 80877104));
            }
            self.buf.drain(..head + len);
        }
    }
}
