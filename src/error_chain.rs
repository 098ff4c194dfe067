//! An error and its causes on one line, for logs and one-line findings. `Display` shows only
//! the outermost error, and "failed to rotate" without "No space left on device" says nothing.

use std::error::Error;

/// `outer: cause: cause`. A cause whose text the line already holds is not said twice: some
/// errors (zbus's, for one) repeat their source in their own message.
pub(crate) fn one_line(e: &dyn Error) -> String {
    let mut line = e.to_string();
    for cause in std::iter::successors(e.source(), |&c| c.source()) {
        let text = cause.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{msg}")]
    struct E {
        msg: &'static str,
        #[source]
        source: Option<Box<E>>,
    }

    fn e(msg: &'static str, source: Option<E>) -> E {
        E {
            msg,
            source: source.map(Box::new),
        }
    }

    #[test]
    fn causes_follow_in_order_and_a_repeated_one_is_said_once() {
        let disk = e("No space left on device", None);
        assert_eq!(
            one_line(&e(
                "rotate failed",
                Some(e("rename events.jsonl", Some(disk)))
            )),
            "rotate failed: rename events.jsonl: No space left on device"
        );
        let echoed = e("call failed: Access denied", Some(e("Access denied", None)));
        assert_eq!(one_line(&echoed), "call failed: Access denied");
    }
}
