//! docs/api.openapi.json against the real server: every documented operation is served,
//! every answer's status is documented for its operation, every documented status is seen,
//! each JSON answer holds what its schema requires, and each error's code is named in the
//! description of the answer it came with.

use std::collections::BTreeSet;
use std::fs;

use serde_json::{json, Value};

use crate::api_rig::{http, http_partial, Answer, ApiRig};

fn document() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/api.openapi.json");
    serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap()
}

/// `#/components/schemas/X` → that schema.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let pointer = r.strip_prefix('#').expect("a local $ref");
            resolve(
                doc,
                doc.pointer(pointer).unwrap_or_else(|| panic!("no {r}")),
            )
        }
        None => schema,
    }
}

fn type_matches(name: &str, value: &Value) -> bool {
    match name {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_u64() || value.is_i64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        other => panic!("unknown type {other}"),
    }
}

/// The parts of JSON Schema the document uses: `$ref`, `allOf`, `anyOf`, `type`, `enum`,
/// `const`, `required`, `properties`, `additionalProperties: false`, `items`.
fn check(doc: &Value, schema: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
    let schema = resolve(doc, schema);
    for part in schema["allOf"].as_array().into_iter().flatten() {
        check(doc, part, value, at, errors);
    }
    if let Some(any) = schema["anyOf"].as_array() {
        let fits = |part| {
            let mut e = Vec::new();
            check(doc, part, value, at, &mut e);
            e.is_empty()
        };
        if !any.iter().any(fits) {
            errors.push(format!("{at}: {value} fits none of {any:?}"));
        }
    }
    if let Some(constant) = schema.get("const") {
        if constant != value {
            errors.push(format!("{at}: {value} is not {constant}"));
        }
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    if !types.is_empty() && !types.iter().any(|t| type_matches(t, value)) {
        errors.push(format!("{at}: {value} is not {types:?}"));
        return;
    }
    if let Some(allowed) = schema["enum"].as_array() {
        if !allowed.contains(value) {
            errors.push(format!("{at}: {value} is not one of {allowed:?}"));
        }
    }
    if let Some(object) = value.as_object() {
        for field in schema["required"].as_array().into_iter().flatten() {
            let field = field.as_str().unwrap();
            if !object.contains_key(field) {
                errors.push(format!("{at}: required {field:?} is missing"));
            }
        }
        let properties = schema["properties"].as_object();
        for (key, v) in object {
            match properties.and_then(|p| p.get(key)) {
                Some(s) => check(doc, s, v, &format!("{at}.{key}"), errors),
                None if schema["additionalProperties"] == json!(false) => {
                    errors.push(format!("{at}: {key:?} is not documented"))
                }
                None => {}
            }
        }
    }
    if let (Some(items), Some(array)) = (schema.get("items"), value.as_array()) {
        for (i, v) in array.iter().enumerate() {
            check(doc, items, v, &format!("{at}[{i}]"), errors);
        }
    }
}

/// One request the test makes: the documented operation it exercises, and how.
struct Example {
    op: (&'static str, &'static str),
    path: String,
    body: Option<Vec<u8>>,
}

fn get(template: &'static str, path: impl Into<String>) -> Example {
    Example {
        op: (template, "get"),
        path: path.into(),
        body: None,
    }
}

fn post(template: &'static str, body: Value) -> Example {
    Example {
        op: (template, "post"),
        path: template.into(),
        body: Some(body.to_string().into_bytes()),
    }
}

#[test]
fn the_server_answers_as_its_openapi_document_says() {
    let doc = document();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1."));
    let rig = ApiRig::start();
    rig.append("e1");
    rig.append("e2");
    let message = json!({"adapter": "qq", "target": "group:G1", "text": "hi", "idempotency_key": "k", "reply_to": "r1", "policy": "at-least-once"});
    let state_file = rig.profile.home().join("state/gateway.json");
    let spool_file = rig.spool.dir().join("events.jsonl");

    // A body that never arrives whole is answered after 10 s: asked first, read last; an
    // upload that stops likewise.
    let slow = {
        let socket = rig.socket();
        std::thread::spawn(move || http_partial(&socket, "POST", "/v1/messages", 100, b"{"))
    };
    let slow_upload = {
        let socket = rig.socket();
        std::thread::spawn(move || http_partial(&socket, "POST", "/v1/media", 100, b"\x89PNG"))
    };
    let mut answers: Vec<(Example, Answer)> = Vec::new();
    let run = |examples: Vec<Example>| -> Vec<(Example, Answer)> {
        let mut answers = vec![];
        for e in examples {
            let method = e.op.1.to_uppercase();
            let answer = http(&rig.socket(), &method, &e.path, e.body.as_deref());
            answers.push((e, answer));
        }
        answers
    };
    answers.extend(run(vec![
        get("/v1/health", "/v1/health"), // 503: no state file yet
        get("/v1/events", "/v1/events"),
        get("/v1/events", "/v1/events?after=end&wait=10ms&limit=5"),
        get("/v1/events", "/v1/events?limit=0"),
        get("/v1/events", "/v1/events?after=i1.o10.h0"),
        post("/v1/messages", message.clone()),
        post("/v1/messages", message.clone()),
        post("/v1/messages", json!({"adapter": "qq"})),
        post(
            "/v1/messages",
            json!({"adapter": "qq", "target": "group:G1", "text": "other", "idempotency_key": "k"}),
        ),
        post(
            "/v1/messages",
            json!({"adapter": "qq", "target": "group:G", "text": "x".repeat(70_000), "idempotency_key": "long"}),
        ),
        post(
            "/v1/messages",
            json!({"adapter": "qq", "target": "group:G", "text": "x".repeat(hermes_svc::api::MAX_BODY), "idempotency_key": "big"}),
        ),
        Example {
            op: ("/v1/messages", "post"),
            path: "/v1/messages".into(),
            body: Some(
                r#"{"adapter":"qq","target":"group:G","text":"a","idempotency_key":"d","idempotency_key":"e"}"#
                    .into(),
            ),
        },

        post(
            "/v1/messages",
            json!({"adapter": "qq", "target": "group:G", "text": "fail-io", "idempotency_key": "io"}),
        ),
        post(
            "/v1/messages",
            json!({"adapter": "qq", "target": "group:G", "text": "no-outbox", "idempotency_key": "no"}),
        ),
    ]));
    let id = answers
        .iter()
        .find(|(e, a)| e.path == "/v1/messages" && a.status == 202)
        .map(|(_, a)| a.json()["id"].as_str().unwrap().to_owned())
        .expect("a message was queued");
    // Files: one put in, read out, attached; the store's and the platforms' refusals.
    let png = [b"\x89PNG\r\n\x1a\n".as_slice(), &[7u8; 300]].concat();
    let upload = |path: &str, bytes: Vec<u8>| Example {
        op: ("/v1/media", "post"),
        path: path.into(),
        body: Some(bytes),
    };
    answers.extend(run(vec![
        upload("/v1/media?name=chart.png", png.clone()),
        upload(
            "/v1/media",
            vec![0u8; hermes_svc::api::MAX_UPLOAD as usize + 1],
        ),
    ]));
    let media = answers[answers.len() - 2].1.json()["id"]
        .as_str()
        .expect("an upload is answered with its id")
        .to_owned();
    let attach = |adapter: &str, target: &str, key: &str, media: &str| {
        post(
            "/v1/messages",
            json!({"adapter": adapter, "target": target, "text": "the chart", "idempotency_key": key, "attachments": [media]}),
        )
    };
    answers.extend(run(vec![
        get("/v1/media/{id}", format!("/v1/media/{media}")),
        get("/v1/media/{id}", "/v1/media/file_none_gone.png"),
        attach("dc", "channel:77", "file", &media),
        attach("qq", "group:G", "file-qq", &media),
        attach("dc", "channel:77", "file-gone", "file_none_gone.png"),
    ]));
    let media_dir = rig.profile.media_dir();
    fs::rename(&media_dir, media_dir.with_extension("moved")).unwrap();
    fs::write(&media_dir, b"not a directory").unwrap();
    answers.extend(run(vec![
        upload("/v1/media", png.clone()),
        get("/v1/media/{id}", format!("/v1/media/{media}")),
    ]));
    fs::remove_file(&media_dir).unwrap();
    fs::rename(media_dir.with_extension("moved"), &media_dir).unwrap();
    answers.extend(run(vec![
        get("/v1/messages/{id}", format!("/v1/messages/{id}")),
        get("/v1/messages/{id}", "/v1/messages/nope"),
        get("/v1/messages/{id}", "/v1/messages/%FF"),
    ]));
    fs::write(&state_file, b"{\"not\": \"a state file\"}").unwrap();
    answers.extend(run(vec![get("/v1/health", "/v1/health")]));
    let state = json!({"updated_at": "2024-05-01T09:00:00.000Z", "pid": 1, "profile": "agent", "stale_after_ms": 16000, "summary": "1/1 adapters ready",
        "components": [{"name": "qq", "kind": "adapter (qq)", "state": "ready", "fresh": true, "last_beat_age_ms": 10, "deadline_ms": 45000,
            "reconnects": 0, "attempts": 1, "last_error": null, "outage_ms": null}],
        "outbox": {"depth": 1, "oldest_queued_secs": 3, "sent": 5, "failed": 0, "unknown": 0},
        "deliveries": [{"job": "report", "message": "m1", "state": "sent", "updated_at": "2024-05-01T09:00:00.000Z", "last_error": null},
            {"job": "never", "message": null, "state": null, "updated_at": null, "last_error": null}],
        "api": rig.api_health()});
    fs::write(&state_file, state.to_string()).unwrap();
    answers.extend(run(vec![get("/v1/health", "/v1/health")]));
    // A spool that cannot be read: a FIFO where the file should be.
    fs::rename(&spool_file, spool_file.with_extension("moved")).unwrap();
    nix::unistd::mkfifo(&spool_file, nix::sys::stat::Mode::S_IRWXU).unwrap();
    answers.extend(run(vec![get("/v1/events", "/v1/events")]));
    fs::remove_file(&spool_file).unwrap();
    fs::rename(spool_file.with_extension("moved"), &spool_file).unwrap();
    answers.push((
        Example {
            op: ("/v1/messages", "post"),
            path: "/v1/messages".into(),
            body: None,
        },
        slow.join().unwrap(),
    ));
    answers.push((
        Example {
            op: ("/v1/media", "post"),
            path: "/v1/media".into(),
            body: None,
        },
        slow_upload.join().unwrap(),
    ));

    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            for status in op["responses"].as_object().unwrap().keys() {
                documented.insert((path.clone(), method.clone(), status.clone()));
            }
        }
    }
    let paths: BTreeSet<&str> = documented.iter().map(|(p, _, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        BTreeSet::from([
            "/v1/events",
            "/v1/health",
            "/v1/media",
            "/v1/media/{id}",
            "/v1/messages",
            "/v1/messages/{id}"
        ]),
        "the document describes the routes the server has"
    );

    let mut seen = BTreeSet::new();
    let mut errors = Vec::new();
    for (example, answer) in &answers {
        let (path, method) = example.op;
        let status = answer.status.to_string();
        let at = format!("{method} {} -> {status}", example.path);
        let Some(response) = doc["paths"][path][method]["responses"].get(&status) else {
            errors.push(format!("{at}: status not documented"));
            continue;
        };
        seen.insert((path.to_owned(), method.to_owned(), status.clone()));
        let Some(schema) = response.pointer("/content/application~1json/schema") else {
            continue;
        };
        assert_eq!(
            answer.headers.get("content-type").map(String::as_str),
            Some("application/json"),
            "{at}"
        );
        let body = answer.json();
        check(&doc, schema, &body, &at, &mut errors);
        if let Some(code) = body.pointer("/error/code").and_then(Value::as_str) {
            let description = response["description"].as_str().unwrap_or_default();
            if !description.contains(&format!("`{code}`")) {
                errors.push(format!(
                    "{at}: code {code:?} is not named in {description:?}"
                ));
            }
        }
        for header in response["headers"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(h, _)| h)
        {
            if !answer.headers.contains_key(&header.to_ascii_lowercase()) {
                errors.push(format!("{at}: documented header {header} is missing"));
            }
        }
    }
    assert!(errors.is_empty(), "{errors:#?}");
    let unseen: Vec<_> = documented.difference(&seen).collect();
    assert!(
        unseen.is_empty(),
        "documented but never answered: {unseen:?}"
    );
    // The example bodies the document gives for a request are ones the server takes.
    let request = &doc["components"]["schemas"]["SendRequest"];
    let mut errors = Vec::new();
    check(&doc, request, &message, "SendRequest", &mut errors);
    assert!(errors.is_empty(), "{errors:#?}");

    query_examples_are_taken_and_empty_values_refused(&doc, &rig);
    cursors_look_as_documented(&doc, &answers);
    links_lead_where_they_say(&doc, &rig, &answers);
}

