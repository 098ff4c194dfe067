//! A chat message's files reach the real Hermes agent as local files: a Telegram photo is
//! fetched with the bot's token (`getFile`, then the file path), a Discord attachment from
//! its CDN URL and a QQ attachment with the bot's access token into the profile's media store, and the model gets its pixels, the same bytes,
//! through either bridge; a text document's content is put in the text; a file that cannot be
//! fetched (too large, an expired link) is said; a voice note and a PDF arrive as local files
//! of their kind (over the Relay, Hermes's STT gets the voice note's bytes). The token never
//! reaches Hermes.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use hermes_svc::mock_platform::telegram::TelegramConfig;
use nix::sys::signal::Signal;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::harness::{free_port, wait_for};
use crate::hermes_rig::{signal, stop, Rig};

/// A 1×1 PNG.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x02\0\0\0\x90wS\xde\0\0\0\x0cIDATx\x9cc\xf8\xcf\xc0\0\0\x03\x01\x01\0\xc9\xfe\x92\xef\0\0\0\0IEND\xaeB`\x82";

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The model call whose user text contains `text`.
fn model_call(rig: &Rig, text: &str) -> serde_json::Value {
    wait_for(
        Duration::from_secs(120),
        &format!("the model to be asked {text:?}"),
        || {
            rig.model_calls().into_iter().find(|c| {
                c["kind"] == "chat" && c["last_user"].as_str().is_some_and(|u| u.contains(text))
            })
        },
    )
}

/// Wait until the gateway's state file says Hermes has dialled its Relay.
fn dialled_in(rig: &Rig) {
    wait_for(Duration::from_secs(30), "Hermes to dial in", || {
        let s: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(rig.profile_home().join("state/gateway.json")).ok()?,
        )
        .ok()?;
        (s["agent"]["connected"] == true).then_some(())
    });
}

/// A photo, a text document and a photo too large to fetch, each from Telegram, each reaching
/// the model as it should.
fn media_reaches_the_model(rig: &Rig, tag: &str) {
    let chat = TelegramConfig::default().chats[0];
    rig.mock
        .telegram_emit_photo(chat, &format!("look {tag}"), PNG.to_vec());
    let call = model_call(rig, &format!("look {tag}"));
    let images = call["images"].as_array().cloned().unwrap_or_default();
    assert_eq!(images.len(), 1, "the pixels, once: {call}");
    assert_eq!(images[0]["sha256"], sha(PNG), "the same bytes: {call}");
    assert_eq!(images[0]["mime"], "image/png");
    rig.wait_post(&format!("look {tag}"));

    let notes = format!("the secret word is apricot-{tag}");
    rig.mock
        .telegram_emit_document(chat, "notes.txt", notes.clone().into_bytes());
    let call = model_call(rig, &notes);
    let text = call["last_user"].as_str().unwrap();
    assert!(text.contains("[Content of notes.txt]:"), "{text}");
    rig.wait_post(&notes);

    // Over Telegram's 20 MB download limit: getFile gives no path; the agent is told.
    rig.mock.telegram_emit_photo(
        chat,
        &format!("too big {tag}"),
        vec![0u8; 20 * 1000 * 1000 + 1],
    );
    let call = model_call(rig, &format!("too big {tag}"));
    let text = call["last_user"].as_str().unwrap();
    assert!(
        text.contains("[a photo that could not be fetched: the file is larger than"),
        "{text}"
    );
    rig.wait_post(&format!("too big {tag}"));

    // A Discord attachment, fetched from its (signed) CDN URL; and one whose URL has expired.
    let photo = rig
        .discord
        .discord_attachment("2001", "pic.png", "image/png", PNG.to_vec(), 300);
    let expired = rig
        .discord
        .discord_attachment("2001", "old.png", "image/png", PNG.to_vec(), -10);
    for (n, (attachment, text)) in [(photo, "discord look"), (expired, "discord old")]
        .into_iter()
        .enumerate()
    {
        rig.discord.emit_dispatch(
            "MESSAGE_CREATE",
            &format!("dm-{tag}-{n}"),
            json!({"id": format!("77{n}{}", tag.len()), "channel_id": "2001", "guild_id": "3001",
                   "author": {"id": "4001", "username": "ann"},
                   "content": format!("{text} {tag}"), "attachments": [attachment]}),
        );
    }
    let call = model_call(rig, &format!("discord look {tag}"));
    let images = call["images"].as_array().cloned().unwrap_or_default();
    assert_eq!(images.len(), 1, "{call}");
    assert_eq!(images[0]["sha256"], sha(PNG));
    let call = model_call(rig, &format!("discord old {tag}"));
    let text = call["last_user"].as_str().unwrap();
    assert!(
        text.contains("[a photo that could not be fetched: the platform answered HTTP 404"),
        "{text}"
    );
    assert!(
        call["images"].as_array().is_none_or(Vec::is_empty),
        "{call}"
    );

    // A QQ group attachment, fetched with the bot's access token (the mock refuses it without).
    let attachment = rig.mock.qq_attachment("pic.png", "image/png", PNG.to_vec());
    rig.mock.emit_dispatch(
        "GROUP_AT_MESSAGE_CREATE",
        &format!("q-media-{tag}"),
        json!({"author": {"member_openid": "MQ"}, "content": format!(" qq look {tag}"),
               "group_openid": "GQ", "id": format!("msg-q-media-{tag}"),
               "attachments": [attachment]}),
    );
    let call = model_call(rig, &format!("qq look {tag}"));
    let images = call["images"].as_array().cloned().unwrap_or_default();
    assert_eq!(images.len(), 1, "{call}");
    assert_eq!(images[0]["sha256"], sha(PNG));
}

