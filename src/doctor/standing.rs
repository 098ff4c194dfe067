//! Asking the platforms about their adapters' standing (`platform::standing`): every
//! profile's questions at once, [`AT_ONCE`] at most in flight, each within
//! [`ASK_TIMEOUT`]. Part of gathering, so the check (HSV020) stays pure: it reads only the
//! answers recorded here, and every credential is dropped with its question.

use futures_util::stream::{self, StreamExt};

use crate::platform::standing::{Question, Standing, ASK_TIMEOUT};

/// Questions in flight at once, across all profiles: a machine with hundreds of bots asks in
/// a few rounds of [`ASK_TIMEOUT`] at worst, without hundreds of sockets.
pub(crate) const AT_ONCE: usize = 32;

/// Ask every question, `(index of its profile, question)`; each answer as `(index of its
/// profile, adapter, standing)`, in the order the questions came.
pub(crate) async fn ask(questions: Vec<(usize, Question)>) -> Vec<(usize, String, Standing)> {
    if questions.is_empty() {
        return vec![];
    }
    let mut answers: Vec<_> = match client() {
        Ok(http) => {
            let http = &http;
            stream::iter(questions.into_iter().enumerate())
                .map(|(n, (p, q))| async move {
                    let adapter = q.adapter.clone();
                    (n, p, adapter, q.ask(http.clone()).await)
                })
                .buffer_unordered(AT_ONCE)
                .collect()
                .await
        }
        Err(e) => {
            let why = format!("no HTTP client: {}", crate::error_chain::one_line(&e));
            questions
                .into_iter()
                .enumerate()
                .map(|(n, (p, q))| (n, p, q.adapter.clone(), q.unasked(why.clone())))
                .collect()
        }
    };
    answers.sort_by_key(|a| a.0);
    answers
        .into_iter()
        .map(|(_, p, adapter, standing)| (p, adapter, standing))
        .collect()
}

fn client() -> Result<reqwest::Client, reqwest::Error> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(ASK_TIMEOUT)
        .connect_timeout(ASK_TIMEOUT)
        // A redirect is not the platform answering: say so rather than follow it.
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("hermes-svc/", env!("CARGO_PKG_VERSION")))
        .build()
}