/// Every example value the document gives a query parameter is one the server takes, as
/// is; and a parameter with `minLength` refuses an empty value, naming the parameter.
fn query_examples_are_taken_and_empty_values_refused(doc: &Value, rig: &ApiRig) {
    let mut tried = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let params = op["parameters"].as_array().into_iter().flatten();
            for param in params.filter(|p| p["in"] == "query") {
                let name = param["name"].as_str().unwrap();
                let examples = param["schema"]["examples"].as_array().into_iter().flatten();
                for example in examples {
                    let value = example
                        .as_str()
                        .map_or_else(|| example.to_string(), str::to_owned);
                    let url = format!("{path}?{name}={value}");
                    let a = http(&rig.socket(), &method.to_uppercase(), &url, None);
                    assert_eq!(
                        a.status,
                        200,
                        "the documented example {url}: {}",
                        String::from_utf8_lossy(&a.body)
                    );
                    tried += 1;
                }
                if param["schema"]["minLength"] == json!(1) {
                    let url = format!("{path}?{name}=");
                    let a = http(&rig.socket(), &method.to_uppercase(), &url, None);
                    assert_eq!(a.status, 400, "{url}");
                    assert_eq!(a.json()["error"]["field"], name, "{url}");
                }
            }
        }
    }
    assert!(tried >= 3, "the examples of after and wait were tried");
}

