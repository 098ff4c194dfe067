//! Files that go with a text a program made (an agent's answer, a cron job's output), posted
//! one message each after the text. A platform's caption is shorter than such a text, and a
//! file the platform refuses (too large, a kind it cannot take) then costs only its own
//! notice, said in the chat, instead of the whole message.

use super::{NewFile, Outbox, Request, SubmitError};

impl Outbox {
    /// Queue each of `files` as a message of its own, addressed as `like` is, with the key
    /// `{like's key}f{i}`; one the outbox refuses becomes a notice (`{key}n{i}`) naming it
    /// as `whose` ("a file from the agent") says. An error is one the notice met too.
    pub async fn submit_files(
        &self,
        like: &Request,
        files: Vec<NewFile>,
        whose: &str,
    ) -> Result<(), SubmitError> {
        for (i, file) in files.into_iter().enumerate() {
            let name = file.name.clone();
            let request = |text: String, files, mark: &str| Request {
                files,
                text,
                idempotency_key: format!("{}{mark}{i}", like.idempotency_key),
                ..like.clone()
            };
            if let Err(e) = self.submit(request(String::new(), vec![file], "f")).await {
                tracing::warn!(error = %e, file = %name, "the outbox refused a file; its notice is sent instead");
                let notice = format!("[{whose}, {name}, could not be posted here: {e}]");
                self.submit(request(notice, vec![], "n")).await?;
            }
        }
        Ok(())
    }
}
