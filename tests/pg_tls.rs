//! TLS to PostgreSQL by `sslmode` against real servers (issue 19): a throwaway cluster on a
//! loopback TCP port with a certificate this test signs with its own CA (openssl), and one
//! without TLS. `disable` is plain; `prefer` and `require` are encrypted (the server's
//! `pg_stat_ssl` says so); `verify-full` connects only with the CA that signed the certificate
//! and the name it was issued for; `require` refuses a server that offers no TLS.

mod pg_support;

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
