//! Hermes's cron deliveries to an adopted platform, pointed at the Relay
//! (docs/research/adopt.md §6). After adopt Hermes holds no token for the platform, so a job
//! that delivers to `telegram` (its home channel), `telegram:CHAT[:THREAD]` or `origin` (a
//! Telegram chat) would fail; `relay:ADAPTER/TARGET` reaches the same chat through the
//! gateway (the Relay's chat ids, `agent::relay::chat_id`). Hermes has no thread in a Relay
//! chat id, so a thread is dropped (and said).
//!
//! `cron/jobs.json` is Hermes's file (`cron/jobs.py`, `json.dump(indent=2)`), also holding run
//! state: only each rewritten job's `deliver` value changes, spliced into the text, so every
//! other byte stays; the new value is written as Python writes it (ASCII, `\uXXXX`). The
//! changes are returned for `--undo`, which puts back only what adopt wrote.

use serde_json::Value;

use super::mapping::Adopted;
use crate::platform::Target;

/// One field adopt changed in one job, for `--undo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CronChange {
    pub job_id: String,
    pub field: &'static str,
    pub before: Value,
    pub after: Value,
}

/// `jobs.json` rewritten, what changed, and what could not be carried.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rewrite {
    pub text: String,
    pub changes: Vec<CronChange>,
    pub notes: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum CronError {
    #[error(
        "cron/jobs.json is not JSON Hermes wrote ({0}); fix or move it aside and run adopt again"
    )]
    NotJson(String),
}

/// `text` (Hermes's `cron/jobs.json`) with the deliveries to the `adopted` platforms going
/// through the Relay.
pub fn rewrite(text: &str, adopted: &[Adopted]) -> Result<Rewrite, CronError> {
    let (jobs, spans) = read(text)?;
    let mut out = Rewrite {
        text: String::new(),
        changes: vec![],
        notes: vec![],
    };
    let mut edits = vec![];
    for (job, span) in jobs.iter().zip(&spans) {
        let (Some(span), Some(deliver)) = (span, job.get("deliver")) else {
            continue;
        };
        let id = job["id"].as_str().unwrap_or("?").to_owned();
        let Some(after) = deliver_after(job, deliver, adopted, &id, &mut out.notes) else {
            continue;
        };
        let after = Value::String(after);
        if &after != deliver {
            edits.push((span.clone(), py_json(&after)));
            out.changes.push(CronChange {
                job_id: id,
                field: "deliver",
                before: deliver.clone(),
                after,
            });
        }
    }
    out.text = splice(text, edits);
    Ok(out)
}

/// `text` with the `changes` adopt made put back, where the job still has what adopt wrote;
/// a job changed since (or gone) is left as it is and named.
pub fn restore(text: &str, changes: &[CronChange]) -> Result<(String, Vec<String>), CronError> {
    let (jobs, spans) = read(text)?;
    let mut edits = vec![];
    let mut kept = vec![];
    for c in changes {
        let found = jobs
            .iter()
            .zip(&spans)
            .find(|(j, _)| j["id"].as_str() == Some(&c.job_id));
        match found {
            Some((job, Some(span))) if job.get(c.field) == Some(&c.after) => {
                edits.push((span.clone(), py_json(&c.before)));
            }
            _ => kept.push(format!(
                "cron job {}: its {} changed since adopt; left as it is",
                c.job_id, c.field
            )),
        }
    }
    Ok((splice(text, edits), kept))
}

/// Where a job's `deliver` value is in the text, if it has one.
type Span = Option<std::ops::Range<usize>>;