/// The stored file a model call's text names (a path in the profile's media store), read
/// back.
fn named_file(rig: &Rig, text: &str) -> Vec<u8> {
    let store = rig.profile_home().join("media");
    let store = store.to_str().unwrap();
    let at = text
        .find(store)
        .unwrap_or_else(|| panic!("a path in {store} in {text:?}"));
    let path = text[at..]
        .split([' ', ']', '\n', '\''])
        .next()
        .unwrap()
        .trim_end_matches('.');
    std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A voice note and a PDF from Telegram arrive as local files of their kind: over the Relay
/// Hermes's STT gets the voice note's bytes and the model its transcript, and the model is
/// told where the PDF is saved, under its own name; through the API server the text names
/// each stored file by its kind. Either way the file named holds the bytes sent.
fn voice_and_pdf_arrive_as_local_files(rig: &Rig, tag: &str, relay: bool) {
    let chat = TelegramConfig::default().chats[0];
    let mut voice = b"OggS\0\x02".to_vec();
    voice.extend(format!("a voice note {tag}").bytes().cycle().take(4000));
    rig.mock.telegram_emit_voice(chat, voice.clone());
    if relay {
        let transcript = format!("TRANSCRIPT sha256={}", sha(&voice));
        let stt = wait_for(Duration::from_secs(60), "Hermes's STT call", || {
            rig.model_calls()
                .into_iter()
                .find(|c| c["kind"] == "transcription" && c["sha256"] == sha(&voice))
        });
        assert_eq!(stt["status"], 200, "{stt}");
        model_call(rig, &transcript);
        // The voice note's turn ends (its answer is posted) before the PDF comes: a message
        // that reaches Hermes while a turn of its chat runs interrupts that turn.
        rig.wait_post(&transcript);
    } else {
        let call = model_call(rig, "[voice: ");
        let text = call["last_user"].as_str().unwrap();
        assert_eq!(sha(&named_file(rig, text)), sha(&voice), "{text}");
        rig.wait_post("[voice: ");
    }

    let name = format!("report-{tag}.pdf");
    let mut pdf = b"%PDF-1.4\n".to_vec();
    pdf.extend(format!("a report {tag} ").bytes().cycle().take(20_000));
    rig.mock.telegram_emit_document(chat, &name, pdf.clone());
    let call = model_call(rig, &name);
    let text = call["last_user"].as_str().unwrap();
    if relay {
        assert!(
            text.contains(&format!(
                "[The user sent a document: '{name}'. It is saved at: "
            )),
            "Hermes's own note for a document, under the name sent: {text}"
        );
    } else {
        assert!(text.contains("[document: "), "{text}");
    }
    assert_eq!(sha(&named_file(rig, text)), sha(&pdf), "{text}");
}

/// What the store holds, and that no model call or Hermes log holds the bot's token.
fn the_store_is_private_and_the_token_stays(rig: &Rig) {
    let store = rig.profile_home().join("media");
    let files: Vec<_> = std::fs::read_dir(&store)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(
        files.iter().any(|p| p
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("photo_")),
        "{files:?}"
    );
    for f in &files {
        let mode = std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & 0o027, 0, "{f:?} is {mode:o}");
    }
    let token = TelegramConfig::default().token;
    let log = std::fs::read_to_string(&rig.model_log).unwrap_or_default();
    assert!(!log.contains(&token), "the token reached the model");
    assert!(
        !rig.hermes_log().contains(&token),
        "the token reached Hermes"
    );
    assert!(
        !rig.log().contains(&token),
        "the token is in the gateway's log"
    );
}

