//! Files out: a 50 MB document streamed through the gateway to Telegram (`POST /v1/media`,
//! then `POST /v1/messages` naming it), with the gateway's memory before and after; and the
//! time a 1 MB photo takes from submit to the platform against a text message's. The same
//! steps serve the independent homeserver ([`super::indep`]) through [`Dest`].

use std::time::{Duration, Instant, SystemTime};

use hermes_svc::api::wire::SendBody;
use hermes_svc::mock_platform::{MockPlatform, Platform, Post};

use crate::proc::cpu_ns;

use super::rig::{document, ms, png, sha256, wait_post, Rig, TG_CHAT};

/// The 50 MB file out, as measured.
pub(super) struct BigOut {
    pub(super) bytes: u64,
    pub(super) rss_before_kib: u64,
    /// The all-time peak when the file was sent: start-up's included.
    pub(super) hwm_before_kib: u64,
    pub(super) hwm_kib: u64,
    pub(super) rss_after_kib: u64,
    pub(super) upload_ms: f64,
    /// Submit → its answer (the outbox's copy made and the message durable).
    pub(super) answer_ms: f64,
    /// Submit → the platform has the whole post.
    pub(super) post_ms: f64,
    pub(super) gateway_cpu_ms: f64,
    pub(super) same_bytes: bool,
    pub(super) method: String,
}

/// Submit → post for a text message and a 1 MB photo, alternating, in ms (unsorted).
pub(super) struct OutLatency {
    pub(super) photo_bytes: usize,
    pub(super) text: Vec<f64>,
    pub(super) photo: Vec<f64>,
    /// `POST /v1/media` of the photo, before each photo's submit.
    pub(super) upload: Vec<f64>,
    pub(super) photo_method: String,
}

/// What a platform kept of a file it was sent.
pub(super) struct Landed {
    /// How it was sent: the upload's form field, or the event's msgtype.
    pub(super) method: String,
    pub(super) bytes: u64,
    pub(super) sha256: String,
}

/// Where files go out: a chat on a platform whose posts the bench can read back.
pub(super) trait Dest {
    /// A post as the platform recorded it.
    type Post;
    /// The message `text`, with `attachments`, to the chat, idempotent under `key`.
    fn message(&self, key: &str, text: &str, attachments: Vec<String>) -> SendBody;
    /// The first post whose text (or caption) is `text`, waited for up to `limit`.
    async fn wait_post(&self, text: &str, limit: Duration) -> Option<Self::Post>;
    /// When the platform had `post`, in ms after the submit at `started` (`wall` on the
    /// system clock, for a server in another process).
    fn at_ms(&self, post: &Self::Post, started: Instant, wall: SystemTime) -> f64;
    /// The file `post` carries, if any.
    async fn landed(&self, post: &Self::Post) -> Option<Landed>;
}

/// The built-in mock's Telegram chat.
pub(super) struct Telegram<'a>(pub(super) &'a MockPlatform);

impl Dest for Telegram<'_> {
    type Post = Post;

    fn message(&self, key: &str, text: &str, attachments: Vec<String>) -> SendBody {
        SendBody {
            adapter: "tg".into(),
            target: TG_CHAT.into(),
            text: text.into(),
            reply_to: None,
            idempotency_key: key.into(),
            policy: None,
            attachments,
        }
    }

    async fn wait_post(&self, text: &str, limit: Duration) -> Option<Post> {
        wait_post(self.0, limit, |p| {
            p.platform == Platform::Telegram && p.content == text
        })
        .await
    }

    fn at_ms(&self, post: &Post, started: Instant, _wall: SystemTime) -> f64 {
        ms(started, post.received_at)
    }

    async fn landed(&self, post: &Post) -> Option<Landed> {
        post.files.first().map(|f| Landed {
            method: f.field.clone(),
            bytes: f.bytes,
            sha256: f.sha256.clone(),
        })
    }
}

/// `bytes` written to the rig's scratch directory and put into the store through the API:
/// its id, and how long the upload took in ms.
pub(super) async fn upload(rig: &Rig, name: &str, bytes: &[u8]) -> (String, f64) {
    let path = rig.scratch().join(name);
    std::fs::write(&path, bytes).unwrap();
    let file = tokio::fs::File::open(&path).await.unwrap();
    let started = Instant::now();
    let up = rig
        .client
        .upload(file, bytes.len() as u64, name)
        .await
        .unwrap_or_else(|e| panic!("upload of {name} refused: {e}"));
    let took = started.elapsed().as_secs_f64() * 1000.0;
    assert_eq!(up.sha256, sha256(bytes), "the store holds what was sent");
    std::fs::remove_file(&path).unwrap();
    (up.id, took)
}

