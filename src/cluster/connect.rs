//! The etcd client, built from `[cluster]`.

use std::time::Duration;

use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};

use super::ClusterError;
use crate::bounded_read::{self, Owner};
use crate::config::ClusterSpec;

/// A client for `spec`'s endpoints. Every request is bounded by a fifth of the lease, so that a
/// renewal that hangs leaves time for two more before the fence; and it needs a leader, so
/// that a member cut off from its quorum answers with an error rather than stale reads.
/// Connecting is lazy: an endpoint that is down is an error of the first request, not here.
pub(crate) async fn connect(spec: &ClusterSpec) -> Result<Client, ClusterError> {
    let request = (spec.lease_ttl / 5).max(Duration::from_millis(500));
    let mut options = ConnectOptions::new()
        .with_connect_timeout(request)
        .with_timeout(request)
        .with_keep_alive(request, request)
        .with_require_leader(true);
    if let Some(tls) = &spec.tls {
        // As every file the gateway reads: bounded, a regular file (a FIFO must not hang the
        // start, nor /dev/zero fill the memory), the gateway's user's or root's.
        let read = |key: &'static str, path: &std::path::Path| {
            let tls = |why: String| ClusterError::Tls {
                key,
                path: path.to_owned(),
                why,
            };
            match bounded_read::read(path, bounded_read::LIMIT, Owner::SelfOrRoot) {
                Ok(Some(pem)) => Ok(pem),
                Ok(None) => Err(tls(nix::errno::Errno::ENOENT.desc().to_owned())),
                Err(e) => Err(tls(crate::error_chain::one_line(&e))),
            }
        };
        let mut config =
            TlsOptions::new().ca_certificate(Certificate::from_pem(read("ca", &tls.ca)?));
        if let Some((cert, key)) = &tls.identity {
            config = config.identity(Identity::from_pem(read("cert", cert)?, read("key", key)?));
        }
        options = options.with_tls(config);
    }
    Client::connect(&spec.endpoints, Some(options))
        .await
        .map_err(|source| ClusterError::Etcd {
            endpoints: spec.endpoints.join(", "),
            source,
        })
}