#[test]
fn a_messages_files_reach_hermes_as_local_files_through_the_relay() {
    let port = free_port();
    let rig = Rig::new(
        "hamrelay",
        &format!("[agent]\nkind = \"hermes-relay\"\nport = {port}\nturn-timeout = \"60s\"\n"),
    );
    let mut gw = rig.gateway();
    rig.wait_connected(&mut gw);
    let mut hermes = rig.hermes_relay(port);
    dialled_in(&rig);
    media_reaches_the_model(&rig, "relay");
    voice_and_pdf_arrive_as_local_files(&rig, "relay", true);
    the_store_is_private_and_the_token_stays(&rig);
    stop(&mut hermes);
    signal(&mut gw, Signal::SIGTERM);
    let _ = gw.wait();
}

#[test]
fn a_messages_files_reach_hermes_as_local_files_through_its_api_server() {
    let api = free_port();
    let rig = Rig::new(
        "hamapi",
        &format!(
            "[agent]\nkind = \"openai\"\nurl = \"http://127.0.0.1:{api}/v1\"\n\
             key-env = \"HA_API_KEY\"\nturn-timeout = \"60s\"\n"
        ),
    );
    let mut hermes = rig.hermes_api(api);
    let mut gw = rig.gateway();
    rig.wait_connected(&mut gw);
    media_reaches_the_model(&rig, "api");
    voice_and_pdf_arrive_as_local_files(&rig, "api", false);
    the_store_is_private_and_the_token_stays(&rig);
    stop(&mut hermes);
    signal(&mut gw, Signal::SIGTERM);
    let _ = gw.wait();
}

