//! Hermes's pairings (TODO)
