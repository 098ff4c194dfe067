//! The LaunchAgent property list for a profile: rendered, parsed back, and told apart from a hand-edited one.
