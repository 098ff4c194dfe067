//! Unit tests for the LaunchAgent renderer, its provenance header and the job reader.

use super::*;
use crate::service::definition::Provenance;

fn agent(name: &str, home: &str) -> LaunchAgent {
    LaunchAgent::new(
        Profile::new(ProfileName::parse(name).unwrap(), home.into()).unwrap(),
        "/usr/local/bin/hermes-svc".into(),
    )
}

fn parsed(text: &str) -> Job {
    Job::parse(text.as_bytes()).unwrap()
}

#[test]
fn label_and_file_name_agree() {
    let a = agent("coder", "/Users/alice/.hermes");
    assert_eq!(a.label(), "ai.hermes.gateway.coder");
    let p = a.path(Path::new("/Users/alice"));
    assert_eq!(
        p,
        PathBuf::from("/Users/alice/Library/LaunchAgents/ai.hermes.gateway.coder.plist")
    );
    let stem = p.file_stem().unwrap().to_str().unwrap();
    assert_eq!(stem, a.label());
    assert_eq!(parsed(&a.render().unwrap()).label.as_deref(), Some(stem));
}

#[test]
fn only_our_file_names_map_back_to_a_profile() {
    let name = |s: &str| profile_of_file(s).map(|p| p.to_string());
    assert_eq!(
        name("ai.hermes.gateway.coder.plist").as_deref(),
        Some("coder")
    );
    assert_eq!(
        name("ai.hermes.gateway.default.plist").as_deref(),
        Some("default")
    );
    // hermes-agent's own plists are siblings, not ours.
    assert_eq!(name("ai.hermes.gateway.plist"), None);
    assert_eq!(name("ai.hermes.gateway-coder.plist"), None);
    assert_eq!(name("ai.hermes.gateway.Coder.plist"), None);
    assert_eq!(name("ai.hermes.gateway.coder.plist.bak"), None);
}

#[test]
fn the_job_runs_the_profile_explicitly_and_never_replaces() {
    let text = agent("coder", "/Users/alice/.hermes").render().unwrap();
    let job = parsed(&text);
    assert_eq!(
        job.arguments,
        [
            "/usr/local/bin/hermes-svc",
            "gateway",
            "run",
            "--profile",
            "coder"
        ]
    );
    assert_eq!(job.program.as_deref(), Some("/usr/local/bin/hermes-svc"));
    assert!(!text.contains("--replace"));
    assert!(!job.raw.contains_key("Program"));
    assert!(!job.raw.contains_key("WorkingDirectory"));
}

#[test]
fn keys_come_in_one_fixed_order() {
    let d = agent("coder", "/h").dictionary().unwrap();
    let keys: Vec<&str> = d.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "Label",
            "ProgramArguments",
            "EnvironmentVariables",
            "RunAtLoad",
            "KeepAlive",
            "ThrottleInterval",
            "ExitTimeOut",
            "ProcessType",
            "LimitLoadToSessionType",
            "StandardOutPath",
            "StandardErrorPath",
        ]
    );
}

#[test]
fn environment_has_home_and_marker_and_the_users_pairs() {
    let mut a = agent("coder", "/Users/alice/.hermes");
    a.env.insert("HTTPS_PROXY".into(), "http://p:8080".into());
    a.watchdog_sec = Some(60);
    let job = parsed(&a.render().unwrap());
    let env: Vec<(&str, &str)> = job
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        env,
        [
            ("HERMES_HOME", "/Users/alice/.hermes"),
            ("HERMES_SERVICE_MANAGER", "launchd"),
            ("HERMES_WATCHDOG_SEC", "60"),
            ("HTTPS_PROXY", "http://p:8080"),
        ]
    );
}

#[test]
fn the_users_pairs_cannot_shadow_what_the_renderer_sets() {
    for name in [
        "HERMES_HOME",
        "HERMES_SERVICE_MANAGER",
        "HERMES_WATCHDOG_SEC",
        "NOTIFY_SOCKET",
        "BOT_TOKEN",
        "1BAD",
    ] {
        let mut a = agent("coder", "/h");
        a.env.insert(name.into(), "x".into());
        let err = a.render().unwrap_err();
        assert!(
            matches!(&err, RenderError::Env { name: n, .. } if n == name),
            "{name}: {err}"
        );
    }
}

#[test]
fn logs_go_under_the_profiles_logs_dir() {
    let job = parsed(&agent("coder", "/Users/alice/.hermes").render().unwrap());
    let s = |k: &str| {
        job.raw
            .get(k)
            .and_then(Value::as_string)
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        s("StandardOutPath"),
        "/Users/alice/.hermes/profiles/coder/logs/gateway.out.log"
    );
    assert_eq!(
        s("StandardErrorPath"),
        "/Users/alice/.hermes/profiles/coder/logs/gateway.err.log"
    );
    let default = parsed(&agent("default", "/Users/alice/.hermes").render().unwrap());
    assert_eq!(
        default
            .raw
            .get("StandardErrorPath")
            .and_then(Value::as_string),
        Some("/Users/alice/.hermes/logs/gateway.err.log")
    );
}

#[test]
fn restart_semantics_follow_successful_exit_false() {
    let job = parsed(&agent("coder", "/h").render().unwrap());
    assert!(job.restarts_after_exit(75), "restart me");
    assert!(job.restarts_after_exit(1), "a failure");
    assert!(!job.restarts_after_exit(0), "a conflict or config error");
    let d = &job.raw;
    assert_eq!(d.get("RunAtLoad"), Some(&Value::Boolean(true)));
    assert_eq!(d.get("ThrottleInterval"), Some(&int(THROTTLE_INTERVAL_SEC)));
    assert_eq!(d.get("ExitTimeOut"), Some(&int(30)));
    assert_eq!(
        d.get("ProcessType").and_then(Value::as_string),
        Some("Standard")
    );
    let sessions: Vec<&str> = d
        .get("LimitLoadToSessionType")
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .filter_map(Value::as_string)
        .collect();
    assert_eq!(sessions, ["Aqua", "Background"]);
}

