//! Name resolution for the adapters' client. It asks the system resolver (`getaddrinfo`, what
//! reqwest's default resolver asks too) through the `dns-lookup` crate, and keeps the
//! resolver's answer as a type: a name that does not exist is told apart from a resolver that
//! could not answer now. agentrt's `ClassifyTransport` treats the first as permanent and the
//! second as transient (spec §2.7); reqwest's default resolver reports both as one untyped
//! `io::Error` whose only difference is its text, which this crate never classifies on.

use std::net::SocketAddr;
#[cfg(feature = "testing")]
use std::sync::Arc;

use dns_lookup::{AddrInfoHints, LookupErrorKind};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Why a name did not resolve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DnsError {
    /// The name does not exist, or has no address (`EAI_NONAME`, `EAI_NODATA`, or an empty
    /// answer): asking again will not help.
    #[error("dns: {host}: no such host")]
    NotFound { host: String },
    /// The resolver could not answer now (`EAI_AGAIN`, a server failure).
    #[error("dns: {host}: temporary failure in name resolution")]
    Temporary { host: String },
    /// Anything else the resolver reported (a system error, memory); treated as transient.
    #[error("dns: {host}: {detail}")]
    Other { host: String, detail: String },
}

impl DnsError {
    /// Whether asking again cannot succeed.
    pub fn is_not_found(&self) -> bool {
        matches!(self, DnsError::NotFound { .. })
    }
}

/// The error a resolver answer of this kind becomes.
pub fn from_kind(host: &str, kind: LookupErrorKind, detail: String) -> DnsError {
    let host = host.to_string();
    match kind {
        LookupErrorKind::NoName | LookupErrorKind::NoData => DnsError::NotFound { host },
        LookupErrorKind::Again => DnsError::Temporary { host },
        _ => DnsError::Other { host, detail },
    }
}

/// Resolves `host` to its addresses (port 0: the URL's port is put in by the client).
pub fn lookup(host: &str) -> Result<Vec<SocketAddr>, DnsError> {
    let hints = AddrInfoHints {
        socktype: libc::SOCK_STREAM,
        ..AddrInfoHints::default()
    };
    let answers = dns_lookup::getaddrinfo(Some(host), None, Some(hints)).map_err(|e| {
        let kind = e.kind();
        let detail = std::io::Error::from(e).to_string();
        from_kind(host, kind, detail)
    })?;
    let mut out = Vec::new();
    for a in answers {
        match a {
            Ok(info) if !out.contains(&info.sockaddr) => out.push(info.sockaddr),
            Ok(_) => {}
            Err(e) => {
                return Err(DnsError::Other {
                    host: host.to_string(),
                    detail: e.to_string(),
                });
            }
        }
    }
    if out.is_empty() {
        return Err(DnsError::NotFound {
            host: host.to_string(),
        });
    }
    Ok(out)
}

/// The system resolver, run on the blocking pool as reqwest's own is.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let found = tokio::task::spawn_blocking(move || lookup(&host))
                .await
                .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)?;
            let addrs: Addrs = Box::new(found?.into_iter());
            Ok(addrs)
        })
    }
}

/// A resolver that answers every name with one fixed error: what a test uses to see how the
/// client and the classification treat each kind of resolver failure without a network.
/// A test hook: only with the `testing` feature.
#[cfg(feature = "testing")]
#[derive(Clone)]
pub struct FailingResolver(pub Arc<dyn Fn(&str) -> DnsError + Send + Sync>);

#[cfg(feature = "testing")]
impl std::fmt::Debug for FailingResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FailingResolver")
    }
}

#[cfg(feature = "testing")]
impl Resolve for FailingResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let e = (self.0)(name.as_str());
        Box::pin(async move { Err(Box::new(e) as Box<dyn std::error::Error + Send + Sync>) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_resolver_answer_has_its_kind() {
        let k = |kind| from_kind("h.example", kind, "x".into());
        assert!(k(LookupErrorKind::NoName).is_not_found());
        assert!(k(LookupErrorKind::NoData).is_not_found());
        assert_eq!(
            k(LookupErrorKind::Again),
            DnsError::Temporary {
                host: "h.example".into()
            }
        );
        for other in [
            LookupErrorKind::Fail,
            LookupErrorKind::Memory,
            LookupErrorKind::System,
            LookupErrorKind::IO,
        ] {
            assert!(matches!(k(other), DnsError::Other { .. }));
        }
    }

    #[test]
    fn localhost_resolves_to_loopback_only() {
        let found = lookup("localhost").unwrap();
        assert!(!found.is_empty());
        assert!(found.iter().all(|a| a.ip().is_loopback()), "{found:?}");
    }

    #[test]
    fn a_name_with_a_nul_byte_is_refused_not_resolved() {
        // getaddrinfo cannot be asked about it: a clear error, no panic.
        assert!(lookup("a\0b").is_err());
    }
}
