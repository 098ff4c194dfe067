//! A post's attached files, as REST v4 serves them (api.mattermost.com, "Get a file", "Get
//! metadata for a file"; the server's `api4/file.go`): `GET /api/v4/files/{file_id}` answers
//! the bytes with the file's type, `GET /api/v4/files/{file_id}/info` its `FileInfo`. Both
//! need a session that may read the post's channel (`read_channel`): no token or a wrong one
//! is 401, a file of a channel the bot is not in 403, an unknown id 404
//! (`app.file_info.get.app_error`, as `GetFileInfo` answers a missing row).

use super::super::reply::Answer;
use super::endpoint::{app_error, unauthorized};
use super::state::MattermostState;

/// `path` is what follows `/api/v4/`: `files/{id}` or `files/{id}/info`.
pub(super) fn get(token: Option<&str>, state: &MattermostState, path: &str) -> Answer {
    let rest = path.trim_start_matches("files/");
    let (id, info) = match rest.strip_suffix("/info") {
        Some(id) => (id, true),
        None => (rest, false),
    };
    if info {
        state.count(|s| s.file_info_calls += 1);
    }
    if !state.authorised(token) {
        return unauthorized();
    }
    let Some((file_info, file)) = state.file(id) else {
        return app_error(
            404,
            "app.file_info.get.app_error",
            "Unable to get the file info.",
        );
    };
    if !state.is_member(file_info["channel_id"].as_str().unwrap_or("")) {
        return app_error(
            403,
            "api.context.permissions.app_error",
            "You do not have the appropriate permissions.",
        );
    }
    if info {
        return Answer::new(200, file_info);
    }
    state.count(|s| s.file_downloads += 1);
    Answer::bytes(file.mime, file.bytes)
}