/// Submit `b` and wait for its post (the one whose caption or text is `b.text`): the time
/// from before the submit to its answer and to the platform having the post, in ms.
async fn send<D: Dest>(rig: &Rig, dest: &D, b: &SendBody, limit: Duration) -> (f64, f64, D::Post) {
    let (started, wall) = (Instant::now(), SystemTime::now());
    let submitted = rig
        .client
        .submit(b)
        .await
        .unwrap_or_else(|e| panic!("submit {} refused: {e}", b.idempotency_key));
    let answered = ms(started, Instant::now());
    let Some(post) = dest.wait_post(&b.text, limit).await else {
        let m = rig.client.message(&submitted.message.id).await;
        panic!("{} never reached the platform: {m:?}", b.idempotency_key);
    };
    (answered, dest.at_ms(&post, started, wall), post)
}

/// A 50,000,000-byte document out to the chat, after start-up has settled.
pub(super) async fn big_out(rig: &Rig, dest: &impl Dest) -> BigOut {
    const LEN: usize = 50_000_000;
    let bytes = document(LEN);
    let want = sha256(&bytes);
    // Written before the first reading, so the bench's own 50 MB is not in the gateway's.
    let path = rig.scratch().join("big.bin");
    std::fs::write(&path, &bytes).unwrap();
    drop(bytes);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pid = rig.pid();
    let (rss_before_kib, hwm_before_kib) = rig.memory();
    let cpu0 = cpu_ns(pid);

    let file = tokio::fs::File::open(&path).await.unwrap();
    let started = Instant::now();
    let up = rig
        .client
        .upload(file, LEN as u64, "big.bin")
        .await
        .unwrap_or_else(|e| panic!("the 50 MB upload was refused: {e}"));
    let upload_ms = ms(started, Instant::now());
    assert_eq!(up.sha256, want, "the store holds what was sent");
    assert_eq!(up.bytes, LEN as u64);
    std::fs::remove_file(&path).unwrap();

    let b = dest.message("big-out", "big-out", vec![up.id]);
    let (answer_ms, post_ms, post) = send(rig, dest, &b, Duration::from_secs(300)).await;
    let gateway_cpu_ms = (cpu_ns(pid) - cpu0) as f64 / 1e6;
    // The `sent` record is written just after the post; give it and the allocator a moment.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (rss_after_kib, hwm_kib) = rig.memory();
    let file = dest.landed(&post).await;
    BigOut {
        bytes: file.as_ref().map_or(0, |f| f.bytes),
        rss_before_kib,
        hwm_before_kib,
        hwm_kib,
        rss_after_kib,
        upload_ms,
        answer_ms,
        post_ms,
        gateway_cpu_ms,
        same_bytes: file.as_ref().is_some_and(|f| f.sha256 == want),
        method: file.map_or("none".into(), |f| f.method),
    }
}

/// `runs` text messages and `runs` 1 MB photos to the chat, alternating, one at a time.
pub(super) async fn out_latency(rig: &Rig, dest: &impl Dest, runs: usize) -> OutLatency {
    const LEN: usize = 1_000_000;
    let photo = png(LEN);
    let want = sha256(&photo);
    let limit = Duration::from_secs(30);
    // One of each first, not counted: connections and the first allocations.
    let mut result = OutLatency {
        photo_bytes: LEN,
        text: vec![],
        photo: vec![],
        upload: vec![],
        photo_method: String::new(),
    };
    for i in 0..=runs {
        // Which goes first alternates, so neither always follows the other's work.
        let (mut to_post, mut p_post, mut up_ms) = (0.0, 0.0, 0.0);
        for photo_turn in [i % 2 == 1, i % 2 == 0] {
            if !photo_turn {
                let text = format!("tout-{i:03} the quick brown fox jumps over the lazy dog");
                let b = dest.message(&text, &text, vec![]);
                to_post = send(rig, dest, &b, limit).await.1;
                continue;
            }
            let (id, took) = upload(rig, &format!("p{i:03}.png"), &photo).await;
            let caption = format!("pout-{i:03}");
            let b = dest.message(&caption, &caption, vec![id]);
            let (_, at, post) = send(rig, dest, &b, limit).await;
            let file = dest.landed(&post).await;
            let file = file.expect("the photo's post carries it");
            assert_eq!(file.sha256, want, "the platform has the same bytes");
            result.photo_method = file.method;
            (p_post, up_ms) = (at, took);
        }
        if i > 0 {
            result.text.push(to_post);
            result.photo.push(p_post);
            result.upload.push(up_ms);
        }
    }
    result
}
