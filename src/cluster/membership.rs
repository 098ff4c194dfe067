//! The note a profile's gateway leaves on its host while it runs in a cluster
//! (`state/cluster.json`: the endpoints and the node), so that this host still knows, once
//! someone removes `[cluster]` from its `gateway.toml` or copies the profile without it, that
//! its gateway would now run the bot beside the cluster's active: doctor warns (HSV028), and
//! the gateway says so when it starts.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::bounded_read::{self, Owner};
use crate::config::ClusterSpec;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Membership {
    pub(crate) endpoints: Vec<String>,
    pub(crate) node: String,
    /// When a gateway of this profile last started in the cluster, RFC 3339.
    pub(crate) since: String,
}

impl Membership {
    pub(crate) fn of(spec: &ClusterSpec) -> Membership {
        Membership {
            endpoints: spec.endpoints.clone(),
            node: spec.node.clone(),
            since: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        }
    }

    /// Written whole (temp file, then rename).
    pub(crate) fn write(&self, path: &Path) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        crate::atomic_file::write_with(path, &bytes, 0o600, crate::atomic_file::Sync::Replace)
    }

    /// The note at `path`, if there is a readable one.
    pub(crate) fn read(path: &Path) -> Option<Membership> {
        let bytes = bounded_read::read(path, 64 * 1024, Owner::SelfRootOrDirectory)
            .ok()
            .flatten()?;
        serde_json::from_slice(&bytes).ok()
    }
}