/// The files in Hermes's answer reach the chat as files: an image Hermes gave back inline (its
/// API server makes `MEDIA:/…png` a data URL) as a Telegram photo with the same bytes, a PDF
/// named by its `MEDIA:` path inside the agent's home as a document; a path outside the home
/// and the home's own `.env` are not sent, and said. No base64 reaches the chat.
#[test]
fn files_in_hermess_answer_reach_the_chat_natively_through_its_api_server() {
    let api = free_port();
    let rig = Rig::new(
        "hamout",
        &format!(
            "[agent]\nkind = \"openai\"\nurl = \"http://127.0.0.1:{api}/v1\"\n\
             key-env = \"HA_API_KEY\"\nturn-timeout = \"60s\"\n"
        ),
    );
    let out = rig.profile_home().join("agent/hermes/cache/out");
    std::fs::create_dir_all(&out).unwrap();
    let pdf = b"%PDF-1.4\nthe quarterly report\n%%EOF\n".to_vec();
    std::fs::write(out.join("chart.png"), PNG).unwrap();
    std::fs::write(out.join("report.pdf"), &pdf).unwrap();
    std::fs::write(
        rig.profile_home().join("agent/hermes/.env"),
        b"KEY=sk-secret",
    )
    .unwrap();
    let mut hermes = rig.hermes_api(api);
    let mut gw = rig.gateway();
    rig.wait_connected(&mut gw);

    let chat = TelegramConfig::default().chats[0];
    let text = format!(
        "files please MEDIA:{} MEDIA:{} MEDIA:{} MEDIA:{}",
        out.join("chart.png").display(),
        out.join("report.pdf").display(),
        rig.profile_home().join("gateway.toml").display(),
        rig.profile_home().join("agent/hermes/.env").display(),
    );
    rig.mock.telegram_emit_text(chat, &text);
    let said = rig.wait_post("files please");
    assert_eq!(said.len(), 1, "{said:?}");
    let said = &said[0].content;
    assert!(
        !said.contains("base64") && !said.contains("MEDIA:"),
        "{said}"
    );
    assert!(
        said.contains("gateway.toml, was not sent: it is outside the agent's home"),
        "{said}"
    );
    assert!(said.contains(".env, was not sent"), "{said}");
    let files = wait_for(
        Duration::from_secs(60),
        "the photo and the document",
        || {
            let files: Vec<_> = rig.posts().into_iter().flat_map(|p| p.files).collect();
            (files.len() >= 2).then_some(files)
        },
    );
    let sent: Vec<(&str, &str)> = files
        .iter()
        .map(|f| (f.field.as_str(), f.sha256.as_str()))
        .collect();
    assert_eq!(
        sent,
        [
            ("photo", sha(PNG).as_str()),
            ("document", sha(&pdf).as_str())
        ]
    );
    assert!(!rig.log().contains("sk-secret"));
    stop(&mut hermes);
    signal(&mut gw, Signal::SIGTERM);
    let _ = gw.wait();
}

/// Through the Relay, Hermes 0.19.0 carries no file: for a `MEDIA:` path in its answer it
/// sends the text with the tag cut out, then `⚠️ Couldn't deliver the image attachment.`
/// replying to nothing. The text is posted as the answer; the notice is not posted at all.
#[test]
fn hermess_own_notice_for_a_file_over_the_relay_is_not_posted_as_an_answer() {
    let port = free_port();
    let rig = Rig::new(
        "hamnote",
        &format!("[agent]\nkind = \"hermes-relay\"\nport = {port}\nturn-timeout = \"60s\"\n"),
    );
    let out = rig.profile_home().join("agent/hermes/cache/out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("chart.png"), PNG).unwrap();
    let mut gw = rig.gateway();
    rig.wait_connected(&mut gw);
    let mut hermes = rig.hermes_relay(port);
    dialled_in(&rig);
    let chat = TelegramConfig::default().chats[0];
    let text = format!("a chart MEDIA:{}", out.join("chart.png").display());
    rig.mock.telegram_emit_text(chat, &text);
    rig.wait_post("a chart");
    wait_for(
        Duration::from_secs(30),
        "the notice to be turned down",
        || {
            rig.log()
                .contains("its notice is not posted as an answer")
                .then_some(())
        },
    );
    let posted: Vec<String> = rig.posts().into_iter().map(|p| p.content).collect();
    assert!(
        posted.iter().all(|p| !p.contains("Couldn't deliver")),
        "{posted:?}"
    );
    stop(&mut hermes);
    signal(&mut gw, Signal::SIGTERM);
    let _ = gw.wait();
}
