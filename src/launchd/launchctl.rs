//! `launchctl`, run with exact arguments in the right domain, and its `print` output read defensively.
