//! What doctor asks a platform about an adapter's standing, which no unit property and no
//! state file shows: a bot whose platform-side setup keeps it deaf while its gateway runs and
//! looks healthy. A wing asks its own question ([`super::Platform::question`]); doctor asks
//! them all at once, within [`ASK_TIMEOUT`], and turns each answer into a finding (HSV020).
//!
//! A question holds the adapter's credential only until it is asked: the snapshot the checks
//! read holds the answer, never a secret.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use futures_util::future::BoxFuture;

/// Doctor answers in seconds: a platform that has not answered by then is "could not ask".
pub const ASK_TIMEOUT: Duration = Duration::from_secs(3);

/// One question about one adapter, and how a person asks it by hand.
pub struct Question {
    pub adapter: String,
    /// Whom, and what, in the words of a finding: "Telegram whether adapter tg's bot token
    /// has a webhook set, which would block its polling".
    pub what: String,
    /// How a person asks the same by hand, without the secret.
    pub by_hand: String,
    ask: Box<dyn FnOnce(reqwest::Client) -> BoxFuture<'static, Answer> + Send>,
}

/// What the platform said: nothing wrong, something that keeps the adapter from working, or
/// (`Err`) why it could not be asked, without the secret.
pub type Answer = Result<Option<Blocked>, String>;

/// What keeps an adapter from working, in the platform's terms, and the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked {
    pub problem: String,
    pub fix: String,
}

/// An adapter's standing, as doctor recorded it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    Fine,
    Blocked(Blocked),
    /// The question could not be asked: the finding's message and its by-hand fix.
    CouldNotAsk {
        message: String,
        fix: String,
    },
}

impl Question {
    /// A question about `adapter`: `ask` sends it with the client doctor gives it.
    pub fn new<F>(
        adapter: &str,
        what: String,
        by_hand: String,
        ask: impl FnOnce(reqwest::Client) -> F + Send + 'static,
    ) -> Self
    where
        F: Future<Output = Answer> + Send + 'static,
    {
        Self {
            adapter: adapter.to_owned(),
            what,
            by_hand,
            ask: Box::new(move |http| Box::pin(ask(http))),
        }
    }

    /// Ask, with `http`, and record the answer; the credential goes with the question.
    pub async fn ask(self, http: reqwest::Client) -> Standing {
        let answer = (self.ask)(http).await;
        Self::standing(self.what, self.by_hand, answer)
    }

    /// The standing of a question that could not be sent at all.
    pub fn unasked(self, why: String) -> Standing {
        Self::standing(self.what, self.by_hand, Err(why))
    }

    fn standing(what: String, by_hand: String, answer: Answer) -> Standing {
        match answer {
            Ok(None) => Standing::Fine,
            Ok(Some(blocked)) => Standing::Blocked(blocked),
            Err(why) => Standing::CouldNotAsk {
                message: format!("Could not ask {what} ({why}); not checked."),
                fix: by_hand,
            },
        }
    }
}

impl fmt::Debug for Question {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Question({}: {})", self.adapter, self.what)
    }
}
