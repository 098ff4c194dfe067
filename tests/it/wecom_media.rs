//! Files someone sends a WeCom AI bot reaching the agent: a real gateway process with a WeCom
//! adapter (the long connection) and the Relay agent bridge, against the mock WeCom in this
//! process. Each callback carries an encrypted link (here on the mock, standing for WeCom's
//! COS bucket) and its own `aeskey`; the file is fetched, decrypted (AES-256-CBC, PKCS#7 to
//! 32) and stored, and the message names the stored file, holding exactly the bytes sent. A
//! damaged ciphertext is said in the message as not fetched, and nothing of it is stored.
//! Profile names start with `wcm`.

use std::collections::HashMap;
use std::fs;

use hermes_svc::mock_platform::wecom::{WeComFileFault, WeComMedia};
use hermes_svc::mock_platform::WeComConfig;
use serde_json::Value;

use crate::media_out::{pdf, photo, sha256};
use crate::outbox_rig::{sigterm, Rig};

const BOT_VAR: &str = "WCM_BOT_ID";
const SECRET_VAR: &str = "WCM_SECRET";

/// Each file from a user of its own, so that their turns run side by side, and the Relay's
/// `inbound` event of each, by user.
#[test]
fn files_reach_the_agent_decrypted_and_a_damaged_one_is_said_and_not_stored() {
    let port = crate::harness::free_port();
    let extra = format!(
        "[[adapter]]\nname = \"wc\"\nkind = \"wecom\"\nbot-id-env = \"{BOT_VAR}\"\n\
         secret-env = \"{SECRET_VAR}\"\nurl = \"{{wecom}}\"\nping-interval = \"1s\"\n\
         backoff-min = \"200ms\"\nbackoff-max = \"1s\"\n\n{}[agent]\n\
         kind = \"hermes-relay\"\nport = {port}\n",
        crate::hermes_rig::OPEN
    );
    let rig = Rig::new("wcmfiles", &extra);
    let path = rig.profile_home().join("gateway.toml");
    let toml = fs::read_to_string(&path).unwrap();
    fs::write(&path, toml.replace("{wecom}", &rig.mock.wecom_url())).unwrap();
    let config = WeComConfig::default();
    let mut gw = rig.gateway_with_env(&[
        (BOT_VAR, config.bot_id.as_str()),
        (SECRET_VAR, config.secret.as_str()),
    ]);
    assert!(rig.wait_api(&mut gw), "{}", rig.log());
    rig.wait_adapter(&gw, "wc");
    let mut agent = crate::relay::greeted(&rig, port);

    let (png, doc) = (photo(), pdf());
    let m = &rig.mock;
    m.wecom_emit_media("img", WeComMedia::Image, &png, None, None);
    m.wecom_emit_media("doc", WeComMedia::File, &doc, Some("minutes.pdf"), None);
    m.wecom_emit_media("mix", WeComMedia::MixedImage, &png, None, None);
    let bad = Some(WeComFileFault::Corrupt);
    m.wecom_emit_media("bad", WeComMedia::Image, &png, None, bad);

    let mut events: HashMap<String, Value> = HashMap::new();
    while events.len() < 4 {
        let inbound = rig.rt.block_on(agent.next_of("inbound"));
        let event = inbound["event"].clone();
        let user = event["source"]["user_id"].as_str().unwrap().to_owned();
        events.insert(user, event);
    }
    let media = rig.profile_home().join("media");
    let stored = |user: &str| {
        let e = &events[user];
        let path = e["media_urls"][0]
            .as_str()
            .unwrap_or_else(|| panic!("a local path for {user}: {e}\n{}", rig.log()));
        assert!(path.starts_with(media.to_str().unwrap()), "{path}");
        (
            e["message_type"].as_str().unwrap().to_owned(),
            fs::read(path).unwrap(),
        )
    };
    for (user, kind, bytes) in [
        ("img", "photo", &png),
        ("doc", "document", &doc),
        ("mix", "photo", &png),
    ] {
        let (said, got) = stored(user);
        assert_eq!(said, kind, "{user}");
        assert_eq!(
            sha256(&got),
            sha256(bytes),
            "{user}: exactly the bytes sent"
        );
    }
    assert_eq!(events["mix"]["text"], "look", "the mixed message's text");

    let damaged = &events["bad"];
    assert!(
        damaged["media_urls"].as_array().is_none_or(Vec::is_empty),
        "{damaged}"
    );
    let text = damaged["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("could not be fetched") && text.contains("padding is not PKCS#7"),
        "{text}"
    );
    // Three files in the store, nothing of the damaged one (not even a temporary file).
    let names: Vec<String> = fs::read_dir(&media)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    // The callback names no file; its download's Content-Disposition does.
    assert!(
        names.iter().any(|n| n.ends_with("_minutes.pdf")),
        "{names:?}"
    );
    assert_eq!(
        rig.mock.wecom_stats().file_downloads,
        4,
        "each link fetched once"
    );
    sigterm(&mut gw);
}