/// The jobs, and the byte span of each job's `deliver` value (the last, as Python keeps it).
fn read(text: &str) -> Result<(Vec<Value>, Vec<Span>), CronError> {
    let body = text.strip_prefix('\u{feff}').unwrap_or(text);
    let offset = text.len() - body.len();
    let value: Value = serde_json::from_str(body).map_err(|e| CronError::NotJson(e.to_string()))?;
    let jobs = match &value {
        Value::Object(o) => o
            .get("jobs")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        Value::Array(a) => a.clone(),
        _ => {
            return Err(CronError::NotJson(
                "neither {\"jobs\": [...]} nor a list".to_owned(),
            ))
        }
    };
    let mut scan = Scan {
        s: body.as_bytes(),
        i: 0,
    };
    let spans = scan
        .jobs()
        .ok_or_else(|| CronError::NotJson("unreadable".to_owned()))?;
    let spans: Vec<_> = spans
        .into_iter()
        .map(|s| s.map(|r| r.start + offset..r.end + offset))
        .collect();
    if spans.len() != jobs.len() {
        return Err(CronError::NotJson(
            "its jobs could not be located".to_owned(),
        ));
    }
    Ok((jobs, spans))
}

fn splice(text: &str, mut edits: Vec<(std::ops::Range<usize>, String)>) -> String {
    edits.sort_by_key(|(r, _)| std::cmp::Reverse(r.start));
    let mut out = text.to_owned();
    for (range, with) in edits {
        out.replace_range(range, &with);
    }
    out
}

/// The job's new `deliver`, `None` when nothing in it names an adopted platform.
fn deliver_after(
    job: &Value,
    deliver: &Value,
    adopted: &[Adopted],
    id: &str,
    notes: &mut Vec<String>,
) -> Option<String> {
    let text = match deliver {
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .filter_map(|p| p.as_str())
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .collect::<Vec<_>>()
            .join(","),
        _ => return None,
    };
    let find = |platform: &str| {
        adopted
            .iter()
            .find(|a| a.hermes_platform.eq_ignore_ascii_case(platform.trim()))
    };
    let origin = job
        .get("origin")
        .filter(|o| o["platform"].is_string() && !o["chat_id"].is_null());
    let from_origin = |a: &Adopted| -> Option<String> {
        let o = origin?;
        if !o["platform"]
            .as_str()?
            .eq_ignore_ascii_case(a.hermes_platform)
        {
            return None;
        }
        let chat = match &o["chat_id"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        target_of(a.kind, &chat, o["chat_type"].as_str())
    };
    let mut touched = false;
    let mut parts = vec![];
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (platform, rest) = part
            .split_once(':')
            .map_or((part, None), |(p, r)| (p, Some(r)));
        let via = |a: &Adopted, target: Option<String>, notes: &mut Vec<String>| match target {
            Some(t) => Some(format!("relay:{}/{t}", a.adapter)),
            None => {
                notes.push(format!("cron job {id}: its delivery {part:?} names no {} chat hermes-svc can address; left as it is, and it fails until you give it deliver: relay:{}/TARGET", a.hermes_platform, a.adapter));
                None
            }
        };
        let new = if part.eq_ignore_ascii_case("origin") {
            let a = origin.and_then(|o| find(o["platform"].as_str().unwrap_or_default()));
            a.and_then(|a| via(a, from_origin(a), notes))
        } else if part.eq_ignore_ascii_case("all") {
            // `all` is every platform with a home channel in Hermes's environment, which the
            // adopted ones leave: theirs are added, once.
            let homes: Vec<String> = adopted
                .iter()
                .filter_map(|a| Some(format!("relay:{}/{}", a.adapter, a.home_target.as_ref()?)))
                .filter(|h| !text.split(',').any(|p| p.trim() == h))
                .collect();
            (!homes.is_empty()).then(|| {
                std::iter::once("all".to_owned())
                    .chain(homes)
                    .collect::<Vec<_>>()
                    .join(",")
            })
        } else if let Some(a) = find(platform) {
            match rest {
                None => via(a, from_origin(a).or_else(|| a.home_target.clone()), notes),
                Some(rest) => {
                    let (chat, thread) = split_thread(a.kind, rest.trim());
                    if thread {
                        notes.push(format!("cron job {id}: delivery {part:?} goes to the chat itself, not its thread (the Relay's chat ids have no thread)"));
                    }
                    via(a, target_of(a.kind, chat, None), notes)
                }
            }
        } else {
            None
        };
        touched |= new.is_some();
        parts.push(new.unwrap_or_else(|| part.to_owned()));
    }
    touched.then(|| parts.join(","))
}

