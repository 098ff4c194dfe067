//! One profile's gateways on several hosts, one active at a time, coordinated through etcd
//! (`[cluster]`, docs/cluster.md).
//!
//! The active holds one etcd lease and, under it, the profile's key and one key per bot
//! credential, all taken in one transaction: two hosts can never both hold them. The others
//! are standbys: ready and healthy, connected to no platform, watching the keys. No chat
//! platform checks a fencing token, so the active fences itself: it renews the lease, and
//! once it has not renewed it with a third of its time left it stops acting (the [`Fence`]
//! closes, then the run ends and its connections close) before etcd can hand the keys to
//! anyone else. A clean stop revokes the lease, which frees the keys at once. What a successor
//! needs to receive on where the active stopped is in etcd too, outside the lease, written
//! only by the current term (`replica`).
//!
//! [`Fence`]: crate::gateway::fence::Fence

mod campaign;
mod connect;
mod etcd;
mod failure;
mod keys;
mod membership;
mod presence;
mod replica;
mod term;

use std::path::PathBuf;

pub(crate) use campaign::{campaign, Standing};
pub(crate) use connect::{check, connect};
pub(crate) use etcd::Etcd;
pub(crate) use keys::{Claim, Keys};
pub(crate) use membership::Membership;
pub(crate) use presence::{Peers, Presence};
pub(crate) use term::Term;

#[derive(Debug, thiserror::Error)]
pub(crate) enum ClusterError {
    /// A person must fix the file: retrying cannot help.
    #[error("[cluster] {key} = {}: {why}; fix the path or the file in gateway.toml", path.display())]
    Tls {
        key: &'static str,
        path: PathBuf,
        why: String,
    },
    #[error("[cluster] etcd at {endpoints}: {source}")]
    Etcd {
        endpoints: String,
        #[source]
        source: etcd_client::Error,
    },
}
