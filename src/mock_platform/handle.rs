//! The handle a test holds: where the mock listens, the send record every platform writes,
//! and the stop. Each platform adds its own methods in its folder (an `impl MockPlatform`
//! block there) and reaches its state through [`MockPlatform::side`], so this file names none.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::fault::SendFault;
use super::post::{Platform, Post, SendAttempt};
use super::post_record::PostRecord;
use super::side::{Side, Sides};

/// A running mock platform. Dropping it stops every task it started.
pub struct MockPlatform {
    addr: SocketAddr,
    sides: Sides,
    posts: Arc<PostRecord>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl MockPlatform {
    /// A mock already serving `sides` on `addr`, stopped through `shutdown`.
    pub(super) fn new(
        addr: SocketAddr,
        sides: Sides,
        posts: Arc<PostRecord>,
        shutdown: watch::Sender<bool>,
        tasks: Vec<JoinHandle<()>>,
    ) -> MockPlatform {
        MockPlatform {
            addr,
            sides,
            posts,
            shutdown,
            tasks,
        }
    }

    /// The registered side of type `S`, for that platform's methods.
    pub(super) fn side<S: Side>(&self) -> &S {
        self.sides
            .get::<S>()
            .expect("the registry registers every platform's side before the handle exists")
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn http_base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Arms a failure of one platform's send endpoints, replacing any armed before.
    pub fn set_send_fault(&self, platform: Platform, fault: SendFault) {
        self.posts.set_fault(platform, Some(fault));
    }

    pub fn clear_send_fault(&self, platform: Platform) {
        self.posts.set_fault(platform, None);
    }

    /// Every post the send endpoints accepted, in order of acceptance. Also served as JSON
    /// at `GET /_posts`, with the attempts.
    pub fn posts(&self) -> Vec<Post> {
        self.posts.posts()
    }

    /// Every typing indicator asked for (Telegram's `sendChatAction` with `typing`, Discord's
    /// Trigger Typing Indicator), in order: the platform, the chat or channel, and when.
    pub fn typing(&self) -> Vec<(Platform, String, std::time::Instant)> {
        self.posts.typings()
    }

    /// Every request to a send endpoint and its answer, accepted or not, in order of
    /// answer.
    pub fn send_attempts(&self) -> Vec<SendAttempt> {
        self.posts.attempts()
    }

    /// Unlike a plain drop, waits (briefly) for connection tasks to finish so a test that
    /// shuts down and then inspects its client sees the sockets closed.
    pub async fn shutdown(mut self) {
        self.shutdown.send_replace(true);
        for task in std::mem::take(&mut self.tasks) {
            let _ = task.await;
        }
        tracing::info!(addr = %self.addr, "mock platform stopped");
    }
}

impl Drop for MockPlatform {
    fn drop(&mut self) {
        // Dropping the shutdown sender already tells every task to stop; aborting as well
        // makes the stop immediate even if a task is parked on a slow peer.
        for task in &self.tasks {
            task.abort();
        }
    }
}
