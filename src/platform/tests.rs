//! The registry's platforms together: their configuration through the generic parser, and
//! the senders it builds from it.

mod config;
mod sender;
