//! TLS to PostgreSQL by `sslmode` against real servers (issue 19): a throwaway cluster on a
//! loopback TCP port with a certificate this test signs with its own CA (openssl), and one
//! without TLS. `disable` is plain; `prefer` and `require` are encrypted (the server's
//! `pg_stat_ssl` says so); `verify-full` connects only with the CA that signed the certificate
//! and the name it was issued for; `require` refuses a server that offers no TLS. And a
//! server that asks for passwords: the printed commands and the password file.

mod pg_support;
mod support;

use std::path::Path;
use std::process::Command;

use countersign::pgstore::{PgStore, PgUrl, connect};

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl runs (the TLS test makes its own certificates)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA and a server certificate it signs, for `localhost` only; and a second CA that signed
/// nothing. Returns the directory holding `ca.pem`, `other-ca.pem`, `server.pem`, `server.key`.
fn certificates() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    for ca in ["ca", "other-ca"] {
        let (key, pem) = (format!("{ca}.key"), format!("{ca}.pem"));
        let mut a = vec![
            "req",
            "-x509",
            "-days",
            "2",
            "-subj",
            "/CN=countersign test CA",
        ];
        a.extend(ec);
        a.extend(["-keyout", &key, "-out", &pem]);
        openssl(p, &a);
    }
    let mut a = vec![
        "req",
        "-subj",
        "/CN=localhost",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
    ];
    a.extend(ec);
    openssl(p, &a);
    std::fs::write(
        p.join("ext.cnf"),
        "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(
        p,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
            "-out",
            "server.pem",
        ],
    );
    d
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Whether the server says this connection is encrypted.
fn encrypted(url: &str) -> Result<bool, String> {
    let url = PgUrl::parse(url).map_err(|e| e.to_string())?;
    let mut c = connect(&url).map_err(|e| e.to_string())?;
    let row = c
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .map_err(|e| e.to_string())?;
    Ok(row.get(0))
}

#[test]
fn pg_tls_by_sslmode_against_a_real_server() {
    if pg_support::fresh_db().is_none() {
        return; // no server binaries: said loudly by fresh_db (and a failure under CI)
    }
    if Command::new("openssl").arg("version").output().is_err() {
        assert!(
            std::env::var_os("COUNTERSIGN_REQUIRE_PG").is_none(),
            "COUNTERSIGN_REQUIRE_PG is set but openssl, which makes this test's certificates, is missing"
        );
        eprintln!("SKIPPED: no openssl to make the TLS test's certificates");
        return;
    }
    let certs = certificates();
    let read = |n: &str| std::fs::read(certs.path().join(n)).unwrap();
    let port = free_port();
    let (pem, key) = (read("server.pem"), read("server.key"));
    pg_support::start_cluster_with(
        &format!(
            "-c listen_addresses=127.0.0.1 -c port={port} -c ssl=on \
             -c ssl_cert_file={{dir}}/server.pem -c ssl_key_file={{dir}}/server.key"
        ),
        &[("server.pem", &pem), ("server.key", &key)],
    )
    .expect("a TLS cluster starts");
    let ca = certs.path().join("ca.pem");
    let other = certs.path().join("other-ca.pem");
    let at = |host: &str, q: &str| format!("postgresql://postgres@{host}:{port}/postgres?{q}");

    assert_eq!(encrypted(&at("localhost", "sslmode=disable")), Ok(false));
    assert_eq!(encrypted(&at("localhost", "sslmode=prefer")), Ok(true));
    assert_eq!(encrypted(&at("localhost", "sslmode=require")), Ok(true));
    assert_eq!(
        encrypted(&at("localhost", "")),
        Ok(true),
        "prefer is the default"
    );
    let full = |host: &str, root: &Path| {
        encrypted(&at(
            host,
            &format!("sslmode=verify-full&sslrootcert={}", root.display()),
        ))
    };
    assert_eq!(full("localhost", &ca), Ok(true));
    // A certificate another CA signed, and a name it was not issued for, are refused.
    let e = full("localhost", &other).expect_err("an unknown issuer is refused");
    assert!(e.to_lowercase().contains("certificate"), "{e}");
    let e = full("127.0.0.1", &ca).expect_err("a name the certificate lacks is refused");
    assert!(e.to_lowercase().contains("certificate"), "{e}");
    // The store opens and migrates over verify-full as over a socket.
    let url = PgUrl::parse(&at(
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={}", ca.display()),
    ))
    .unwrap();
    let mut s = PgStore::open(&url).expect("open over verify-full");
    assert!(s.verify_events(0, 0).unwrap().ok());

    // A server without TLS: require refuses it, prefer falls back to plain.
    let plain = free_port();
    pg_support::start_cluster_with(
        &format!("-c listen_addresses=127.0.0.1 -c port={plain} -c ssl=off"),
        &[],
    )
    .expect("a plain cluster starts");
    let at = |q: &str| format!("postgresql://postgres@localhost:{plain}/postgres?{q}");
    let e = encrypted(&at("sslmode=require")).expect_err("require needs TLS");
    assert!(!e.is_empty());
    assert_eq!(encrypted(&at("sslmode=prefer")), Ok(false));
}

