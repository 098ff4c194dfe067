//! Files from a cron job: its output names them as Hermes does (`MEDIA:/path`), and those
//! inside the job's `attach-from` reach the chat natively after the text, with the same
//! bytes; those outside it (the profile's own files, a link out, a dotfile) are said at the
//! top of the text and never sent. Profile names start with `mc`.

use std::fs;
use std::time::Duration;

use crate::harness::wait_for;
use crate::media_out::{pdf, sha256};
use crate::outbox_rig::{sigterm, Rig};

#[test]
fn a_cron_job_attaches_the_files_its_output_names_from_attach_from_and_no_others() {
    // Every 2 s, so the first run comes soon; the test reads the first delivery only.
    let rig = Rig::new(
        "mccron",
        "[[cron]]\nname = \"report\"\nschedule = \"*/2 * * * * *\"\n\
         command = [\"/bin/sh\", \"-c\", \"printf 'Daily report\\\\nMEDIA:%s/reports/report.pdf\\\\n\
         MEDIA:%s/secret.txt MEDIA:%s/reports/link.txt MEDIA:%s/reports/.hidden.pdf\\\\n' \
         \\\"$PWD\\\" \\\"$PWD\\\" \\\"$PWD\\\" \\\"$PWD\\\"\"]\n\
         deliver = \"dc:channel:4343\"\nattach-from = [\"reports\"]\n",
    );
    let home = rig.profile_home();
    fs::create_dir_all(home.join("reports")).unwrap();
    let pdf = pdf();
    fs::write(home.join("reports/report.pdf"), &pdf).unwrap();
    fs::write(home.join("reports/.hidden.pdf"), b"hidden").unwrap();
    fs::write(home.join("secret.txt"), b"not for the chat").unwrap();
    std::os::unix::fs::symlink(home.join("secret.txt"), home.join("reports/link.txt")).unwrap();

    let mut gw = rig.gateway("");
    let (text, file) = wait_for(Duration::from_secs(30), "a run's text and file", || {
        let posts = rig.posts();
        let text = posts.iter().find(|p| p.content.contains("Daily report"))?;
        let file = posts.iter().find(|p| !p.files.is_empty())?;
        Some((text.clone(), file.clone()))
    });
    sigterm(&mut gw);

    assert_eq!(text.target_id, "4343");
    assert!(text.files.is_empty(), "the text goes alone: {text:?}");
    for (name, why) in [
        ("secret.txt", "outside the job's attach-from"),
        ("link.txt", "outside the job's attach-from"),
        (".hidden.pdf", "dotfile"),
    ] {
        let note = format!("[a file the job named, {name}, was not sent: it is");
        let line = text
            .content
            .lines()
            .find(|l| l.starts_with(&note))
            .unwrap_or_else(|| panic!("a note for {name} in {:?}", text.content));
        assert!(line.contains(why), "{line}");
    }
    assert!(
        !text.content.contains("MEDIA:") && !text.content.contains("not for the chat"),
        "no tag and no refused content reaches the chat: {:?}",
        text.content
    );
    assert!(
        text.content.ends_with("Daily report"),
        "the notes come first, then the output: {:?}",
        text.content
    );
    let posts = rig.posts();
    let sent: Vec<(Option<&str>, &str)> = posts
        .iter()
        .flat_map(|p| p.files.iter())
        .map(|f| (f.filename.as_deref(), f.sha256.as_str()))
        .collect();
    assert!(
        sent.iter()
            .all(|s| *s == (Some("report.pdf"), sha256(&pdf).as_str())),
        "only the report is ever sent, with its bytes: {sent:?}"
    );
    assert_eq!(file.content, "", "the file goes without a caption");
}
