//! The LaunchAgent plist: reference renders in `units/launchd/`, and every render read back by
//! two independent parsers, the `plist` crate and Python's `plistlib` (expat underneath), which
//! must agree with each other and with what went in.
//!
//! Run with `HERMES_UPDATE_UNITS=1` to regenerate the reference renders after an intended change.

use std::path::{Path, PathBuf};
use std::process::Command;

use hermes_svc::launchd::plist::{self as agent_plist, LaunchAgent, Overrides};
use hermes_svc::profile::{Profile, ProfileName};
use hermes_svc::service::definition::Provenance;
use serde_json::{json, Value as Json};

use crate::harness::scratch_dir;

const PROGRAM: &str = "/usr/local/bin/hermes-svc";

fn agent(name: &str, hermes_home: &str) -> LaunchAgent {
    LaunchAgent::new(
        Profile::new(ProfileName::parse(name).unwrap(), hermes_home.into()).unwrap(),
        PROGRAM.into(),
    )
}

fn sample_overrides() -> Overrides {
    let mut o = Overrides::default();
    o.set("RestartSec", "30").unwrap();
    o.set("WatchdogSec", "60").unwrap();
    o.set("HTTPS_PROXY", "http://proxy:8080").unwrap();
    o
}

fn check(name: &str, rendered: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("units/launchd")
        .join(name);
    if std::env::var_os("HERMES_UPDATE_UNITS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, rendered).unwrap();
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        on_disk, rendered,
        "units/launchd/{name} drifted from the renderer; rerun with HERMES_UPDATE_UNITS=1 and review the diff"
    );
}

#[test]
fn reference_plists_match_the_renderer() {
    let plain = agent("coder", "/Users/alice/.hermes");
    check("ai.hermes.gateway.coder.plist", &plain.render().unwrap());

    let overrides = sample_overrides();
    let mut custom = plain.clone();
    overrides.apply(&mut custom);
    check(
        "with-overrides/ai.hermes.gateway.coder.plist",
        &custom.render().unwrap(),
    );
    check("with-overrides/launchd-overrides.toml", &overrides.render());
}

/// The plist at `path` as Python's `plistlib` reads it: its top-level keys in file order, and
/// the whole value as JSON.
fn plistlib(path: &Path) -> (Vec<String>, Json) {
    const SCRIPT: &str = "import json, plistlib, sys\n\
        with open(sys.argv[1], 'rb') as f:\n    d = plistlib.load(f)\n\
        print(json.dumps({'keys': list(d), 'value': d}))\n";
    let out = Command::new("python3")
        .args(["-c", SCRIPT])
        .arg(path)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "plistlib refused {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut v: Json = serde_json::from_slice(&out.stdout).unwrap();
    let keys = v["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap().to_owned())
        .collect();
    (keys, v["value"].take())
}

/// The same file as the `plist` crate reads it, in the same JSON shape.
fn crate_reading(path: &Path) -> (Vec<String>, Json) {
    fn json(v: &plist::Value) -> Json {
        match v {
            plist::Value::String(s) => Json::String(s.clone()),
            plist::Value::Boolean(b) => Json::Bool(*b),
            plist::Value::Integer(i) => json!(i.as_signed().unwrap()),
            plist::Value::Array(a) => Json::Array(a.iter().map(json).collect()),
            plist::Value::Dictionary(d) => {
                Json::Object(d.iter().map(|(k, v)| (k.clone(), json(v))).collect())
            }
            other => panic!("the renderer never writes {other:?}"),
        }
    }
    let v = plist::Value::from_file(path).unwrap();
    let keys = v.as_dictionary().unwrap().keys().cloned().collect();
    (keys, json(&v))
}

/// Write `agent`'s render where launchd would look for it under `home`, and read it back with
/// both parsers, which must agree on every key, value and the key order.
fn write_and_read(agent: &LaunchAgent, home: &Path) -> (PathBuf, String, Json) {
    let text = agent.render().unwrap();
    let path = agent.path(home);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, &text).unwrap();
    let (py_keys, py) = plistlib(&path);
    let (rs_keys, rs) = crate_reading(&path);
    assert_eq!(py_keys, rs_keys, "key order");
    assert_eq!(py, rs, "plistlib and the plist crate disagree on\n{text}");
    (path, text, py)
}

