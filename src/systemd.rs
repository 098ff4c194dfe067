//! The systemd backend: the manager spoken to over D-Bus, the unit file and drop-in that
//! `install` renders and the escaping they need, the two scopes, lingering, and the
//! observation and effects that tie a neutral plan (`crate::service`) to this manager.

mod bus;
mod definition;
pub mod dropin;
pub mod effects;
pub mod escape;
mod job;
pub mod linger;
pub mod observed;
mod properties;
pub mod scope;
pub mod unit_file;
mod unit_on_disk;
mod unit_syntax;

pub use bus::unit_object_path;
pub(crate) use bus::{Systemd, SystemdError};
pub(crate) use job::{Job, JobWatch};
pub(crate) use properties::{Fact, UnitProperties};
