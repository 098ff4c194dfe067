//! A resolved credential, kept apart from the config types so that nothing which prints a
//! config can print a secret by accident, and where the service manager's credentials are
//! read.

use std::path::Path;

/// The largest credential read: a token is a few hundred bytes; anything near this is not one.
const MAX_CREDENTIAL: u64 = 64 * 1024;

/// A resolved credential. Its `Debug` never prints the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// The secret, registered with [`crate::redact`] so that no text from outside can carry
    /// it into a log, a state file or `STATUS=`.
    pub fn new(value: String) -> Self {
        crate::redact::register(&value);
        Self(value)
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// The credential `name` the service manager loaded for this process
/// (`$CREDENTIALS_DIRECTORY/name`, systemd.exec(5) "Credentials"), without one trailing
/// newline; `None` when there is no such directory or file. A file that is there and cannot
/// be used is an error that names it, never a fallback to another source.
pub(crate) fn from_credentials(name: &str) -> Result<Option<Secret>, String> {
    let Some(dir) = std::env::var_os("CREDENTIALS_DIRECTORY") else {
        return Ok(None);
    };
    let path = Path::new(&dir).join(name);
    let bytes = match std::fs::metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("credential {}: {e}", path.display())),
        Ok(m) if m.len() > MAX_CREDENTIAL => {
            return Err(format!(
                "credential {} is {} bytes, larger than a secret could be",
                path.display(),
                m.len()
            ))
        }
        Ok(_) => std::fs::read(&path).map_err(|e| format!("credential {}: {e}", path.display()))?,
    };
    let text = String::from_utf8(bytes)
        .map_err(|_| format!("credential {} is not UTF-8 text", path.display()))?;
    let value = text.strip_suffix('\n').unwrap_or(&text);
    let value = value.strip_suffix('\r').unwrap_or(value);
    if value.is_empty() {
        return Err(format!(
            "credential {} is empty; write the secret into the file install --credential named",
            path.display()
        ));
    }
    Ok(Some(Secret::new(value.to_owned())))
}