#[test]
fn both_parsers_read_the_contract() {
    let home = scratch_dir("plist-contract");
    let a = agent("coder", "/Users/alice/.hermes");
    let (path, _, v) = write_and_read(&a, home.path());
    assert_eq!(
        path.file_name().unwrap().to_str().unwrap(),
        "ai.hermes.gateway.coder.plist"
    );
    assert_eq!(
        v,
        json!({
            "Label": "ai.hermes.gateway.coder",
            "ProgramArguments": [PROGRAM, "gateway", "run", "--profile", "coder"],
            "EnvironmentVariables": {
                "HERMES_HOME": "/Users/alice/.hermes",
                "HERMES_SERVICE_MANAGER": "launchd",
            },
            "RunAtLoad": true,
            "KeepAlive": {"SuccessfulExit": false},
            "ThrottleInterval": 10,
            "ExitTimeOut": 30,
            "ProcessType": "Standard",
            "LimitLoadToSessionType": ["Aqua", "Background"],
            "StandardOutPath": "/Users/alice/.hermes/profiles/coder/logs/gateway.out.log",
            "StandardErrorPath": "/Users/alice/.hermes/profiles/coder/logs/gateway.err.log",
        })
    );
}

#[test]
fn label_equals_the_file_name_for_every_profile() {
    let home = scratch_dir("plist-label");
    for name in [
        "default",
        "coder",
        "a",
        "0bot",
        "my_bot-2",
        "x--y",
        &"z".repeat(64),
    ] {
        let a = agent(name, "/Users/alice/.hermes");
        let (path, text, v) = write_and_read(&a, home.path());
        let stem = path.file_stem().unwrap().to_str().unwrap();
        assert_eq!(v["Label"], stem, "{name}");
        assert_eq!(
            agent_plist::profile_of_file(path.file_name().unwrap().to_str().unwrap())
                .unwrap()
                .as_str(),
            name
        );
        let args = v["ProgramArguments"].as_array().unwrap();
        assert_eq!(args[3..], [json!("--profile"), json!(name)], "{name}");
        assert!(!args.contains(&json!("--replace")), "{name}");
        assert_eq!(agent_plist::provenance(&text), Provenance::Pristine);
    }
}

/// Strings an escaper gets wrong: the five XML specials, what looks like markup or an entity
/// already, comment and CDATA ends, and text beyond ASCII (accents, CJK, astral emoji,
/// combining marks, right-to-left, U+2028), with spaces at the ends.
const HOSTILE: &[&str] = &[
    "& < > \" '",
    "&amp; &lt; &#38; &#x26; &unknown;",
    "</string></dict><key>Label</key><string>evil",
    "<!-- x --> ]]> <![CDATA[ y ]]>",
    "<?xml version=\"1.0\"?>",
    "  leading and trailing  ",
    "café 日本語 🚀 e\u{301} \u{5e9}\u{5dc}\u{5d5}\u{5dd} \u{2028} \u{feff}",
    "$HOME %h %% \\n \\ `id`",
];

#[test]
fn hostile_paths_and_values_round_trip_exactly_through_both_parsers() {
    let home = scratch_dir("plist-hostile");
    for (i, s) in HOSTILE.iter().enumerate() {
        let hermes_home = format!("/Users/al ice/{s}/.hermes");
        let mut a = agent("coder", &hermes_home);
        a.env.insert("HOSTILE".into(), (*s).to_owned());
        a.env
            .insert("ALSO_IN_A_URL".into(), format!("http://u:p@h/?a=1&b=<{s}>"));
        let sub = home.path().join(i.to_string());
        let (_, text, v) = write_and_read(&a, &sub);
        let env = &v["EnvironmentVariables"];
        assert_eq!(env["HOSTILE"], *s, "{text}");
        assert_eq!(env["ALSO_IN_A_URL"], format!("http://u:p@h/?a=1&b=<{s}>"));
        assert_eq!(env["HERMES_HOME"], hermes_home);
        assert_eq!(
            v["StandardErrorPath"],
            format!("{hermes_home}/profiles/coder/logs/gateway.err.log")
        );
        assert_eq!(v["Label"], "ai.hermes.gateway.coder", "{text}");
        assert_eq!(v.as_object().unwrap().len(), 11, "no key injected: {text}");
        assert_eq!(agent_plist::provenance(&text), Provenance::Pristine);
    }
}

