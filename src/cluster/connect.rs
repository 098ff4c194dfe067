//! The etcd clients, built from `[cluster]`: one per member (`etcd.rs` says why).

use std::time::Duration;

use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};

use super::{ClusterError, Etcd};
use crate::bounded_read::{self, Owner};
use crate::config::ClusterSpec;

/// The least interval between two HTTP/2 PINGs. etcd lets a client ping at most every 5 s
/// (`--grpc-keepalive-min-time`), and never on a connection without a stream: past that it
/// closes the connection with GOAWAY `too_many_pings`, a healthy member's too. A second of
/// margin for the timers; a member that stops answering is found by the requests' own
/// timeouts long before.
const PING_EVERY: Duration = Duration::from_secs(6);

/// How long a request may wait for its answer, and a connection for its TCP and TLS
/// handshakes, before its member counts as failed. etcd answers on a LAN in milliseconds. A
/// write sent to a follower just as the leader dies is lost with the leader, and waits this
/// long before it goes to the next member: once the election is over (a second at least),
/// this bounds how much longer the bot waits. A fifth of the lease, as before, would be 6 s at
/// a 30 s lease.
const REQUEST: Duration = Duration::from_millis(1500);

/// A client for each of `spec`'s endpoints. A member that accepts connections and then stalls
/// (a stopped process, whose kernel still accepts) fails as fast as one that refuses. Every
/// request needs a leader, so that a member cut off from its quorum answers with an error
/// rather than stale reads. Connecting is lazy: an endpoint that is down is an error of the
/// first request sent to it, not here.
pub(crate) async fn connect(spec: &ClusterSpec) -> Result<Etcd, ClusterError> {
    let mut options = ConnectOptions::new()
        .with_connect_timeout(REQUEST)
        .with_timeout(REQUEST)
        .with_keep_alive(PING_EVERY, REQUEST)
        .with_keep_alive_while_idle(false)
        .with_require_leader(true);
    if let Some(tls) = tls(spec)? {
        options = options.with_tls(tls.timeout(REQUEST));
    }
    let mut members = Vec::with_capacity(spec.endpoints.len());
    for endpoint in &spec.endpoints {
        let client = Client::connect([endpoint], Some(options.clone()))
            .await
            .map_err(|source| ClusterError::Etcd {
                endpoints: endpoint.clone(),
                source,
            })?;
        members.push((endpoint.clone(), client));
    }
    // Long enough that a dead member is not tried again by every request, short enough that
    // one back from a restart is used again soon.
    Ok(Etcd::new(members, REQUEST * 2))
}

/// Whether `spec`'s TLS files can be read, as [`connect`] reads them: a reload checks a new
/// `[cluster]` before it touches anything.
pub(crate) fn check(spec: &ClusterSpec) -> Result<(), ClusterError> {
    tls(spec).map(drop)
}

/// `spec`'s client TLS, its files read. As every file the gateway reads: bounded, a regular
/// file (a FIFO must not hang the start, nor /dev/zero fill the memory), the gateway's
/// user's or root's.
fn tls(spec: &ClusterSpec) -> Result<Option<TlsOptions>, ClusterError> {
    let Some(tls) = &spec.tls else {
        return Ok(None);
    };
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
    let mut config = TlsOptions::new().ca_certificate(Certificate::from_pem(read("ca", &tls.ca)?));
    if let Some((cert, key)) = &tls.identity {
        config = config.identity(Identity::from_pem(read("cert", cert)?, read("key", key)?));
    }
    Ok(Some(config))
}