/// The binary against `env`, `PGPASSWORD` and `PGPASSFILE` taken from `env` only.
fn cs_with(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_countersign"));
    c.args(args)
        .env_remove("COUNTERSIGN_DB")
        .env_remove("PGPASSWORD")
        .env_remove("PGPASSFILE")
        .env("USER", "ci-user");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("countersign runs")
}

/// Against a server that asks for a password (scram-sha-256 on TCP): the `decide with:` line
/// `show` prints for a URL that carried the password names the database without it, and
/// pasted as it is with the reviewer's own `PGPASSWORD` it decides (a `***` in it would be
/// sent as the password and fail); a password file that group or others may read is not
/// used, and the refusal says so and how to fix it; at mode 0600 it is used.
#[test]
fn pg_password_auth_the_printed_command_and_the_password_file() {
    use std::os::unix::fs::PermissionsExt;
    if pg_support::fresh_db().is_none() {
        return;
    }
    let port = free_port();
    let hba: &[u8] = b"local all all trust\nhost all postgres 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 scram-sha-256\n";
    pg_support::start_cluster_with(
        &format!("-c listen_addresses=127.0.0.1 -c port={port} -c hba_file={{dir}}/hba.conf"),
        &[("hba.conf", hba)],
    )
    .expect("a cluster asking for passwords starts");
    let mut admin = postgres::Client::connect(
        &format!("host=127.0.0.1 port={port} user=postgres dbname=postgres"),
        postgres::NoTls,
    )
    .unwrap();
    for sql in [
        "CREATE ROLE rev LOGIN PASSWORD 'Sekr1t/pw'",
        "CREATE DATABASE csauth OWNER rev ENCODING 'UTF8' TEMPLATE template0",
    ] {
        admin.batch_execute(sql).unwrap();
    }
    let with_pw = format!("postgresql://rev:Sekr1t%2Fpw@127.0.0.1:{port}/csauth");
    let bare = format!("postgresql://rev@127.0.0.1:{port}/csauth");

    let dir = tempfile::tempdir().unwrap();
    let lite = dir.path().join("w.db");
    let man = support::fixture(&lite, &["--scenario", "waiting"]);
    let (run, ap) = (
        man["approvals"][0]["run_id"].as_str().unwrap().to_string(),
        man["approvals"][0]["id"].as_str().unwrap().to_string(),
    );
    let o = cs_with(
        &["copy", "--from", lite.to_str().unwrap(), "--to", &with_pw],
        &[],
    );
    assert!(o.status.success(), "{}", pg_support::said(&o));

    let o = cs_with(&["--db", &with_pw, "show", &run], &[]);
    assert!(o.status.success(), "{}", pg_support::said(&o));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("decide with: "))
        .unwrap_or_else(|| panic!("a decide line: {text}"));
    assert!(!line.contains("***") && !line.contains("Sekr1t"), "{line}");
    assert!(line.contains(&format!("--approval {ap}")), "{line}");
    let pasted = format!(
        "{} --yes",
        line.replacen("countersign", env!("CARGO_BIN_EXE_countersign"), 1)
    );
    let ran = Command::new("sh")
        .args(["-c", &pasted])
        .env_remove("PGPASSFILE")
        .env("PGPASSWORD", "Sekr1t/pw")
        .env("USER", "ci-user")
        .output()
        .unwrap();
    assert!(ran.status.success(), "{pasted}: {}", pg_support::said(&ran));

    // The password file: ignored (and said) while others may read it, used at 0600.
    let pass = dir.path().join("pgpass");
    std::fs::write(&pass, format!("127.0.0.1:{port}:csauth:rev:Sekr1t/pw\n")).unwrap();
    std::fs::set_permissions(&pass, std::fs::Permissions::from_mode(0o644)).unwrap();
    let file = pass.to_str().unwrap();
    let o = cs_with(&["--db", &bare, "runs"], &[("PGPASSFILE", file)]);
    let s = pg_support::said(&o);
    assert_eq!(o.status.code(), Some(1), "{s}");
    assert!(
        s.contains("password file") && s.contains("chmod 600"),
        "{s}"
    );
    std::fs::set_permissions(&pass, std::fs::Permissions::from_mode(0o600)).unwrap();
    let o = cs_with(&["--db", &bare, "runs"], &[("PGPASSFILE", file)]);
    assert!(o.status.success(), "{}", pg_support::said(&o));
}