#[test]
fn a_hand_edit_is_detected_and_a_rewrite_by_another_tool_reads_as_foreign() {
    let home = scratch_dir("plist-edit");
    let a = agent("coder", "/Users/alice/.hermes");
    let (path, text, _) = write_and_read(&a, home.path());
    assert_eq!(agent_plist::provenance(&text), Provenance::Pristine);

    // A person raises the throttle in an editor: the header stays, the hash no longer matches.
    let edited = text.replace(
        "<key>ThrottleInterval</key>\n\t<integer>10</integer>",
        "<key>ThrottleInterval</key>\n\t<integer>60</integer>",
    );
    assert_ne!(edited, text);
    assert_eq!(agent_plist::provenance(&edited), Provenance::Edited);

    // plistlib (like plutil or Xcode) writes the same job back without our comments.
    let script = "import plistlib, sys\np = sys.argv[1]\nd = plistlib.load(open(p, 'rb'))\n\
        plistlib.dump(d, open(p, 'wb'))\n";
    let st = Command::new("python3")
        .args(["-c", script])
        .arg(&path)
        .status()
        .unwrap();
    assert!(st.success());
    let rewritten = std::fs::read_to_string(&path).unwrap();
    assert_eq!(agent_plist::provenance(&rewritten), Provenance::Foreign);
    let (_, same) = plistlib(&path);
    let (_, original) = crate_reading(&{
        let p = home.path().join("original.plist");
        std::fs::write(&p, &text).unwrap();
        p
    });
    assert_eq!(same, original, "the rewrite is the same job");
}

#[test]
fn overrides_from_the_profile_home_merge_into_the_render() {
    let home = scratch_dir("plist-overrides");
    let hermes_home = home.path().join(".hermes");
    let mut a = agent("coder", hermes_home.to_str().unwrap());
    let file = Overrides::path(&a.profile);
    assert!(file.starts_with(a.profile.home()));
    assert!(Overrides::load(&file).unwrap().is_empty(), "no file yet");

    let mut o = Overrides::load(&file).unwrap();
    o.set("RestartSec", "30").unwrap();
    o.set("HTTPS_PROXY", "http://proxy:8080").unwrap();
    o.set("GREETING", "héllo & <bye>").unwrap();
    o.save(&file).unwrap();
    let mut again = Overrides::load(&file).unwrap();
    assert_eq!(again, o);
    assert!(again.unset("GREETING").unwrap());
    again.save(&file).unwrap();

    Overrides::load(&file).unwrap().apply(&mut a);
    let (_, text, v) = write_and_read(&a, home.path());
    assert_eq!(v["ThrottleInterval"], 30);
    assert_eq!(
        v["EnvironmentVariables"],
        json!({
            "HERMES_HOME": hermes_home.to_str().unwrap(),
            "HERMES_SERVICE_MANAGER": "launchd",
            "HTTPS_PROXY": "http://proxy:8080",
        })
    );
    assert_eq!(agent_plist::provenance(&text), Provenance::Pristine);

    // A hand edit of the overrides file that breaks it is reported, not skipped.
    std::fs::write(&file, "[env]\nBOT_TOKEN = \"123:abc\"\n").unwrap();
    let err = Overrides::load(&file).unwrap_err().to_string();
    assert!(err.contains(&file.display().to_string()), "{err}");
    assert!(err.contains("[env] BOT_TOKEN"), "{err}");
    assert!(err.contains(".env"), "{err}");
}