#[test]
fn keep_alive_true_restarts_everything_which_is_the_bug_we_avoid() {
    let text = agent("coder", "/h").render().unwrap().replace(
        "<dict>\n\t\t<key>SuccessfulExit</key>\n\t\t<false/>\n\t</dict>",
        "<true/>",
    );
    let job = parsed(&text);
    assert_eq!(job.keep_alive, Some(Value::Boolean(true)));
    assert!(job.restarts_after_exit(0));
    assert!(job.restarts_after_exit(78));
}

#[test]
fn a_relative_program_or_an_unrepresentable_value_is_refused() {
    let mut a = agent("coder", "/h");
    a.program = "hermes-svc".into();
    assert!(matches!(a.render(), Err(RenderError::RelativeProgram(_))));
    for bad in [
        "a\nb",
        "a\rb",
        "a\tb",
        "\u{1}",
        "\u{7f}",
        "\u{fffe}",
        "x\u{ffff}",
    ] {
        let mut a = agent("coder", "/h");
        a.env.insert("X".into(), bad.into());
        assert!(
            matches!(a.render(), Err(RenderError::Unrepresentable { .. })),
            "{bad:?}"
        );
    }
    let home = agent("coder", "/home/a\nb");
    assert!(matches!(
        home.render(),
        Err(RenderError::Unrepresentable { .. })
    ));
}

#[test]
fn xml_special_characters_are_escaped_and_come_back() {
    let mut a = agent("coder", "/Users/a&b <c> \"d\" 'e'/.hermes");
    a.env.insert("V".into(), "& < > \" ' ]]> é 日本 🚀".into());
    let text = a.render().unwrap();
    assert!(text.contains("a&amp;b &lt;c&gt;"), "{text}");
    assert!(!text.contains("a&b"));
    let job = parsed(&text);
    assert_eq!(job.env["V"], "& < > \" ' ]]> é 日本 🚀");
    assert_eq!(job.env["HERMES_HOME"], "/Users/a&b <c> \"d\" 'e'/.hermes");
    assert_eq!(provenance(&text), Provenance::Pristine);
}

#[test]
fn renders_are_deterministic_and_pristine() {
    let a = agent("coder", "/h");
    let text = a.render().unwrap();
    assert_eq!(text, a.render().unwrap());
    assert_eq!(provenance(&text), Provenance::Pristine);
    assert!(text.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE plist"));
    assert!(text.ends_with("</plist>\n"));
    let header: Vec<&str> = text.lines().skip(2).take(2).collect();
    assert!(header[0].starts_with("<!-- hermes-svc "), "{text}");
    assert!(
        header[1].starts_with("<!-- hermes-svc-hash: sha256:"),
        "{text}"
    );
    for line in header {
        // XML forbids `--` inside a comment.
        let inner = &line[4..line.len() - 3];
        assert!(!inner.contains("--"), "{line}");
    }
}

#[test]
fn an_edit_is_detected_and_a_foreign_file_is_foreign() {
    let text = agent("coder", "/h").render().unwrap();
    let edited = text.replace("<integer>10</integer>", "<integer>11</integer>");
    assert_ne!(edited, text);
    assert_eq!(provenance(&edited), Provenance::Edited);
    // An edit to the XML declaration counts too: only the header lines are left out.
    let decl = text.replace("encoding=\"UTF-8\"", "encoding=\"utf-8\"");
    assert_eq!(provenance(&decl), Provenance::Edited);
    // A broken file that still has our header is ours, edited.
    assert_eq!(provenance(&text[..text.len() / 2]), Provenance::Edited);
    let foreign = text
        .lines()
        .filter(|l| !l.starts_with("<!-- hermes-svc"))
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(provenance(&foreign), Provenance::Foreign);
    assert_eq!(body(&foreign), None);
}

#[test]
fn the_version_alone_does_not_change_the_body() {
    let text = agent("coder", "/h").render().unwrap();
    let other_version = text.replace(
        concat!("hermes-svc ", env!("CARGO_PKG_VERSION"), " wrote"),
        "hermes-svc 9.9.9 wrote",
    );
    assert_ne!(other_version, text);
    assert_eq!(body(&other_version), body(&text));
    assert_eq!(provenance(&other_version), Provenance::Pristine);
}

#[test]
fn job_reader_takes_foreign_shapes_without_guessing() {
    let binary = {
        let mut d = Dictionary::new();
        d.insert("Label".into(), Value::String("ai.hermes.gateway".into()));
        d.insert("Program".into(), Value::String("/opt/hermes".into()));
        d.insert("KeepAlive".into(), Value::Boolean(true));
        let mut out = Vec::new();
        Value::Dictionary(d).to_writer_binary(&mut out).unwrap();
        out
    };
    let job = Job::parse(&binary).unwrap();
    assert_eq!(job.label.as_deref(), Some("ai.hermes.gateway"));
    assert_eq!(job.program.as_deref(), Some("/opt/hermes"));
    assert!(job.arguments.is_empty());
    assert!(matches!(
        Job::parse(b"<plist><array/></plist>"),
        Err(JobError::NotADictionary)
    ));
    assert!(matches!(Job::parse(b"garbage"), Err(JobError::Parse(_))));
}
