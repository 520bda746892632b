//! A TLS server on 127.0.0.1 whose certificate no client trusts: the two key pairs beside this
//! file were generated for this suite (`openssl req -x509`, P-256, self-signed) and sign
//! nothing else. `untrusted_localhost` names `localhost` and 127.0.0.1 (an unknown issuer);
//! `elsewhere` names only `elsewhere.test` (a name that does not match). The server counts the
//! connections it accepted and the plaintext bytes it received: a client that refused the
//! certificate sent none.

use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

pub const UNTRUSTED_LOCALHOST: (&str, &str) = (
    include_str!("untrusted_localhost.crt"),
    include_str!("untrusted_localhost.key"),
);
pub const ELSEWHERE: (&str, &str) = (include_str!("elsewhere.crt"), include_str!("elsewhere.key"));

pub struct TlsServer {
    pub addr: SocketAddr,
    pub connections: Arc<Mutex<usize>>,
    pub plaintext: Arc<Mutex<usize>>,
}

impl TlsServer {
    pub fn start((cert, key): (&str, &str)) -> TlsServer {
        let certs = vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()];
        let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
        let config = Arc::new(
            rustls::ServerConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap(),
        );
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let connections = Arc::new(Mutex::new(0));
        let plaintext = Arc::new(Mutex::new(0));
        let (c, p) = (connections.clone(), plaintext.clone());
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { break };
                *c.lock().unwrap() += 1;
                let (config, p) = (config.clone(), p.clone());
                std::thread::spawn(move || {
                    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
                    let Ok(conn) = rustls::ServerConnection::new(config) else {
                        return;
                    };
                    let mut tls = rustls::StreamOwned::new(conn, &mut s);
                    let mut buf = [0u8; 4096];
                    // The handshake runs inside the first read; a client that refuses the
                    // certificate aborts it with an alert and the read fails.
                    while let Ok(n) = tls.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        *p.lock().unwrap() += n;
                    }
                });
            }
        });
        TlsServer {
            addr,
            connections,
            plaintext,
        }
    }
}
