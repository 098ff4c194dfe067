//! Asking a platform who an adapter's bot is (Telegram's `getMe`, Slack's `auth.test`,
//! Feishu's `bot/v3/info`), for the [`Whoami`] the access rules read a mention by, without
//! letting the question hold receiving up.
//!
//! A mention of the bot can only be told from anyone else's once the bot's id is known, but a
//! platform that will not say who the bot is right now may still deliver messages: each
//! question is bounded, a failed one is asked again later (further apart each time, up to
//! [`LONGEST_WAIT`]), and meanwhile the adapter receives as usual. Once answered, it is never
//! asked again: an account's id does not change under a running credential.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::gateway::adapter::whoami::{BotId, Whoami};

/// The wait after the first failed question; it doubles after each further failure.
const FIRST_WAIT: Duration = Duration::from_secs(30);
/// The longest wait between two questions.
const LONGEST_WAIT: Duration = Duration::from_secs(30 * 60);

/// One adapter's question, and when to ask it next.
pub(crate) struct BotLookup {
    adapter: String,
    whoami: Whoami,
    /// What is known without an answer (Telegram's token names the bot's id), kept in the
    /// meantime.
    fallback: Option<BotId>,
    /// When the next question is due; `None` once answered.
    next: Option<Instant>,
    /// The wait after the next failure.
    wait: Duration,
}

impl BotLookup {
    /// A question due at once, for adapter `adapter`, whose answer goes to `whoami`.
    pub(crate) fn new(adapter: &str, whoami: Whoami, fallback: Option<BotId>) -> Self {
        Self {
            adapter: adapter.to_owned(),
            whoami,
            fallback,
            next: Some(Instant::now()),
            wait: FIRST_WAIT,
        }
    }

    /// Whether to ask now: not yet answered, and the wait after the last failure is over.
    pub(crate) fn due(&self) -> bool {
        self.next.is_some_and(|at| Instant::now() >= at)
    }

    /// Ask, if due: `ask`'s answer goes to the whoami; a failure, or no answer within
    /// `within`, is logged and asked again later, with the fallback (if any) kept meanwhile.
    pub(crate) async fn ask_if_due(
        &mut self,
        within: Duration,
        ask: impl Future<Output = Result<BotId, String>>,
    ) {
        if !self.due() {
            return;
        }
        let answer = match tokio::time::timeout(within, ask).await {
            Ok(answer) => answer,
            Err(_) => Err(format!("no answer within {:.0?}", within)),
        };
        self.took(answer);
    }

    /// Beside `work` (a connection, say), ask whenever due until answered: a question never
    /// delays the work, and the work's end ends a question in flight.
    pub(crate) async fn beside<T, F>(
        &mut self,
        within: Duration,
        work: impl Future<Output = T>,
        mut ask: impl FnMut() -> F,
    ) -> T
    where
        F: Future<Output = Result<BotId, String>>,
    {
        tokio::pin!(work);
        while let Some(at) = self.next {
            tokio::select! {
                out = &mut work => return out,
                () = tokio::time::sleep_until(at) => {}
            }
            let question = tokio::time::timeout(within, ask());
            tokio::pin!(question);
            let answer = tokio::select! {
                out = &mut work => return out,
                answer = &mut question => answer,
            };
            self.took(answer.unwrap_or_else(|_| Err(format!("no answer within {within:.0?}"))));
        }
        work.await
    }

    fn took(&mut self, answer: Result<BotId, String>) {
        match answer {
            Ok(bot) => {
                tracing::debug!(adapter = %self.adapter, id = ?bot.id, handle = ?bot.handle, "the platform said who the bot is");
                self.whoami.set(&self.adapter, bot);
                self.next = None;
            }
            Err(error) => {
                let retry_s = self.wait.as_secs();
                tracing::warn!(adapter = %self.adapter, %error, retry_s, "could not learn who the bot is; a mention of it is not recognised until then");
                if let Some(fallback) = &self.fallback {
                    if self.whoami.get(&self.adapter).id.is_none() {
                        self.whoami.set(&self.adapter, fallback.clone());
                    }
                }
                self.next = Some(Instant::now() + self.wait);
                self.wait = (self.wait * 2).min(LONGEST_WAIT);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bot(id: &str) -> BotId {
        BotId {
            id: Some(id.into()),
            handle: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_keeps_the_fallback_and_is_asked_again_later_further_apart() {
        let whoami = Whoami::default();
        let mut lookup = BotLookup::new("tg", whoami.clone(), Some(bot("123")));
        assert!(lookup.due());
        lookup
            .ask_if_due(Duration::from_secs(5), async { Err("down".into()) })
            .await;
        assert_eq!(whoami.get("tg"), bot("123"));
        assert!(!lookup.due());
        tokio::time::advance(FIRST_WAIT).await;
        assert!(lookup.due());
        // No answer in time counts as a failure, and the next wait is twice as long.
        lookup
            .ask_if_due(Duration::from_secs(5), std::future::pending())
            .await;
        tokio::time::advance(FIRST_WAIT).await;
        assert!(!lookup.due());
        tokio::time::advance(FIRST_WAIT).await;
        assert!(lookup.due());
        let full = BotId {
            id: Some("123".into()),
            handle: Some("hermes_bot".into()),
        };
        let answer = full.clone();
        lookup
            .ask_if_due(Duration::from_secs(5), async { Ok(answer) })
            .await;
        assert_eq!(whoami.get("tg"), full);
        // Answered, it is never asked again.
        tokio::time::advance(LONGEST_WAIT * 2).await;
        assert!(!lookup.due());
    }

    #[tokio::test(start_paused = true)]
    async fn beside_the_work_it_asks_until_answered_and_never_holds_the_work_up() {
        let whoami = Whoami::default();
        let mut lookup = BotLookup::new("fs", whoami.clone(), None);
        let mut asked = 0;
        let work = async {
            tokio::time::sleep(Duration::from_secs(100)).await;
            "done"
        };
        let out = lookup
            .beside(Duration::from_secs(5), work, || {
                asked += 1;
                let n = asked;
                async move {
                    if n < 3 {
                        Err("not yet".to_owned())
                    } else {
                        Ok(bot("ou_bot"))
                    }
                }
            })
            .await;
        assert_eq!(out, "done");
        // At once, after 30 s, then after 60 s more: answered within the work's 100 s.
        assert_eq!(asked, 3);
        assert_eq!(whoami.get("fs"), bot("ou_bot"));

        // Work that ends first ends a question still waiting for its answer.
        let mut slow = BotLookup::new("sl", whoami.clone(), None);
        let out = slow
            .beside(Duration::from_secs(5), async { 7 }, || {
                std::future::pending::<Result<BotId, String>>()
            })
            .await;
        assert_eq!(out, 7);
        assert_eq!(whoami.get("sl"), BotId::default());
    }
}