/// `i<inode>.o<offset>.h<hash>`, each lower-case hex: the shape the server's cursors have.
fn cursor_shaped(c: &str) -> bool {
    let parts: Vec<&str> = c.split('.').collect();
    parts.len() == 3
        && parts.iter().zip(['i', 'o', 'h']).all(|(part, tag)| {
            part.strip_prefix(tag).is_some_and(|hex| {
                !hex.is_empty() && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            })
        })
}

/// The cursors the document shows as examples have the shape of those the server hands out.
fn cursors_look_as_documented(doc: &Value, answers: &[(Example, Answer)]) {
    let schemas = &doc["components"]["schemas"];
    let documented = schemas["PagedEvent"]["allOf"][1]["properties"]["cursor"]["examples"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(
            schemas["EventsPage"]["properties"]["next"]["examples"]
                .as_array()
                .into_iter()
                .flatten(),
        )
        .filter_map(Value::as_str)
        .filter(|c| !matches!(*c, "start" | "end"))
        .collect::<Vec<_>>();
    assert!(!documented.is_empty(), "the document shows a cursor");
    let served: Vec<String> = answers
        .iter()
        .filter(|(e, a)| e.op.0 == "/v1/events" && a.status == 200)
        .flat_map(|(_, a)| {
            let page = a.json();
            let mut cursors: Vec<String> = page["events"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| e["cursor"].as_str().map(str::to_owned))
                .collect();
            cursors.extend(page["next"].as_str().map(str::to_owned));
            cursors
        })
        .filter(|c| !matches!(c.as_str(), "start" | "end"))
        .collect();
    assert!(!served.is_empty(), "the server handed out cursors");
    for c in served.iter().map(String::as_str).chain(documented) {
        assert!(cursor_shaped(c), "{c:?} is not shaped like a cursor");
    }
}

/// Each documented link (OpenAPI 3 Links) from an answer the server gave leads, with the
/// parameters it names taken from that answer's body, to an operation that answers 200.
fn links_lead_where_they_say(doc: &Value, rig: &ApiRig, answers: &[(Example, Answer)]) {
    let operation = |id: &str| {
        doc["paths"]
            .as_object()
            .unwrap()
            .iter()
            .flat_map(|(path, item)| {
                item.as_object()
                    .unwrap()
                    .iter()
                    .map(move |(method, op)| (path.clone(), method.clone(), op))
            })
            .find(|(_, _, op)| op["operationId"] == id)
            .unwrap_or_else(|| panic!("a link names operation {id}, which is not documented"))
    };
    let mut followed = BTreeSet::new();
    for (example, answer) in answers {
        let (path, method) = example.op;
        let status = answer.status.to_string();
        let response = &doc["paths"][path][method]["responses"][&status];
        for (name, link) in response["links"].as_object().into_iter().flatten() {
            let (target, target_method, _) = operation(link["operationId"].as_str().unwrap());
            let body = answer.json();
            let mut url = target.clone();
            for (param, expression) in link["parameters"].as_object().unwrap() {
                let pointer = expression
                    .as_str()
                    .and_then(|e| e.strip_prefix("$response.body#"))
                    .unwrap_or_else(|| panic!("{name}: {expression} is not a body pointer"));
                let value = body
                    .pointer(pointer)
                    .and_then(Value::as_str)
                    .unwrap_or_else(|| panic!("{name}: no {pointer} in the {status} answer"));
                url = url.replace(&format!("{{{param}}}"), value);
            }
            let a = http(&rig.socket(), &target_method.to_uppercase(), &url, None);
            assert_eq!(
                a.status, 200,
                "link {name} from {method} {path} {status}: {url}"
            );
            assert_eq!(a.json()["id"], body["id"], "link {name}: {url}");
            followed.insert((path, status.clone()));
        }
    }
    assert_eq!(
        followed,
        BTreeSet::from([
            ("/v1/messages", "200".into()),
            ("/v1/messages", "202".into())
        ]),
        "POST /v1/messages links both its answers to the message"
    );
}