/// `CHAT` and whether a thread followed it, in Hermes's `platform:CHAT[:THREAD]`.
fn split_thread<'a>(kind: &str, rest: &'a str) -> (&'a str, bool) {
    match kind {
        "matrix" => rest
            .rfind(":$")
            .map_or((rest, false), |i| (&rest[..i], true)),
        "qqbot" | "weixin" => (rest, false),
        _ => rest
            .split_once(':')
            .map_or((rest, false), |(c, _)| (c, true)),
    }
}

/// Hermes's chat id `chat` on a platform of `kind` as the wing's target text.
fn target_of(kind: &str, chat: &str, chat_type: Option<&str>) -> Option<String> {
    let candidates: Vec<String> = match kind {
        "feishu" if chat.starts_with("ou_") => vec![format!("user:{chat}")],
        "feishu" => vec![format!("chat:{chat}")],
        "weixin" => vec![format!("user:{chat}")],
        "qqbot" => match chat_type {
            Some("dm") => vec![format!("user:{chat}")],
            Some("group") => vec![format!("group:{chat}")],
            _ => vec![],
        },
        _ => vec![chat.to_owned()],
    };
    candidates
        .into_iter()
        .find_map(|c| Target::parse(kind, &c).ok())
        .map(|t| t.to_string())
}

/// `value` as Python's `json.dump` writes it: ASCII only, non-ASCII as `\uXXXX`.
fn py_json(value: &Value) -> String {
    let text = value.to_string();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out
}

/// A JSON text walked for the spans of its jobs' `deliver` values.
struct Scan<'a> {
    s: &'a [u8],
    i: usize,
}

impl Scan<'_> {
    fn ws(&mut self) {
        while self.s.get(self.i).is_some_and(|b| b.is_ascii_whitespace()) {
            self.i += 1;
        }
    }

    fn eat(&mut self, b: u8) -> Option<()> {
        self.ws();
        (self.s.get(self.i) == Some(&b)).then(|| self.i += 1)
    }

    /// The jobs array (`{"jobs": [...]}` or a bare list): each job's `deliver` span.
    fn jobs(&mut self) -> Option<Vec<Span>> {
        self.ws();
        if self.s.get(self.i) == Some(&b'[') {
            return self.job_list();
        }
        let mut jobs = vec![];
        self.members(|scan, key| {
            if key == "jobs" {
                scan.ws();
                if scan.s.get(scan.i) == Some(&b'[') {
                    jobs = scan.job_list()?;
                    return Some(());
                }
            }
            scan.value()
        })?;
        Some(jobs)
    }

    fn job_list(&mut self) -> Option<Vec<Span>> {
        let mut out = vec![];
        self.items(|scan| {
            scan.ws();
            let mut span = None;
            if scan.s.get(scan.i) == Some(&b'{') {
                scan.members(|scan, key| {
                    scan.ws();
                    let start = scan.i;
                    scan.value()?;
                    if key == "deliver" {
                        span = Some(start..scan.i);
                    }
                    Some(())
                })?;
            } else {
                scan.value()?;
            }
            out.push(span);
            Some(())
        })?;
        Some(out)
    }

    fn members(&mut self, mut f: impl FnMut(&mut Self, &str) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            self.ws();
            let key = self.string()?;
            self.eat(b':')?;
            f(self, &key)?;
            if self.eat(b',').is_none() {
                return self.eat(b'}');
            }
        }
    }

    fn items(&mut self, mut f: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.eat(b'[')?;
        if self.eat(b']').is_some() {
            return Some(());
        }
        loop {
            f(self)?;
            if self.eat(b',').is_none() {
                return self.eat(b']');
            }
        }
    }

    fn string(&mut self) -> Option<String> {
        let start = self.i;
        (self.s.get(self.i) == Some(&b'"')).then_some(())?;
        self.i += 1;
        loop {
            match self.s.get(self.i)? {
                b'\\' => self.i += 2,
                b'"' => {
                    self.i += 1;
                    return serde_json::from_slice(&self.s[start..self.i]).ok();
                }
                _ => self.i += 1,
            }
        }
    }

    fn value(&mut self) -> Option<()> {
        self.ws();
        match self.s.get(self.i)? {
            b'"' => self.string().map(|_| ()),
            b'{' => self.members(|scan, _| scan.value()),
            b'[' => self.items(Self::value),
            _ => {
                let start = self.i;
                while self
                    .s
                    .get(self.i)
                    .is_some_and(|b| !b",]} \t\r\n".contains(b))
                {
                    self.i += 1;
                }
                (self.i > start).then_some(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adopted() -> Vec<Adopted> {
        let a = |kind: &'static str, home: Option<&str>| Adopted {
            kind,
            hermes_platform: kind,
            adapter: kind.to_owned(),
            variables: vec![],
            home_target: home.map(str::to_owned),
        };
        vec![a("telegram", Some("chat:-1001")), a("discord", None)]
    }

    const JOBS: &str = r#"{
  "jobs": [
    {
      "id": "a1",
      "name": "caf\u00e9",
      "deliver": "telegram",
      "origin": null
    },
    {
      "id": "b2",
      "deliver": "origin",
      "origin": {"platform": "discord", "chat_id": "222", "chat_type": "group"},
      "schedule": {"kind": "cron", "expr": "0 9 * * *"}
    },
    {
      "id": "c3",
      "deliver": "telegram:-100:17,whatsapp,local",
      "origin": {"platform": "whatsapp", "chat_id": "x"}
    },
    {"id": "d4", "deliver": "all"},
    {"id": "e5", "deliver": "signal"}
  ],
  "updated_at": "2026-12-01T09:00:00"
}"#;

    #[test]
    fn deliveries_to_adopted_platforms_go_through_the_relay_and_nothing_else_moves() {
        let r = rewrite(JOBS, &adopted()).unwrap();
        let after: Vec<(&str, &str)> = r
            .changes
            .iter()
            .map(|c| (c.job_id.as_str(), c.after.as_str().unwrap()))
            .collect();
        assert_eq!(
            after,
            [
                ("a1", "relay:telegram/chat:-1001"),
                ("b2", "relay:discord/channel:222"),
                ("c3", "relay:telegram/chat:-100,whatsapp,local"),
                ("d4", "all,relay:telegram/chat:-1001"),
            ]
        );
        let expected = JOBS
            .replace(
                r#""deliver": "telegram","#,
                r#""deliver": "relay:telegram/chat:-1001","#,
            )
            .replace(
                r#""deliver": "origin""#,
                r#""deliver": "relay:discord/channel:222""#,
            )
            .replace(
                "telegram:-100:17,whatsapp",
                "relay:telegram/chat:-100,whatsapp",
            )
            .replace(
                r#""deliver": "all""#,
                r#""deliver": "all,relay:telegram/chat:-1001""#,
            );
        assert_eq!(
            r.text, expected,
            "only the deliver values changed, byte for byte"
        );
        assert!(r
            .notes
            .iter()
            .any(|n| n.contains("c3") && n.contains("thread")));
        let (back, kept) = restore(&r.text, &r.changes).unwrap();
        assert_eq!(back, JOBS);
        assert!(kept.is_empty());
    }

    #[test]
    fn a_rerun_changes_nothing_and_undo_spares_what_the_user_changed() {
        let r = rewrite(JOBS, &adopted()).unwrap();
        let again = rewrite(&r.text, &adopted()).unwrap();
        assert!(again.changes.is_empty());
        assert_eq!(again.text, r.text);
        let edited = r.text.replace("relay:discord/channel:222", "local");
        let (back, kept) = restore(&edited, &r.changes).unwrap();
        assert!(back.contains(r#""deliver": "local""#));
        assert_eq!(kept.len(), 1);
        assert!(matches!(
            rewrite("{not json", &adopted()),
            Err(CronError::NotJson(_))
        ));
        assert_eq!(py_json(&Value::from("é🙂")), r#""\u00e9\ud83d\ude42""#);
    }
}
